// exp, log and tanh in float built from +, -, *, /, fma and bit operations alone, each in one
// fixed order. The C library's expf, logf and tanhf and CUDA's are each within about an ulp of
// the true value but not of each other; these give the same bits on every backend wherever the
// compiler does not contract (the host library is built with -ffp-contract=off, the kernels
// that use these with -fmad=false). Accuracy: within 2 ulp of the true value on normal
// results, which is all the rules that use them (docs/dspark.md, Numbers) need.
#pragma once

#include <math.h>
#include <stdint.h>

#include "hd.cuh"
#include "numeric.cuh"

namespace dfsel {

// ln 2 as a float that a multiple of fits exactly, and what it leaves out.
constexpr float kLn2Hi = 0.693147182464599609375f;  // 0x1.62e43p-1
constexpr float kLn2Lo = -1.904654323148236e-09f;   // ln 2 - kLn2Hi

// 2^n for n in [-252, 254], as two normal factors: a subnormal result rounds once more, the
// same way everywhere.
DFSEL_HD float scale_by_pow2(float x, int n) {
  const int n1 = n / 2, n2 = n - n1;
  return x * bits_to_float((uint32_t)(n1 + 127) << 23) * bits_to_float((uint32_t)(n2 + 127) << 23);
}

// e^x: x = n ln 2 + r with |r| <= ln 2 / 2, e^r by its Taylor polynomial to r^7 (the first term
// left out is below 1e-8 of the result), times 2^n.
DFSEL_HD float portable_expf(float x) {
  if (x != x) return x;
  if (x > 88.72283935546875f) return INFINITY;
  if (x < -103.972084045410156f) return 0.0f;
  const float n = rintf(x * 1.44269502162933349609375f);
  const float r = fmaf(-n, kLn2Lo, fmaf(-n, kLn2Hi, x));
  float p = 1.98412698e-4f;           // 1/7!
  p = fmaf(p, r, 1.38888889e-3f);     // 1/6!
  p = fmaf(p, r, 8.33333333e-3f);     // 1/5!
  p = fmaf(p, r, 4.16666667e-2f);     // 1/4!
  p = fmaf(p, r, 1.66666667e-1f);     // 1/3!
  p = fmaf(p, r, 0.5f);
  p = fmaf(p, r, 1.0f);
  p = fmaf(p, r, 1.0f);
  return scale_by_pow2(p, (int)n);
}

// ln x: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln m = 2 atanh(s) with s = (m - 1) / (m + 1),
// |s| <= 0.172, summed to s^11 (the rest is below 1e-10).
// ln (x 2^e0) for a positive, normal, finite x: portable_logf past its special cases.
DFSEL_HD float portable_log_normal(float x, int e0 = 0) {
  const uint32_t u = float_to_bits(x);
  int e = e0 + (int)(u >> 23) - 127;
  float m = bits_to_float((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) m *= 0.5f, e += 1;
  const float f = m - 1.0f;  // exact: m is within a factor 2 of 1
  const float s = f / (2.0f + f), z = s * s;
  float q = 9.09090909e-2f;          // 1/11
  q = fmaf(q, z, 1.11111111e-1f);    // 1/9
  q = fmaf(q, z, 1.42857143e-1f);    // 1/7
  q = fmaf(q, z, 2.0e-1f);           // 1/5
  q = fmaf(q, z, 3.33333333e-1f);    // 1/3
  q = q * z;
  const float s2 = 2.0f * s;
  const float log_m = fmaf(s2, q, s2);
  const float ef = (float)e;
  return fmaf(ef, kLn2Hi, fmaf(ef, kLn2Lo, log_m));
}

DFSEL_HD float portable_logf(float x) {
  if (x != x || x < 0.0f) return NAN;
  if (x == 0.0f) return -INFINITY;
  if (x == INFINITY) return x;
  if (x < 1.17549435e-38f) return portable_log_normal(x * 8388608.0f, -23);  // subnormal: scaled by 2^23
  return portable_log_normal(x);
}

// tanh y: the odd Taylor series to y^17 below |y| = 0.55 (the first term left out is below
// 3e-8 of the result), 1 - 2 / (e^2|y| + 1) above, and +-1 past 9.1; the sign of y kept (-0 too).
DFSEL_HD float portable_tanhf(float y) {
  if (y != y) return y;
  const float a = fabsf(y);
  float t;
  if (a > 9.1f) {
    t = 1.0f;
  } else if (a >= 0.55f) {
    t = 1.0f - 2.0f / (portable_expf(2.0f * a) + 1.0f);
  } else {
    const float z = a * a;
    float p = 5.90027441e-4f;          // 6404582 / 10854718875
    p = fmaf(p, z, -1.45583438e-3f);   // -929569 / 638512875
    p = fmaf(p, z, 3.59212803e-3f);    // 21844 / 6081075
    p = fmaf(p, z, -8.86323552e-3f);   // -1382 / 155925
    p = fmaf(p, z, 2.18694885e-2f);    // 62 / 2835
    p = fmaf(p, z, -5.39682540e-2f);   // -17 / 315
    p = fmaf(p, z, 1.33333333e-1f);    // 2 / 15
    p = fmaf(p, z, -3.33333333e-1f);   // -1 / 3
    t = fmaf(a * z, p, a);
  }
  return copysignf(t, y);
}

}  // namespace dfsel
