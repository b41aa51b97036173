// The CPU backend's DSpark pass (cpu_dspark_pass.h). Eight consecutive elements of a W2 row
// fill one AVX2 register, so lane j holds chain j of kernels/common/dspark_math.cuh; each
// block keeps its own register of chains while the row goes by once, and the lanes meet in
// the rule's order (AVX-512 does the same for two rows a register: cpu_dspark_avx512.cpp).
// The rest of a row (l, key, best) is the reference's scalar code, or AVX2 where greedy.
#include "host/backend/cpu_dspark_pass.h"

#include <cstring>

#include "host/backend/cpu_dspark_lanes.h"
#include "host/backend/cpu_simd.h"
#include "kernels/common/order.cuh"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#endif

namespace dfsel {

namespace {

constexpr int kMaxPassBlocks = 8;  // registers of chains a row feeds at once
// The base logits too are asked for ahead of their use: a few bytes a row of each block, they
// missed the cache once a group of rows (a third of a greedy step's time, measured).
constexpr int64_t kZAheadRows = 128;

#if defined(__x86_64__)

template <dfsel_type T>
DFSEL_AVX2 inline __m256 load8(const uint8_t* row, int32_t r) {
  switch (T) {
    case DFSEL_TYPE_F32: return _mm256_loadu_ps(reinterpret_cast<const float*>(row) + r);
    case DFSEL_TYPE_F16: return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (size_t)r)));
    case DFSEL_TYPE_BF16: {
      const __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(row + 2 * (size_t)r)));
      return _mm256_castsi256_ps(_mm256_slli_epi32(x, 16));
    }
    default: {  // Q8_0: the block's scale times the quant, one rounding, as q8_value
      const BlockQ8_0* b = reinterpret_cast<const BlockQ8_0*>(row) + r / kQ8Block;
      const __m128i q = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(b->qs + r % kQ8Block));
      const __m256 qf = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q));
      return _mm256_mul_ps(qf, _mm256_set1_ps(f16_to_float(b->d)));
    }
  }
}

// Sixteen BF16 elements from r as two registers of floats, elements r..r+7 and r+8..r+15 in
// lane order: quads reordered so that each 128-bit half unpacks into consecutive elements,
// each value landing in the high half of its lane (a BF16 is a float's high half).
DFSEL_AVX2 inline void load16_bf16(const uint8_t* row, int32_t r, __m256* lo, __m256* hi) {
  const __m256i x = _mm256_permute4x64_epi64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(row + 2 * (size_t)r)), 0xd8);
  *lo = _mm256_castsi256_ps(_mm256_unpacklo_epi16(_mm256_setzero_si256(), x));
  *hi = _mm256_castsi256_ps(_mm256_unpackhi_epi16(_mm256_setzero_si256(), x));
}

