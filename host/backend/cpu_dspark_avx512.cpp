// The CPU DSpark pass's dot products on AVX-512 (cpu_dspark_lanes.h). Chains stay eight a dot
// product (kernels/common/dspark_math.cuh), so one 512-bit register carries two rows: lanes
// 0-7 are row a's chains, lanes 8-15 row b's, each block's eight e values broadcast to both
// halves. Every lane sees the same fused multiply-adds in the same order as the AVX2 path and
// markov_dot, so the results are bitwise theirs; the wider register only does twice the work
// an instruction.

// GCC 12's AVX-512 intrinsics pass an undefined register through their masked forms, which
// its own -Wuninitialized then reports inside the header (GCC bug 105593); nothing of ours.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "host/backend/cpu_dspark_lanes.h"

#if defined(__x86_64__)

namespace dfsel {

namespace {

// Elements [r, r + 8) of rows a and b: a's in lanes 0-7, b's in lanes 8-15.
template <dfsel_type T>
DFSEL_AVX512 inline __m512 load8x2(const uint8_t* a, const uint8_t* b, int32_t r) {
  switch (T) {
    case DFSEL_TYPE_F32:
      return _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_loadu_ps(reinterpret_cast<const float*>(a) + r)),
                                _mm256_loadu_ps(reinterpret_cast<const float*>(b) + r), 1);
    case DFSEL_TYPE_F16:
    case DFSEL_TYPE_BF16: {
      const __m256i h = _mm256_inserti128_si256(
          _mm256_castsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + 2 * (size_t)r))),
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + 2 * (size_t)r)), 1);
      if (T == DFSEL_TYPE_F16) return _mm512_cvtph_ps(h);
      return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    default: {  // Q8_0: each row's block scale times its quants, one rounding, as q8_value
      const BlockQ8_0* ba = reinterpret_cast<const BlockQ8_0*>(a) + r / kQ8Block;
      const BlockQ8_0* bb = reinterpret_cast<const BlockQ8_0*>(b) + r / kQ8Block;
      const __m128i q = _mm_unpacklo_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(ba->qs + r % kQ8Block)),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(bb->qs + r % kQ8Block)));
      const __m512 d = _mm512_insertf32x8(_mm512_castps256_ps512(_mm256_set1_ps(f16_to_float(ba->d))),
                                          _mm256_set1_ps(f16_to_float(bb->d)), 1);
      return _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q)), d);
    }
  }
}

// Sixteen BF16 elements from r of rows a and b as two registers: elements r..r+7 (a's, then
// b's) and r+8..r+15. Quads reordered so that each 128-bit lane unpacks into four consecutive
// elements, each value landing in the high half of its lane (a BF16 is a float's high half).
DFSEL_AVX512 inline void load16x2_bf16(const uint8_t* a, const uint8_t* b, int32_t r, __m512* lo, __m512* hi) {
  const __m512i ab =
      _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + 2 * (size_t)r))),
                         _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + 2 * (size_t)r)), 1);
  const __m512i x = _mm512_permutexvar_epi64(_mm512_setr_epi64(0, 2, 1, 3, 4, 6, 5, 7), ab);
  *lo = _mm512_castsi512_ps(_mm512_unpacklo_epi16(_mm512_setzero_si512(), x));
  *hi = _mm512_castsi512_ps(_mm512_unpackhi_epi16(_mm512_setzero_si512(), x));
}

// Eight e values from r in both halves of a register.
DFSEL_AVX512 inline __m512 e8x2(const float* e, int32_t r) { return _mm512_broadcast_f32x8(_mm256_loadu_ps(e + r)); }

// The dot products of eight rows, in row order, from their pairs' registers of chains: each
// row's chains meet as meet_chains has them meet, x_k = c_k + c_(k+4), u_k = x_k + x_(k+2),
// u_0 + u_1, but the eight rows at once and into one vector (no trip through memory).
DFSEL_AVX512 inline __m256 meet_eight_rows(__m512 p01, __m512 p23, __m512 p45, __m512 p67) {
  // x of rows 0-3, a 128-bit lane each (c0-3 of each row plus its c4-7), and of rows 4-7.
  const __m512 x03 = _mm512_add_ps(_mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(p01, p23, _MM_SHUFFLE(3, 1, 3, 1)));
  const __m512 x47 = _mm512_add_ps(_mm512_shuffle_f32x4(p45, p67, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(p45, p67, _MM_SHUFFLE(3, 1, 3, 1)));
  // Lane k: u0, u1 of row k, then of row k + 4.
  const __m512 u = _mm512_add_ps(_mm512_shuffle_ps(x03, x47, _MM_SHUFFLE(1, 0, 1, 0)),
                                 _mm512_shuffle_ps(x03, x47, _MM_SHUFFLE(3, 2, 3, 2)));
  // Lane k: the dot products of rows k and k + 4 (twice); gathered into row order.
  const __m512 d = _mm512_add_ps(_mm512_shuffle_ps(u, u, _MM_SHUFFLE(2, 0, 2, 0)), _mm512_shuffle_ps(u, u, _MM_SHUFFLE(3, 1, 3, 1)));
  return _mm512_castps512_ps256(
      _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 0, 0, 0, 0, 0, 0, 0, 0), d));
}

