// The CPU backend's DSpark pass (cpu_dspark_pass.h). Eight consecutive elements of a W2 row
// fill one AVX2 register, so lane j holds chain j of kernels/common/dspark_math.cuh; each
// block keeps its own register of chains while the row goes by once, and the lanes meet in
// the rule's order. The rest of a row (l, key, best) is the reference's scalar code.
#include "host/backend/cpu_dspark_pass.h"

#include <cstring>

#include "kernels/common/order.cuh"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dfsel {

namespace {

constexpr int kMaxPassBlocks = 8;  // registers of chains a row feeds at once

#if defined(__x86_64__)
#define DFSEL_AVX2 __attribute__((target("avx2,fma,f16c")))

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

// ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)), as chained_dot.
DFSEL_AVX2 inline float meet_chains(__m256 c) {
  const __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(c), _mm256_extractf128_ps(c, 1));
  const __m128 s2 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
  return _mm_cvtss_f32(_mm_add_ss(s2, _mm_shuffle_ps(s2, s2, 1)));
}

// W2[v] . e_b for nb blocks. The last partial group of eight (R % 8 != 0) touches only the
// lanes of real elements: a lane without an element keeps its chain as it was, -0 included.
template <int NB, dfsel_type T>
DFSEL_AVX2 void dots_avx2(const uint8_t* row, const MarkovPass& p, const float* const* e, float* dot) {
  __m256 acc[NB];
  for (int b = 0; b < NB; ++b) acc[b] = _mm256_setzero_ps();
  const int32_t full = p.R / 8 * 8;
  for (int32_t r = 0; r < full; r += 8) {
    const __m256 w = load8<T>(row, r);
    for (int b = 0; b < NB; ++b) acc[b] = _mm256_fmadd_ps(w, _mm256_loadu_ps(e[b] + r), acc[b]);
  }
  if (full < p.R) {
    alignas(32) float w[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    alignas(32) int32_t lanes[8];
    for (int j = 0; j < 8; ++j) {
      lanes[j] = full + j < p.R ? -1 : 0;
      if (full + j < p.R) w[j] = load_elem(row, p.w2_type, full + j);
    }
    const __m256 wv = _mm256_load_ps(w), mask = _mm256_castsi256_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(lanes)));
    for (int b = 0; b < NB; ++b)
      acc[b] = _mm256_blendv_ps(acc[b], _mm256_fmadd_ps(wv, _mm256_loadu_ps(e[b] + full), acc[b]), mask);
  }
  for (int b = 0; b < NB; ++b) dot[b] = meet_chains(acc[b]);
}

template <dfsel_type T>
bool dots_typed(const uint8_t* row, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (nb) {
    case 1: dots_avx2<1, T>(row, p, e, dot); return true;
    case 2: dots_avx2<2, T>(row, p, e, dot); return true;
    case 3: dots_avx2<3, T>(row, p, e, dot); return true;
    case 4: dots_avx2<4, T>(row, p, e, dot); return true;
    case 5: dots_avx2<5, T>(row, p, e, dot); return true;
    case 6: dots_avx2<6, T>(row, p, e, dot); return true;
    case 7: dots_avx2<7, T>(row, p, e, dot); return true;
    case 8: dots_avx2<8, T>(row, p, e, dot); return true;
    default: return false;
  }
}

bool dots_simd(const uint8_t* row, const MarkovPass& p, const float* const* e, int nb, float* dot) {
  switch (p.w2_type) {
    case DFSEL_TYPE_F32: return dots_typed<DFSEL_TYPE_F32>(row, p, e, nb, dot);
    case DFSEL_TYPE_F16: return dots_typed<DFSEL_TYPE_F16>(row, p, e, nb, dot);
    case DFSEL_TYPE_BF16: return dots_typed<DFSEL_TYPE_BF16>(row, p, e, nb, dot);
    case DFSEL_TYPE_Q8_0: return dots_typed<DFSEL_TYPE_Q8_0>(row, p, e, nb, dot);
    default: return false;
  }
}
#else
bool dots_simd(const uint8_t*, const MarkovPass&, const float* const*, int, float*) { return false; }
#endif

void dots(const uint8_t* row, const MarkovPass& p, const float* const* e, int nb, bool simd, float* dot) {
  if (simd && dots_simd(row, p, e, nb, dot)) return;
  for (int b = 0; b < nb; ++b) dot[b] = markov_dot(row, p.w2_type, e[b], p.R);
}

}  // namespace

void markov_rows(const MarkovPass& p, int64_t r0, int64_t r1, bool simd, MarkovBest* best) {
#if defined(__x86_64__) && defined(__GNUC__)
  simd = simd && (p.w2_type != DFSEL_TYPE_F16 || __builtin_cpu_supports("f16c"));
#endif
  float dot[kMaxPassBlocks];
  for (int64_t v = r0; v < r1; ++v) {
    const uint8_t* row = p.w2 + (size_t)v * p.w2_stride;
    const float s = !p.scale ? 1.0f : p.scale[p.scale_rows == 1 ? 0 : v];
    const int32_t id = (int32_t)(p.v_begin + v);
    for (int32_t b0 = 0; b0 < p.n_blocks; b0 += kMaxPassBlocks) {
      const int nb = p.n_blocks - b0 < kMaxPassBlocks ? p.n_blocks - b0 : kMaxPassBlocks;
      dots(row, p, p.e + b0, nb, simd, dot);
      for (int i = 0; i < nb; ++i) {
        const int32_t b = b0 + i;
        const float l = markov_logit(p.transform, load_elem(p.z[b], p.z_type, v), dot[i], s);
        const float key =
            p.sampling ? markov_sample_key(l, p.temperature, markov_gumbel(p.seed, (uint32_t)p.block[b], p.step, id)) : l;
        const uint64_t k = cand_key(key, id);
        MarkovBest& m = best[b];
        if (m.id < 0 || k > m.key) m.key = k, m.id = (int32_t)v, m.logit = l;
        if (l > m.row_max) m.row_max = l;
        if (p.l) p.l[b][v] = l;
      }
    }
  }
}

void norm_rows(const float* l, int64_t r0, int64_t r1, float m, float temperature, NormSum* sum) {
  for (int64_t v = r0; v < r1; ++v) norm_add_weight(sum, norm_weight(l[v], m, temperature));
}

}  // namespace dfsel
