// ggml's K-quant rows (Q4_K, Q6_K) widened to floats: the smallest published drafts store
// their codebooks this way. The GGUF selector view and the plan's weight widening share them.
#pragma once

#include <stdint.h>

namespace dfsel::gguf {

// Dequantises one row of n elements (n a multiple of 256) stored as Q4_K or Q6_K.
void dequantize_q4_k(const uint8_t* src, int64_t n, float* out);
void dequantize_q6_k(const uint8_t* src, int64_t n, float* out);

}  // namespace dfsel::gguf