// W2[v + i] . e_b for NR consecutive rows and NB blocks into dot[b * kGroupRows + i]: NR * NB
// independent chains hide the fused multiply-add's latency, and each e_b load serves every
// row. The last partial group of eight (R % 8 != 0) touches only the lanes of real elements:
// a lane without an element keeps its chain as it was, -0 included.
template <int NR, int NB, dfsel_type T>
DFSEL_AVX2 void dots_avx2(const uint8_t* row, size_t stride, const MarkovPass& p, const float* const* e, float* dot) {
  __m256 acc[NR][NB];
  for (int i = 0; i < NR; ++i)
    for (int b = 0; b < NB; ++b) acc[i][b] = _mm256_setzero_ps();
  const int32_t full = p.R / 8 * 8;
  const uint8_t* ahead = row + kPrefetchRows * stride;
  int32_t r = 0;
  if (T == DFSEL_TYPE_BF16)  // sixteen at a time: the widening then costs shuffles alone
    for (; r + 16 <= full; r += 16) {
      for (int i = 0; i < NR; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead + i * stride + offset_of<T>(r)), _MM_HINT_T0);
      __m256 lo[NR], hi[NR];
      for (int i = 0; i < NR; ++i) load16_bf16(row + i * stride, r, &lo[i], &hi[i]);
      for (int b = 0; b < NB; ++b) {
        const __m256 e0 = _mm256_loadu_ps(e[b] + r), e1 = _mm256_loadu_ps(e[b] + r + 8);
        for (int i = 0; i < NR; ++i) acc[i][b] = _mm256_fmadd_ps(hi[i], e1, _mm256_fmadd_ps(lo[i], e0, acc[i][b]));
      }
    }
  for (; r < full; r += 8) {
    for (int i = 0; i < NR; ++i) _mm_prefetch(reinterpret_cast<const char*>(ahead + i * stride + offset_of<T>(r)), _MM_HINT_T0);
    __m256 w[NR];
    for (int i = 0; i < NR; ++i) w[i] = load8<T>(row + i * stride, r);
    for (int b = 0; b < NB; ++b) {
      const __m256 eb = _mm256_loadu_ps(e[b] + r);
      for (int i = 0; i < NR; ++i) acc[i][b] = _mm256_fmadd_ps(w[i], eb, acc[i][b]);
    }
  }
  if (full < p.R) {
    alignas(32) int32_t lanes[8];
    for (int j = 0; j < 8; ++j) lanes[j] = full + j < p.R ? -1 : 0;
    const __m256 mask = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)));
    for (int i = 0; i < NR; ++i) {
      alignas(32) float w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int j = 0; full + j < p.R; ++j) w[j] = load_elem(row + i * stride, p.w2_type, full + j);
      const __m256 wv = _mm256_load_ps(w);
      for (int b = 0; b < NB; ++b)
        acc[i][b] = _mm256_blendv_ps(acc[i][b], _mm256_fmadd_ps(wv, _mm256_loadu_ps(e[b] + full), acc[i][b]), mask);
    }
  }
  for (int i = 0; i < NR; ++i)
    for (int b = 0; b < NB; ++b) dot[b * kGroupRows + i] = meet_chains(acc[i][b]);
}

// Rows a call takes for nb blocks: enough chains to keep both FMA units busy, within the
// sixteen vector registers.
int rows_at_once(int nb) { return nb <= 2 ? 4 : nb <= 4 ? 2 : 1; }

template <int NR, dfsel_type T>
bool dots_nb(const uint8_t* row, size_t stride, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (nb) {
    case 1: dots_avx2<NR, 1, T>(row, stride, p, e, dot); return true;
    case 2: dots_avx2<NR, 2, T>(row, stride, p, e, dot); return true;
    case 3: dots_avx2<NR, 3, T>(row, stride, p, e, dot); return true;
    case 4: dots_avx2<NR, 4, T>(row, stride, p, e, dot); return true;
    case 5: return NR == 1 && (dots_avx2<1, 5, T>(row, stride, p, e, dot), true);
    case 6: return NR == 1 && (dots_avx2<1, 6, T>(row, stride, p, e, dot), true);
    case 7: return NR == 1 && (dots_avx2<1, 7, T>(row, stride, p, e, dot), true);
    case 8: return NR == 1 && (dots_avx2<1, 8, T>(row, stride, p, e, dot), true);
    default: return false;
  }
}

template <dfsel_type T>
bool dots_typed(const uint8_t* row, size_t stride, int nr, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (nr) {
    case 4: return dots_nb<4, T>(row, stride, p, e, nb, dot);
    case 2: return dots_nb<2, T>(row, stride, p, e, nb, dot);
    case 1: return dots_nb<1, T>(row, stride, p, e, nb, dot);
    default: return false;
  }
}

bool dots_simd(const uint8_t* row, size_t stride, int nr, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (p.w2_type) {
    case DFSEL_TYPE_F32: return dots_typed<DFSEL_TYPE_F32>(row, stride, nr, p, e, nb, dot);
    case DFSEL_TYPE_F16: return dots_typed<DFSEL_TYPE_F16>(row, stride, nr, p, e, nb, dot);
    case DFSEL_TYPE_BF16: return dots_typed<DFSEL_TYPE_BF16>(row, stride, nr, p, e, nb, dot);
    case DFSEL_TYPE_Q8_0: return dots_typed<DFSEL_TYPE_Q8_0>(row, stride, nr, p, e, nb, dot);
    default: return false;
  }
}
#else
int rows_at_once(int) { return 1; }
bool dots_simd(const uint8_t*, size_t, int, const MarkovPass&, const float* const*, int, float*) { return false; }
#endif