// Rows 2i and 2i + 1 (i < NP) . e_b for NB blocks: NP * NB registers of chains, each e_b load
// serving every pair. The last partial group of eight (R % 8 != 0) touches only the lanes of
// real elements: a lane without one keeps its chain as it was, -0 included.
template <int NP, int NB, dfsel_type T>
DFSEL_AVX512 void dots_pairs(const uint8_t* row, size_t stride, const MarkovPass& p, const float* const* e, float* dot) {
  __m512 acc[NP][NB];
  for (int i = 0; i < NP; ++i)
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_setzero_ps();
  const int32_t full = p.R / 8 * 8;
  const uint8_t* ahead = row + kPrefetchRows * stride;
  int32_t r = 0;
  if (T == DFSEL_TYPE_BF16)  // sixteen at a time: the widening then costs shuffles alone
    for (; r + 16 <= full; r += 16) {
      for (int i = 0; i < 2 * NP; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead + i * stride + offset_of<T>(r)), _MM_HINT_T0);
      __m512 lo[NP], hi[NP];
      for (int i = 0; i < NP; ++i) load16x2_bf16(row + 2 * i * stride, row + (2 * i + 1) * stride, r, &lo[i], &hi[i]);
      for (int b = 0; b < NB; ++b) {
        const __m512 e0 = e8x2(e[b], r), e1 = e8x2(e[b], r + 8);
        for (int i = 0; i < NP; ++i) acc[i][b] = _mm512_fmadd_ps(hi[i], e1, _mm512_fmadd_ps(lo[i], e0, acc[i][b]));
      }
    }
  for (; r < full; r += 8) {
    for (int i = 0; i < 2 * NP; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead + i * stride + offset_of<T>(r)), _MM_HINT_T0);
    __m512 w[NP];
    for (int i = 0; i < NP; ++i) w[i] = load8x2<T>(row + 2 * i * stride, row + (2 * i + 1) * stride, r);
    for (int b = 0; b < NB; ++b) {
      const __m512 eb = e8x2(e[b], r);
      for (int i = 0; i < NP; ++i) acc[i][b] = _mm512_fmadd_ps(w[i], eb, acc[i][b]);
    }
  }
  if (full < p.R) {
    const __mmask16 half = (__mmask16)((1u << (p.R - full)) - 1u), lanes = (__mmask16)(half | half << 8);
    for (int i = 0; i < NP; ++i) {
      alignas(64) float w[16] = {};
      for (int j = 0; full + j < p.R; ++j) {
        w[j] = load_elem(row + 2 * i * stride, p.w2_type, full + j);
        w[8 + j] = load_elem(row + (2 * i + 1) * stride, p.w2_type, full + j);
      }
      const __m512 wv = _mm512_load_ps(w);
      for (int b = 0; b < NB; ++b) acc[i][b] = _mm512_mask3_fmadd_ps(wv, e8x2(e[b], full), acc[i][b], lanes);
    }
  }
  if constexpr (NP == 4) {
    for (int b = 0; b < NB; ++b)
      _mm256_storeu_ps(dot + b * kGroupRows, meet_eight_rows(acc[0][b], acc[1][b], acc[2][b], acc[3][b]));
    return;
  }
  for (int i = 0; i < NP; ++i)
    for (int b = 0; b < NB; ++b) {
      dot[b * kGroupRows + 2 * i] = meet_chains(_mm512_castps512_ps256(acc[i][b]));
      dot[b * kGroupRows + 2 * i + 1] = meet_chains(_mm512_extractf32x8_ps(acc[i][b], 1));
    }
}

// NB blocks with NP pairs where that call exists: NP 1 always, else pairs_at_once(NB).
template <int NP, int NB, dfsel_type T>
bool pairs_call(const uint8_t* row, size_t stride, const MarkovPass& p, const float* const* e, float* dot) {
  if constexpr (NP == 1 || NP == pairs_at_once(NB)) {
    dots_pairs<NP, NB, T>(row, stride, p, e, dot);
    return true;
  }
  return false;
}

template <int NP, dfsel_type T>
bool pairs_nb(const uint8_t* row, size_t stride, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (nb) {
    case 1: return pairs_call<NP, 1, T>(row, stride, p, e, dot);
    case 2: return pairs_call<NP, 2, T>(row, stride, p, e, dot);
    case 3: return pairs_call<NP, 3, T>(row, stride, p, e, dot);
    case 4: return pairs_call<NP, 4, T>(row, stride, p, e, dot);
    case 5: return pairs_call<NP, 5, T>(row, stride, p, e, dot);
    case 6: return pairs_call<NP, 6, T>(row, stride, p, e, dot);
    case 7: return pairs_call<NP, 7, T>(row, stride, p, e, dot);
    case 8: return pairs_call<NP, 8, T>(row, stride, p, e, dot);
    default: return false;
  }
}

template <dfsel_type T>
bool pairs_typed(const uint8_t* row, size_t stride, int pairs, const MarkovPass& p, const float* const* e, int nb,
                 float* dot) {
  switch (pairs) {
    case 4: return pairs_nb<4, T>(row, stride, p, e, nb, dot);
    case 2: return pairs_nb<2, T>(row, stride, p, e, nb, dot);
    case 1: return pairs_nb<1, T>(row, stride, p, e, nb, dot);
    default: return false;
  }
}

}  // namespace

bool dots_avx512(const uint8_t* row, size_t stride, int pairs, const MarkovPass& p, const float* const* e, int nb,
                 float* dot) {
  switch (p.w2_type) {
    case DFSEL_TYPE_F32: return pairs_typed<DFSEL_TYPE_F32>(row, stride, pairs, p, e, nb, dot);
    case DFSEL_TYPE_F16: return pairs_typed<DFSEL_TYPE_F16>(row, stride, pairs, p, e, nb, dot);
    case DFSEL_TYPE_BF16: return pairs_typed<DFSEL_TYPE_BF16>(row, stride, pairs, p, e, nb, dot);
    case DFSEL_TYPE_Q8_0: return pairs_typed<DFSEL_TYPE_Q8_0>(row, stride, pairs, p, e, nb, dot);
    default: return false;
  }
}

}  // namespace dfsel

#endif
