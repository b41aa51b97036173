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
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [c, r] : random_dspark_runs(rng, 40)) expect_bitwise(c, rng(), r);
}

TEST(DSparkCpu, BitwiseTheReferenceOnSpecialValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [c, r] : special_dspark_runs(rng)) expect_bitwise(c, rng(), r);
}

}  // namespace
}  // namespace dfsel::test
