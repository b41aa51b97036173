// ggml's block types that dfsel widens to BF16 (Q4_0, Q4_1, Q5_0, Q5_1 and the K-quants Q2_K to
// Q6_K): drafts quantised by llama.cpp store their heads this way. The GGUF views and plan
// creation share the one widening.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dfsel/dfsel.h"

namespace dfsel::gguf {

// Decodes n values of a row stored as type (is_widened_type, n a multiple of its block), each
// the float ggml's to_float gives, bit for bit.
void dequantize_row(dfsel_type type, const uint8_t* src, int64_t n, float* out);

// rows rows of n elements stored as type, src_pitch bytes apart, widened to BF16 (round to
// nearest even) into dst, n values a row. The one widening of the GGUF view and of plan
// creation.
void widen_to_bf16(const uint8_t* src, dfsel_type type, int64_t rows, int64_t n, size_t src_pitch, uint16_t* dst);

// ggml's name of a ggml type id ("iq2_xxs", "q4_K"), or nullptr for an id ggml has not or no
// longer has: for messages that refuse a type dfsel does not read.
const char* ggml_type_label(int id);

}  // namespace dfsel::gguf
