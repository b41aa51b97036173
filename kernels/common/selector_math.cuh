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

// argmax over K scores, lowest j on ties; NaN never wins over a number.
DFSEL_HD int argmax_row(const float* s, int k) {
  int best = 0;
  for (int j = 1; j < k; ++j) {
    const float a = s[j], b = s[best];
    if (a > b || (b != b && a == a)) best = j;
  }
  return best;
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
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) sum += softmax_weight(s[i], m, temp);
  return softmax_weight(s[j], m, temp) / sum;
}

// q = softmax(s / temp) written to q[0..k).
DFSEL_HD void softmax_row(const float* s, int k, float temp, float* q) {
  const float m = row_max(s, k);
  if (m == -INFINITY) {
    for (int i = 0; i < k; ++i) q[i] = 1.0f / (float)k;
    return;
  }
  float sum = 0.0f;
  for (int i = 0; i < k; ++i) {
    q[i] = softmax_weight(s[i], m, temp);
    sum += q[i];
  }
  const float inv = 1.0f / sum;
  for (int i = 0; i < k; ++i) q[i] *= inv;
}

// Inverse CDF: the first j whose running sum of q exceeds u; the last j with q > 0 when
// rounding leaves the total below u.
DFSEL_HD int sample_row(const float* q, int k, float u) {
  float c = 0.0f;
  int last = 0;
  for (int j = 0; j < k; ++j) {
    if (q[j] > 0.0f) last = j;
    c += q[j];
    if (u < c && q[j] > 0.0f) return j;
  }
  return last;
}

}  // namespace dfsel
