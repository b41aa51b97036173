// llama.cpp's packed lattice (SPEC section 6.5): n_blocks * block_size rows of n_embd floats;
// row 0 of each block zero; row p = [K candidate ids as float | K*K scores, predecessor i to
// candidate j at K + i*K + j | zeros]. One writer for the CPU backend and the lattice kernel.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hd.cuh"

namespace dfsel {

// outputs.packed_row_stride: 0 means rows of exactly n_embd floats.
DFSEL_HD size_t packed_stride(size_t given, int64_t n_embd) {
  return given ? given : (size_t)n_embd * 4;
}

DFSEL_HD float* packed_row(float* packed, size_t stride, int b, int block_size, int p) {
  return (float*)((uint8_t*)packed + ((size_t)b * block_size + p) * stride);
}

// Element e of row p >= 1: id_of(j) is candidate j's token id, score_of(i, j) its score.
template <class Ids, class Scores>
DFSEL_HD float packed_value(int64_t e, int k, Ids id_of, Scores score_of) {
  if (e < k) return (float)id_of((int)e);
  const int64_t o = e - k;
  if (o < (int64_t)k * k) return score_of((int)(o / k), (int)(o % k));
  return 0.0f;
}

}  // namespace dfsel
