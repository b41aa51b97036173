// The per-element rules of a DSpark step (docs/dspark.md), written once for the CPU reference,
// the CPU backend and the CUDA kernels to come: which logits row a step reads, the Markov bias
// as a dot product in a fixed order, the biased logit, the Gumbel noise keyed by (seed, block,
// step, token id), the normaliser's exact fixed-point terms and the confidence head.
// Every rule depends on one token id alone, never on the shard that holds it, so that every
// shard count computes bitwise the same values; exp, log and tanh are portable_math.cuh's, so
// that every backend does too.
#pragma once

#include <math.h>
#include <stdint.h>

#include "hd.cuh"
#include "numeric.cuh"
#include "philox.cuh"
#include "portable_math.cuh"
#include "row_map.cuh"
#include "selector_math.cuh"

namespace dfsel {

// Logits (and hidden) rows of one block: with sample_from_anchor every row drafts (row k - 1
// is step k, the anchor's own row drafts step 1); without it row 0 is the anchor's, passes
// through unbiased and is not read, and row k drafts step k (DFlash2's layout).
DFSEL_HD int dspark_rows_per_block(int n_draft, bool sample_from_anchor) {
  return sample_from_anchor ? n_draft : n_draft + 1;
}

// The row drafted step d = b * n_draft + (k - 1) reads.
DFSEL_HD RowMap dspark_rows(int n_draft, bool sample_from_anchor) {
  return sample_from_anchor ? RowMap{n_draft, n_draft, 0} : drafted_rows(n_draft + 1);
}

constexpr int kDotChains = 8;

// The eight chains met in the one order every backend keeps: ((c0 + c4) + (c2 + c6)) +
// ((c1 + c5) + (c3 + c7)).
DFSEL_HD float meet_chains(const float* c) { return ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7])); }

// sum_i w(i) * x(i) in the one order every backend keeps: element i joins chain i % 8, each
// chain is a sequence of fused multiply-adds in i order from +0, and the chains meet as
// ((c0 + c4) + (c2 + c6)) + ((c1 + c5) + (c3 + c7)). Eight chains are what one AVX2 register
// holds and what one GPU thread can keep while it reads a row 16 bytes at a time.
template <class W, class X>
DFSEL_HD float chained_dot(W w, X x, int n) {
  float c[kDotChains] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < n; ++i) c[i % kDotChains] = fmaf(w(i), x(i), c[i % kDotChains]);
  return meet_chains(c);
}

// W2[v] . e for one stored row of W2 (F32, F16, BF16 or Q8_0, read as load_elem reads it).
DFSEL_HD float markov_dot(const void* w2_row, dfsel_type type, const float* e, int R) {
  return chained_dot([&](int r) { return load_elem(w2_row, type, r); }, [&](int r) { return e[r]; }, R);
}

// T(z): m z, or c tanh(m z / c) with a softcap (transform_logit's rule, with the portable tanh).
DFSEL_HD float markov_transform(Transform t, float z) {
  const float x = t.scale * z;
  return t.softcap > 0.0f ? t.softcap * portable_tanhf(x / t.softcap) : x;
}

// l = T(z) + (W2[v] . e) * s: the base logit through the plan's transform (identity unless
// logit_scale or softcap is set; llama.cpp applies neither), plus the Markov bias scaled by
// markov_w2.scale (1 when absent).
DFSEL_HD float markov_logit(Transform t, float z, float dot, float scale) {
  return markov_transform(t, z) + dot * scale;
}

// The Philox4x32-10 call whose words are the noise of ids 4c .. 4c + 3 (c = id >> 2) at step
// `step` of block `block`.
DFSEL_HD Philox4 markov_philox(uint64_t seed, uint32_t block, uint32_t step, uint32_t c) {
  Philox4 ctr;
  ctr.v[0] = c;
  ctr.v[1] = block;
  ctr.v[2] = step;
  ctr.v[3] = 0x6473706bu;  // "dspk": apart from the DFlash2 walk's draws on the same seed
  return philox4x32_10(ctr, (uint32_t)seed, (uint32_t)(seed >> 32));
}

// Gumbel noise from one word of a call: u is an odd multiple of 2^-24, never 0 or 1, so the
// noise is finite.
DFSEL_HD float markov_gumbel_of_word(uint32_t word) {
  const float u = (float)((word >> 8) | 1u) * (1.0f / 16777216.0f);
  // -portable_logf(-portable_logf(u)) without its special cases: u is normal in [2^-24, 1), so
  // ln u is negative and -ln u normal, at least about 2^-24.
  return -portable_log_normal(-portable_log_normal(u));
}