// Rows from `row` (at most `left`) . e_b for nb blocks into dot[b * kGroupRows + i]; the rows
// done: as many as the widest call isa has for them, else one.
int dots(const uint8_t* row, size_t stride, int left, const MarkovPass& p, const float* const* e, int nb, PassIsa isa,
         float* dot) {
#if defined(__x86_64__)
  if (isa == PassIsa::kAvx512 && left >= 2) {
    const int pairs = left >= 2 * pairs_at_once(nb) ? pairs_at_once(nb) : 1;
    if (dots_avx512(row, stride, pairs, p, e, nb, dot)) return 2 * pairs;
  }
#endif
  const int nr = left >= rows_at_once(nb) ? rows_at_once(nb) : 1;
  if (isa != PassIsa::kPlain && dots_simd(row, stride, nr, p, e, nb, dot)) return nr;
  for (int b = 0; b < nb; ++b) dot[b * kGroupRows] = markov_dot(row, p.w2_type, e[b], p.R);
  return 1;
}

#if defined(__x86_64__)
// Eight consecutive rows of one block when the transform is one product (no softcap) and the
// step is greedy: l = m * z + dot * s as markov_logit rounds it, then the rows' best by the
// candidate order (value_key: NaN lowest, -0 == +0; the first of equal keys, the lowest id).
// Rows are visited in id order, so a later equal key never wins. A greedy step needs no row
// maximum: only the sampling normaliser reads it.
template <dfsel_type Z>
DFSEL_AVX2 void post8(const MarkovPass& p, const uint8_t* z, const float* dot, const float* s, int64_t v0, MarkovBest& m,
                      float* l_out) {
  const __m256 zv = load8<Z>(z, (int32_t)v0);
  const __m256 l = _mm256_add_ps(_mm256_mul_ps(_mm256_set1_ps(p.transform.scale), zv),
                                 _mm256_mul_ps(_mm256_loadu_ps(dot), _mm256_loadu_ps(s)));
  if (l_out) _mm256_storeu_ps(l_out + v0, l);
  const __m256i u = _mm256_castps_si256(l), abs = _mm256_and_si256(u, _mm256_set1_epi32(0x7fffffff));
  const __m256i nan = _mm256_cmpgt_epi32(abs, _mm256_set1_epi32(0x7f800000));
  const __m256i u0 = _mm256_andnot_si256(_mm256_cmpeq_epi32(u, _mm256_set1_epi32(INT32_MIN)), u);  // -0 as +0
  const __m256i flip = _mm256_or_si256(_mm256_srai_epi32(u0, 31), _mm256_set1_epi32(INT32_MIN));
  const __m256i key = _mm256_andnot_si256(nan, _mm256_xor_si256(u0, flip));
  __m256i top = _mm256_max_epu32(key, _mm256_permute2x128_si256(key, key, 1));
  top = _mm256_max_epu32(top, _mm256_shuffle_epi32(top, 0x4e));
  top = _mm256_max_epu32(top, _mm256_shuffle_epi32(top, 0xb1));
  const uint32_t best_key = (uint32_t)_mm256_cvtsi256_si32(top);
  if (m.id < 0 || best_key > (uint32_t)(m.key >> 32)) {
    const int lane = __builtin_ctz((unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(key, top))));
    const int32_t id = (int32_t)(p.v_begin + v0 + lane);
    alignas(32) float lv[8];
    _mm256_store_ps(lv, l);
    m.key = cand_key(lv[lane], id);
    m.id = (int32_t)(v0 + lane);
    m.logit = lv[lane];
  }
}

bool post8_simd(const MarkovPass& p, const uint8_t* z, const float* dot, const float* s, int64_t v0, MarkovBest& m,
                float* l_out) {
  switch (p.z_type) {
    case DFSEL_TYPE_F32: post8<DFSEL_TYPE_F32>(p, z, dot, s, v0, m, l_out); return true;
    case DFSEL_TYPE_F16: post8<DFSEL_TYPE_F16>(p, z, dot, s, v0, m, l_out); return true;
    case DFSEL_TYPE_BF16: post8<DFSEL_TYPE_BF16>(p, z, dot, s, v0, m, l_out); return true;
    default: return false;
  }
}
#else
bool post8_simd(const MarkovPass&, const uint8_t*, const float*, const float*, int64_t, MarkovBest&, float*) { return false; }
#endif

