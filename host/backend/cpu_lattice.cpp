// The K x K lattice of one position (SPEC section 2.4) for the CPU backend. Each score is the
// reference's chain: t[r] = eprev[i][r] * g[r] rounded, then acc = fma(t[r], enext[j][r], acc)
// for r in order from +0, then u[j] + acc. The successor rows are transposed so that sixteen
// j share one load per r, and four predecessor rows run at once to keep the chains apart.
#include <cmath>

#include "host/backend/cpu_simd.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dfsel {

namespace {

#if defined(__x86_64__)
template <int NI>
__attribute__((target("avx2,fma"))) void lattice_group_avx2(const float* const* t, const float* enext_t, int32_t kp,
                                                            int32_t jb, int32_t R, __m256 (*acc)[2]) {
  for (int i = 0; i < NI; ++i) acc[i][0] = acc[i][1] = _mm256_setzero_ps();
  for (int32_t r = 0; r < R; ++r) {
    const float* en = enext_t + (size_t)r * kp + jb;
    const __m256 n0 = _mm256_loadu_ps(en), n1 = _mm256_loadu_ps(en + 8);
    for (int i = 0; i < NI; ++i) {
      const __m256 tb = _mm256_broadcast_ss(t[i] + r);
      acc[i][0] = _mm256_fmadd_ps(tb, n0, acc[i][0]);
      acc[i][1] = _mm256_fmadd_ps(tb, n1, acc[i][1]);
    }
  }
}

__attribute__((target("avx2,fma"))) void lattice_rows_avx2(const float* eprev, int32_t n_prev, const float* g,
                                                           const float* enext_t, int32_t kp, const float* u,
                                                           int32_t k, int32_t R, float* t, float* s) {
  constexpr int kGroup = 4;
  // t holds kGroup rows of eprev[i] * g, R floats each.
  for (int32_t i0 = 0; i0 < n_prev; i0 += kGroup) {
    const int ni = n_prev - i0 < kGroup ? n_prev - i0 : kGroup;
    const float* tr[kGroup];
    for (int i = 0; i < ni; ++i) {
      float* ti = t + (size_t)i * R;
      const float* ep = eprev + (size_t)(i0 + i) * R;
      for (int32_t r = 0; r < R; ++r) ti[r] = ep[r] * g[r];
      tr[i] = ti;
    }
    for (int32_t jb = 0; jb < kp; jb += 16) {
      __m256 acc[kGroup][2];
      if (ni == 4) lattice_group_avx2<4>(tr, enext_t, kp, jb, R, acc);
      else if (ni == 3) lattice_group_avx2<3>(tr, enext_t, kp, jb, R, acc);
      else if (ni == 2) lattice_group_avx2<2>(tr, enext_t, kp, jb, R, acc);
      else lattice_group_avx2<1>(tr, enext_t, kp, jb, R, acc);
      for (int i = 0; i < ni; ++i) {
        float a[16];
        _mm256_storeu_ps(a, acc[i][0]);
        _mm256_storeu_ps(a + 8, acc[i][1]);
        for (int32_t j = jb; j < jb + 16 && j < k; ++j) s[(size_t)(i0 + i) * k + j] = u[j] + a[j - jb];
      }
    }
  }
}
#endif

}  // namespace

void lattice_rows(const float* eprev, int32_t n_prev, const float* g, const float* enext_t, int32_t kp,
                  const float* u, int32_t k, int32_t R, bool simd, float* t, float* s) {
#if defined(__x86_64__)
  if (simd) return lattice_rows_avx2(eprev, n_prev, g, enext_t, kp, u, k, R, t, s);
#endif
  (void)t;
  for (int32_t i = 0; i < n_prev; ++i)
    for (int32_t j = 0; j < k; ++j) {
      float acc = 0.0f;
      for (int32_t r = 0; r < R; ++r) acc = std::fma(eprev[(size_t)i * R + r] * g[r], enext_t[(size_t)r * kp + j], acc);
      s[(size_t)i * k + j] = u[j] + acc;
    }
}

}  // namespace dfsel
