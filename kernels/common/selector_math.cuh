// The per-step arithmetic of SPEC sections 2.2 and 5 shared by the CPU reference and the kernels:
// logit transform, the greedy and sampling choices over one row of K scores, and the p_min test.
#pragma once

#include <math.h>
#include <stdint.h>

#include "hd.cuh"

namespace dfsel {

struct Transform {
  float scale;    // m
  float softcap;  // c; <= 0 disables
};

// config.logit_scale 0 means 1 (dfsel.h); the plan resolves it once.
DFSEL_HD Transform make_transform(float logit_scale, float softcap) {
  return Transform{logit_scale > 0.0f ? logit_scale : 1.0f, softcap};
}

// z' = c * tanh(m * z / c) when c > 0, else m * z. Applied to the K survivors only.
DFSEL_HD float transform_logit(Transform t, float z) {
  const float x = t.scale * z;
  return t.softcap > 0.0f ? t.softcap * tanhf(x / t.softcap) : x;
}

// Whether score a displaces score b as the best: a number beats NaN, a larger number beats a
// smaller one; on equal scores (or two NaN) the earlier index stays.
DFSEL_HD bool score_beats(float a, float b) { return a > b || (b != b && a == a); }

// argmax over K scores, lowest j on ties; NaN never wins over a number.
DFSEL_HD int argmax_row(const float* s, int k) {
  int best = 0;
  for (int j = 1; j < k; ++j)
    if (score_beats(s[j], s[best])) best = j;
  return best;
}

// w(0) + w(1) + ... + w(k - 1), added in that order from +0: the one order every softmax sum
// of a row is taken in (a kernel may gather the values from other lanes). kMax > 0 promises
// k <= kMax, and the device unrolls the loop, so that w may index registers.
template <int kMax = 0, class W>
DFSEL_HD float sum_in_order(int k, W w) {
  float sum = 0.0f;
  if constexpr (kMax > 0) {
    DFSEL_UNROLL
    for (int j = 0; j < kMax; ++j)
      if (j < k) sum += w(j);
  } else {
    for (int j = 0; j < k; ++j) sum += w(j);
  }
  return sum;
}

// Largest finite-or-inf score of a row (NaN skipped); -inf when there is none.
DFSEL_HD float row_max(const float* s, int k) {
  float m = -INFINITY;
  for (int j = 0; j < k; ++j)
    if (s[j] > m) m = s[j];
  return m;
}

// exp((s - m) / temp) for one score against the row maximum m. NaN weighs nothing; when the
// maximum is +inf the mass is shared by the +inf scores alone.
DFSEL_HD float softmax_weight(float s, float m, float temp) {
  if (s != s) return 0.0f;
  if (m == INFINITY) return s == INFINITY ? 1.0f : 0.0f;
  return expf((s - m) / temp);
}

// softmax(s / temp)[j], accumulated in j order; uniform when every score is -inf or NaN.
DFSEL_HD float softmax_at(const float* s, int k, float temp, int j) {
  const float m = row_max(s, k);
  if (m == -INFINITY) return 1.0f / (float)k;
  const float sum = sum_in_order(k, [&](int i) { return softmax_weight(s[i], m, temp); });
  return softmax_weight(s[j], m, temp) / sum;
}

// q = softmax(s / temp) written to q[0..k).
DFSEL_HD void softmax_row(const float* s, int k, float temp, float* q) {
  const float m = row_max(s, k);
  if (m == -INFINITY) {
    for (int i = 0; i < k; ++i) q[i] = 1.0f / (float)k;
    return;
  }
  for (int i = 0; i < k; ++i) q[i] = softmax_weight(s[i], m, temp);
  const float inv = 1.0f / sum_in_order(k, [&](int i) { return q[i]; });
  for (int i = 0; i < k; ++i) q[i] *= inv;
}

// Inverse CDF over q(0), ..., q(k - 1): the first j whose running sum exceeds u; the last j
// with q > 0 when rounding leaves the total below u. Every q(j) is asked for, in j order (a
// kernel may gather them from other lanes).
// kMax as sum_in_order's.
template <int kMax = 0, class Q>
DFSEL_HD int sample_from(int k, float u, Q q) {
  float c = 0.0f;
  int last = 0, hit = -1;
  auto take = [&](int j) {
    const float qj = q(j);
    if (qj > 0.0f) last = j;
    c += qj;
    if (hit < 0 && u < c && qj > 0.0f) hit = j;
  };
  if constexpr (kMax > 0) {
    DFSEL_UNROLL
    for (int j = 0; j < kMax; ++j)
      if (j < k) take(j);
  } else {
    for (int j = 0; j < k; ++j) take(j);
  }
  return hit >= 0 ? hit : last;
}

DFSEL_HD int sample_row(const float* q, int k, float u) {
  return sample_from(k, u, [&](int j) { return q[j]; });
}

}  // namespace dfsel
