// What the CPU DSpark pass's AVX2 and AVX-512 dot products share (cpu_dspark_pass.cpp,
// cpu_dspark_avx512.cpp): how far ahead W2 is asked for, where element r of a stored row
// starts, and the eight chains' meeting in kernels/common/dspark_math.cuh's order.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/backend/cpu_dspark_pass.h"
#include "kernels/common/numeric.cuh"

#if defined(__x86_64__)
#include <immintrin.h>

#define DFSEL_AVX2 __attribute__((target("avx2,fma,f16c")))
#define DFSEL_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx2,fma,f16c")))

namespace dfsel {

// The hardware prefetchers do not run far enough ahead of a loop this slow: each load asks
// for the same bytes kPrefetchRows rows on (measured: 153 cycles a row without, 68 with).
constexpr int kPrefetchRows = 8;

// Rows the pass takes at a time. Dot products are stored block by block, row i of block b at
// dot[b * kGroupRows + i], so that a block's eight are one vector load for the rest of the row.
constexpr int kGroupRows = 8;

// Bytes of elements [0, r) of a row stored as T (r a multiple of 8, of 32 for Q8_0).
template <dfsel_type T>
constexpr size_t offset_of(int32_t r) {
  return T == DFSEL_TYPE_F32 ? 4 * (size_t)r : T == DFSEL_TYPE_Q8_0 ? (size_t)r / kQ8Block * sizeof(BlockQ8_0) : 2 * (size_t)r;
}

// ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)), as chained_dot.
DFSEL_AVX2 inline float meet_chains(__m256 c) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// Pairs of rows an AVX-512 call takes for nb blocks: four pairs (eight rows) keep up to four
// blocks' chains within the thirty-two registers; beyond, two.
constexpr int pairs_at_once(int nb) { return nb <= 4 ? 4 : 2; }

// W2 rows [0, 2 * pairs) from `row` . e_b for nb blocks into dot[b * kGroupRows + i], as
// markov_dot;
// false where no such call exists (pairs other than 1 or pairs_at_once(nb), nb above 8).
bool dots_avx512(const uint8_t* row, size_t stride, int pairs, const MarkovPass& p, const float* const* e, int nb,
                 float* dot);

}  // namespace dfsel
#endif
