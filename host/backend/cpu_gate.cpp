// The gate g = W_h h (SPEC section 2.3) for the CPU backend. W_h is widened and transposed
// once, at plan creation (it is the plan's weight), so a run reads floats eight sums at a
// time: for every e, eight consecutive r take one fused multiply-add each, which is the
// reference's order for every one of them. Each chunk of 32 sums has its own contiguous
// [n_embd][32] slice of W_h (a stride of R floats between e would fall into few L1 sets), and
// runs over e in blocks that stay in the L1 cache while three hidden rows at a time go through.
#include <cmath>
#include <cstring>

#include "host/backend/cpu_simd.h"
#include "kernels/common/numeric.cuh"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dfsel {

namespace {

constexpr int64_t kEBlock = 256;  // 32 sums x 256 e x 4 bytes: 32 KB of W_h per block
constexpr int32_t kRowGroup = 3;  // 3 rows x 4 vectors: 12 accumulators

#if defined(__x86_64__)
template <int NR>
__attribute__((target("avx2,fma"))) void gate_block_avx2(const float* wt, const float* const* h, int64_t e0, int64_t e1,
                                                         float* const* g) {
  __m256 acc[NR][4];
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < 4; ++v) acc[r][v] = _mm256_loadu_ps(g[r] + 8 * v);
  for (int64_t e = e0; e < e1; ++e) {
    const float* w = wt + (size_t)e * kGateLanes;
    const __m256 w0 = _mm256_loadu_ps(w), w1 = _mm256_loadu_ps(w + 8), w2 = _mm256_loadu_ps(w + 16),
                 w3 = _mm256_loadu_ps(w + 24);
    for (int r = 0; r < NR; ++r) {
      const __m256 hb = _mm256_broadcast_ss(h[r] + e);
      acc[r][0] = _mm256_fmadd_ps(w0, hb, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, hb, acc[r][1]);
      acc[r][2] = _mm256_fmadd_ps(w2, hb, acc[r][2]);
      acc[r][3] = _mm256_fmadd_ps(w3, hb, acc[r][3]);
    }
  }
  for (int r = 0; r < NR; ++r)
    for (int v = 0; v < 4; ++v) _mm256_storeu_ps(g[r] + 8 * v, acc[r][v]);
}
#endif

void gate_block_plain(const float* wt, int nr, const float* const* h, int64_t e0, int64_t e1, float* const* g) {
  for (int r = 0; r < nr; ++r)
    for (int64_t e = e0; e < e1; ++e) {
      const float* w = wt + (size_t)e * kGateLanes;
      for (int l = 0; l < kGateLanes; ++l) g[r][l] = std::fma(w[l], h[r][e], g[r][l]);
    }
}

void gate_block(const GateWeights& w, const float* wt, int nr, const float* const* h, int64_t e0, int64_t e1,
                float* const* g) {
#if defined(__x86_64__)
  if (w.simd) {
    if (nr == 3) return gate_block_avx2<3>(wt, h, e0, e1, g);
    if (nr == 2) return gate_block_avx2<2>(wt, h, e0, e1, g);
    return gate_block_avx2<1>(wt, h, e0, e1, g);
  }
#endif
  gate_block_plain(wt, nr, h, e0, e1, g);
}

}  // namespace

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) && defined(__GNUC__)
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
  return false;
#endif
}

void widen_row(const void* row, dfsel_type type, int64_t n, float* out) { load_elems(row, type, n, out); }

void prepare_gate(const dfsel_tensor& w_h, bool simd, GateWeights* w) {
  w->n_embd = w_h.ne[0];
  w->R = (int32_t)w_h.ne[1];
  w->rp = (w->R + kGateLanes - 1) / kGateLanes * kGateLanes;
  w->simd = simd;
  w->wt.assign((size_t)w->n_embd * w->rp, 0.0f);
  std::vector<float> row((size_t)w->n_embd);
  for (int32_t r = 0; r < w->R; ++r) {
    widen_row(static_cast<const uint8_t*>(w_h.data) + (size_t)r * w_h.nb[1], w_h.type, w->n_embd, row.data());
    const size_t chunk = (size_t)(r / kGateLanes), lane = (size_t)(r % kGateLanes);
    for (int64_t e = 0; e < w->n_embd; ++e) w->wt[(chunk * w->n_embd + e) * kGateLanes + lane] = row[(size_t)e];
  }
}

void gate_chunk(const GateWeights& w, const float* h, int32_t s0, int32_t s1, int32_t chunk, float* g) {
  const int32_t lane0 = chunk * kGateLanes;
  const float* wt = w.wt.data() + (size_t)chunk * w.n_embd * kGateLanes;
  for (int32_t s = s0; s < s1; ++s) std::memset(g + (size_t)s * w.rp + lane0, 0, kGateLanes * sizeof(float));
  for (int64_t e0 = 0; e0 < w.n_embd; e0 += kEBlock) {
    const int64_t e1 = e0 + kEBlock < w.n_embd ? e0 + kEBlock : w.n_embd;
    for (int32_t s = s0; s < s1; s += kRowGroup) {
      const int nr = s1 - s < kRowGroup ? s1 - s : kRowGroup;
      const float* hr[kRowGroup];
      float* gr[kRowGroup];
      for (int r = 0; r < nr; ++r) {
        hr[r] = h + (size_t)(s + r) * w.n_embd;
        gr[r] = g + (size_t)(s + r) * w.rp + lane0;
      }
      gate_block(w, wt, nr, hr, e0, e1, gr);
    }
  }
}

}  // namespace dfsel
