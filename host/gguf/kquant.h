// ggml's K-quant rows (Q4_K, Q6_K) widened to floats: the smallest published drafts store
// their codebooks this way. The GGUF selector view and the plan's weight widening share them.
#pragma once

#include <stddef.h>
#include <stdint.h>

namespace dfsel::gguf {

// Dequantises one row of n elements (n a multiple of 256) stored as Q4_K or Q6_K.
void dequantize_q4_k(const uint8_t* src, int64_t n, float* out);
void dequantize_q6_k(const uint8_t* src, int64_t n, float* out);

// rows rows of n elements stored as Q4_K or Q6_K, src_pitch bytes apart, widened to BF16
// (round to nearest even) into dst, n values a row. The one widening of the GGUF view and
// of plan creation.
void widen_to_bf16(const uint8_t* src, int type, int64_t rows, int64_t n, size_t src_pitch, uint16_t* dst);

}  // namespace dfsel::gguf
