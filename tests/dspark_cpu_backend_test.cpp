// The CPU backend's DSpark chain (host/backend/cpu_dspark*) against the reference
// (host/reference/dspark_reference.cpp), bit for bit, on fresh random drafts: both layouts,
// with and without d2t, markov_w2.scale, a confidence head and p_min, greedy and sampling,
// every weight type, 1 to 4 in-process ranks over uneven ranges, both W1 placements, every
// worker count, R not a multiple of eight, and planted ties, NaN and -inf.
#include <gtest/gtest.h>

#include <random>

#include "kernels/common/numeric.cuh"
#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

const dfsel_type kFloats[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
const dfsel_type kWeights[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_Q4_K,
                               DFSEL_TYPE_Q6_K};

// A weight type that rows of n elements can hold.
dfsel_type weight_type(std::mt19937_64& rng, int64_t n) {
  for (;;) {
    const dfsel_type t = kWeights[rng() % 6];
    const int64_t block = t == DFSEL_TYPE_Q8_0 ? 32 : is_kquant(t) ? 256 : 1;
    if (n % block == 0) return t;
  }
}

DSparkCase random_case(std::mt19937_64& rng) {
  DSparkCase c;
  c.V = 40 + (int64_t)(rng() % 900);
  c.d2t = rng() % 3 == 0;
  c.V_target = c.d2t ? c.V + (int64_t)(rng() % 200) : c.V;
  c.R = rng() % 4 == 0 ? 256 : rng() % 2 ? 32 * (1 + (int)(rng() % 4)) : 1 + (int)(rng() % 70);
  c.E = rng() % 2 ? 0 : 8 + (int64_t)(rng() % 60);
  if (c.E > 0 && rng() % 4 == 0) c.E = 256 * 2 - c.R % 256;  // lets the head's row be a K-quant
  c.N = 1 + (int)(rng() % 7);
  c.blocks = 1 + (int)(rng() % 5);
  c.from_anchor = rng() % 2;
  c.scale_rows = (int)(rng() % 3);
  c.logits_t = kFloats[rng() % 3];
  c.hidden_t = kFloats[rng() % 3];
  c.w1_t = weight_type(rng, c.R);
  c.w2_t = weight_type(rng, c.R);
  c.conf_t = weight_type(rng, c.E + c.R);
  c.logit_scale = rng() % 3 == 0 ? 0.5f + (float)(rng() % 100) / 100.0f : 0.0f;
  c.softcap = rng() % 3 == 0 ? 5.0f + (float)(rng() % 20) : 0.0f;
  c.conf_bias = rng() % 2 ? 0.0f : (float)((int)(rng() % 200) - 100) / 100.0f;
  c.logits_pad = rng() % 3 == 0 ? rng() % 9 : 0;
  return c;
}

DSparkRunOpts random_opts(const DSparkCase& c, std::mt19937_64& rng) {
  DSparkRunOpts r;
  const int S = 1 + (int)(rng() % 4);
  if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
  r.placement = !c.d2t && rng() % 2 ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
  r.temperature = rng() % 2 ? 0.0f : 0.3f + (float)(rng() % 200) / 100.0f;
  r.p_min = c.E > 0 && rng() % 2 ? 0.3f + (float)(rng() % 40) / 100.0f : 0.0f;
  r.seed = rng();
  r.n_threads = (int32_t)(rng() % 4);
  return r;
}

void expect_bitwise(const DSparkCase& c, uint64_t seed, const DSparkRunOpts& r) {
  SCOPED_TRACE(c.str() + " seed=" + std::to_string(seed) + " ranks=" + std::to_string(r.bounds.empty() ? 1 : r.bounds.size() - 1) +
               " T=" + std::to_string(r.temperature) + " p_min=" + std::to_string(r.p_min) +
               " sharded=" + std::to_string(r.placement));
  const DSparkData d = make_dspark_data(c, seed);
  const DSparkResult got = run_dspark(c, d, r);
  ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
  const DSparkResult want = reference_dspark(c, d, r);
  EXPECT_EQ(dspark_bitwise_diff(got, want), "");
}

TEST(DSparkCpu, BitwiseTheReferenceOnRandomDrafts) {
  std::mt19937_64 rng(fresh_seed());
  for (int i = 0; i < 40; ++i) {
    const DSparkCase c = random_case(rng);
    expect_bitwise(c, rng(), random_opts(c, rng));
  }
}

TEST(DSparkCpu, BitwiseTheReferenceOnSpecialValues) {
  std::mt19937_64 rng(fresh_seed());
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual,
                    Special::kMixed})
    for (dfsel_type t : kFloats) {
      DSparkCase c = random_case(rng);
      c.special = s;
      c.logits_t = t;
      for (float temperature : {0.0f, 0.7f}) {
        DSparkRunOpts r = random_opts(c, rng);
        r.temperature = temperature;
        expect_bitwise(c, rng(), r);
      }
    }
}

}  // namespace
}  // namespace dfsel::test