// Row v of block b after its dot product, as the reference: l, its key, the best and the max.
void post1(const MarkovPass& p, int32_t b, int64_t v, float dot, MarkovBest& m) {
  const float s = !p.scale ? 1.0f : p.scale[p.scale_rows == 1 ? 0 : v];
  const int32_t id = (int32_t)(p.v_begin + v);
  const float l = markov_logit(p.transform, load_elem(p.z[b], p.z_type, v), dot, s);
  const float key = p.sampling ? markov_sample_key(l, p.temperature, markov_gumbel(p.seed, (uint32_t)p.block[b], p.step, id)) : l;
  const uint64_t k = cand_key(key, id);
  if (m.id < 0 || k > m.key) m.key = k, m.id = (int32_t)v, m.logit = l;
  if (l > m.row_max) m.row_max = l;
  if (p.l) p.l[b][v] = l;
}

}  // namespace

PassIsa cpu_pass_isa() {
#if defined(__x86_64__) && defined(__GNUC__)
  // F16C from CPUID itself: clang's __builtin_cpu_supports does not know the name.
  unsigned a = 0, b = 0, c = 0, d = 0;
  const bool f16c = __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C) != 0;
  if (!cpu_has_avx2_fma() || !f16c) return PassIsa::kPlain;
  const bool avx512 =
      __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
  return avx512 ? PassIsa::kAvx512 : PassIsa::kAvx2;
#else
  return PassIsa::kPlain;
#endif
}

void markov_rows(const MarkovPass& p, int64_t r0, int64_t r1, PassIsa isa, MarkovBest* best) {
  // Eight rows at a time: their dot products (as many rows a call as the isa takes), then per
  // block l and the best.
  // Sampling (a Philox draw a row) and softcap (tanhf) take the reference's scalar path.
  const bool vector_post = isa != PassIsa::kPlain && !p.sampling && p.transform.softcap <= 0.0f;
  alignas(32) float dot[kGroupRows * kMaxPassBlocks];
  float scale[kGroupRows];
  const size_t z_ahead = row_bytes(p.z_type, kZAheadRows);
  for (int64_t v0 = r0; v0 < r1; v0 += kGroupRows) {
    const int rows = r1 - v0 < kGroupRows ? (int)(r1 - v0) : kGroupRows;
    if (v0 + kZAheadRows < r1)
      for (int32_t b = 0; b < p.n_blocks; ++b) __builtin_prefetch(p.z[b] + row_bytes(p.z_type, v0) + z_ahead);
    for (int i = 0; i < rows; ++i) scale[i] = !p.scale ? 1.0f : p.scale[p.scale_rows == 1 ? 0 : v0 + i];
    for (int32_t b0 = 0; b0 < p.n_blocks; b0 += kMaxPassBlocks) {
      const int nb = p.n_blocks - b0 < kMaxPassBlocks ? p.n_blocks - b0 : kMaxPassBlocks;
      for (int i = 0; i < rows;)
        i += dots(p.w2 + (size_t)(v0 + i) * p.w2_stride, p.w2_stride, rows - i, p, p.e + b0, nb, isa, dot + i);
      for (int j = 0; j < nb; ++j) {
        const int32_t b = b0 + j;
        const float* by_row = dot + j * kGroupRows;
        if (rows == kGroupRows && vector_post && post8_simd(p, p.z[b], by_row, scale, v0, best[b], p.l ? p.l[b] : nullptr))
          continue;
        for (int i = 0; i < rows; ++i) post1(p, b, v0 + i, by_row[i], best[b]);
      }
    }
  }
}

void norm_rows(const float* l, int64_t r0, int64_t r1, float m, float temperature, NormSum* sum) {
  for (int64_t v = r0; v < r1; ++v) norm_add_weight(sum, norm_weight(l[v], m, temperature));
}

}  // namespace dfsel