// Gumbel noise of token id at step `step` of block `block`: word id % 4 of markov_philox's call
// (one call serves four consecutive ids; the one-launch chain shares each between lanes).
DFSEL_HD float markov_gumbel(uint64_t seed, uint32_t block, uint32_t step, int32_t id) {
  const Philox4 r = markov_philox(seed, block, step, (uint32_t)id >> 2);
  const uint32_t q = (uint32_t)id & 3u;  // a select, not an index: the words stay in registers
  return markov_gumbel_of_word(q == 0 ? r.v[0] : q == 1 ? r.v[1] : q == 2 ? r.v[2] : r.v[3]);
}

// The key a sampling step ranks token ids by (Gumbel-max: the largest key is a draw from
// softmax(l / T)); greedy steps rank by l itself. Ties and NaN follow the candidate order.
// argmax (l / T + G) and argmax (l + T G) are the same draw (T > 0 scales every key alike), and
// each form is taken where it cannot overflow: T <= 1, l + T G (|G| < 17, so T G is finite
// and a tiny T, even a subnormal one, leaves the order of l: greedy, the limit as T -> 0);
// T > 1, l / T + G (|l / T| <= |l|). l / T itself overflows for T <= 1e-37 at |l| ~ 1, or for
// l ~ 1e37 at T = 0.1, and ranked every token +inf or -inf alike, so the lowest id won.
DFSEL_HD float markov_sample_key(float l, float temperature, float gumbel) {
  return temperature <= 1.0f ? l + temperature * gumbel : l / temperature + gumbel;
}

// The normaliser sum_v exp((l_v - m) / T) of a step, m the largest l of the row (NaN
// skipped). Each term is truncated to a multiple of 2^-52 and the terms are summed as
// integers, which is exact and so the same for every shard count and every order. Special
// rows: NaN weighs nothing; a row whose maximum is +inf shares the mass among its +inf values;
// a row with nothing above -inf is uniform over its -inf values.
constexpr float kNormOne = 4503599627370496.0f;  // 2^52

DFSEL_HD float norm_weight(float l, float m, float temperature) {
  if (l != l) return 0.0f;
  if (m == -INFINITY) return l == -INFINITY ? 1.0f : 0.0f;
  if (m == INFINITY) return l == INFINITY ? 1.0f : 0.0f;
  return portable_expf((l - m) / temperature);
}

struct NormSum {
  uint64_t lo, hi;
};

DFSEL_HD void norm_add(NormSum* s, uint64_t lo, uint64_t hi) {
  s->lo += lo;
  s->hi += hi + (s->lo < lo ? 1u : 0u);
}

DFSEL_HD void norm_add_weight(NormSum* s, float w) { norm_add(s, (uint64_t)(w * kNormOne), 0u); }

DFSEL_HD double norm_value(NormSum s) {
  return ((double)s.hi * 18446744073709551616.0 + (double)s.lo) * (1.0 / 4503599627370496.0);
}

// q(x) = w_x / Z for the chosen value l_x; 0 when the row has no weight at all (only NaN).
DFSEL_HD float markov_prob(float l_x, float m, float temperature, NormSum z) {
  const double zv = norm_value(z);
  return zv > 0.0 ? (float)((double)norm_weight(l_x, m, temperature) / zv) : 0.0f;
}

// log sum_v exp(l_v / T) = m / T + log Z (-inf for a row of -inf or NaN only), log Z taken as
// e ln 2 + ln f for Z = f 2^e (f in [1/2, 1), the portable log of f rounded to float).
DFSEL_HD float markov_log_norm(float m, float temperature, NormSum z) {
  const double zv = norm_value(z);
  if (zv <= 0.0) return -INFINITY;
  int e = 0;
  const double f = frexp(zv, &e);
  const double log_z = (double)e * 0.6931471805599453 + (double)portable_logf((float)f);
  return (float)((double)m / (double)temperature + log_z);
}

// The confidence from the head's dot product x and its bias: sigmoid(x + b).
DFSEL_HD float confidence_of(float x, float bias) { return 1.0f / (1.0f + portable_expf(-(x + bias))); }

// The confidence head: sigmoid(w . [h ; e] + b), w one stored row of n_embd + R elements.
DFSEL_HD float markov_confidence(const void* w_row, dfsel_type type, const float* h, int64_t n_embd,
                                 const float* e, int R, float bias) {
  const float x = chained_dot([&](int i) { return load_elem(w_row, type, i); },
                              [&](int i) { return i < n_embd ? h[i] : e[i - n_embd]; }, (int)n_embd + R);
  return confidence_of(x, bias);
}

}  // namespace dfsel
