// The CPU backend's DSpark chain (host/backend/cpu_dspark*) against the reference
// (host/reference/dspark_reference.cpp), bit for bit, on fresh random drafts: both layouts,
// with and without d2t, markov_w2.scale, a confidence head and p_min, greedy and sampling,
// every weight type, 1 to 4 in-process ranks over uneven ranges, both W1 placements, every
// worker count, R not a multiple of eight, and planted ties, NaN and -inf.
#include <gtest/gtest.h>

#include <random>

#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

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
    const DSparkCase c = random_dspark_case(rng);
    expect_bitwise(c, rng(), random_dspark_opts(c, rng));
  }
}

TEST(DSparkCpu, BitwiseTheReferenceOnSpecialValues) {
  std::mt19937_64 rng(fresh_seed());
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual,
                    Special::kMixed})
    for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16}) {
      DSparkCase c = random_dspark_case(rng);
      c.special = s;
      c.logits_t = t;
      for (float temperature : {0.0f, 0.7f}) {
        DSparkRunOpts r = random_dspark_opts(c, rng);
        r.temperature = temperature;
        expect_bitwise(c, rng(), r);
      }
    }
}

}  // namespace
}  // namespace dfsel::test
