// The DSpark reference (host/reference/dspark_reference.cpp) against a brute-force
// double-precision oracle (tests/support/dspark_oracle.cpp), which judges nearly every step
// (near-ties are rare), and the chain's results bitwise the same for every shard count and W1
// placement.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "support/dspark_oracle.h"
#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

std::string trace(const DSparkCase& c, uint64_t seed, const DSparkRunOpts& r) {
  return c.str() + " seed=" + std::to_string(seed) + " T=" + std::to_string(r.temperature) +
         " p_min=" + std::to_string(r.p_min) + " draw seed=" + std::to_string(r.seed);
}

void expect_oracle(const DSparkCase& c, uint64_t seed, const DSparkRunOpts& r, OracleTally* tally) {
  SCOPED_TRACE(trace(c, seed, r));
  const DSparkData d = make_dspark_data(c, seed);
  const DSparkResult got = reference_dspark(c, d, r);
  EXPECT_EQ(compare_dspark_with_oracle(c, d, r, got, 1e-4, tally), "");
}

// Near-ties leave a step unjudged: over a test's runs they must be rare (under 1 step in 100
// here), or the comparison would say little.
void expect_mostly_judged(const OracleTally& t) {
  EXPECT_GE(t.judged * 10, t.steps * 9) << t.judged << " of " << t.steps << " steps judged";
}

TEST(DSparkReference, MatchesTheOracleOnRandomDrafts) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  OracleTally t;
  for (const auto& [c, r] : random_dspark_runs(rng, 40)) expect_oracle(c, rng(), r, &t);
  expect_mostly_judged(t);
}

TEST(DSparkReference, MatchesTheOracleOnSpecialValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  OracleTally t;
  for (const auto& [c, r] : special_dspark_runs(rng)) expect_oracle(c, rng(), r, &t);
  expect_mostly_judged(t);
}

// The oracle is not fooled: a reference result with each block's first token changed is refused
// (every block's: a first step within rounding of a tie, about 1 in 400, is not judged).
TEST(DSparkReference, OracleRefusesAChangedToken) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  DSparkCase c;
  c.V = c.V_target = 500;
  const DSparkData d = make_dspark_data(c, seed);
  DSparkResult got = reference_dspark(c, d, DSparkRunOpts{});
  ASSERT_EQ(compare_dspark_with_oracle(c, d, DSparkRunOpts{}, got, 1e-4), "");
  for (int b = 0; b < c.blocks; ++b) got.tokens[(size_t)b * c.N] = (got.tokens[(size_t)b * c.N] + 1) % (int32_t)c.V;
  EXPECT_NE(compare_dspark_with_oracle(c, d, DSparkRunOpts{}, got, 1e-4), "");
}

// Ties that no rounding can split are judged, the lowest id expected: two tokens with the same
// base logit, W2 row and scale far above the rest, or two +inf logits; the other token is refused.
TEST(DSparkReference, OracleJudgesTiesThatNoRoundingSplits) {
  DSparkCase c;  // F32 weights and logits, greedy, one step
  c.V = c.V_target = 200;
  c.N = 1;
  c.blocks = 1;
  for (float top : {40.0f, INFINITY}) {
    SCOPED_TRACE("logit " + std::to_string(top));
    DSparkData d = make_dspark_data(c, 5);
    const size_t rb = (size_t)c.R * 4;
    std::memcpy(&d.w2[9 * rb], &d.w2[7 * rb], rb);
    std::memcpy(&d.w2_f[9 * (size_t)c.R], &d.w2_f[7 * (size_t)c.R], rb);
    for (int v : {7, 9}) {
      d.logits_f[v] = top;
      std::memcpy(&d.logits[(size_t)v * 4], &top, 4);
    }
    DSparkResult got = reference_dspark(c, d, DSparkRunOpts{});
    ASSERT_EQ(got.draft_ids[0], 7);
    OracleTally t;
    EXPECT_EQ(compare_dspark_with_oracle(c, d, DSparkRunOpts{}, got, 1e-4, &t), "");
    EXPECT_EQ(t.judged, 1);
    got.tokens[0] = got.draft_ids[0] = 9;
    EXPECT_NE(compare_dspark_with_oracle(c, d, DSparkRunOpts{}, got, 1e-4), "");
  }
}

// Every shard count (1 to 4, uneven ranges) and both W1 placements give the same bits.
TEST(DSparkReference, ShardCountsGiveBitwiseTheSameChain) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 12; ++i) {
    DSparkCase c = random_dspark_case(rng);
    const uint64_t data_seed = rng();
    const DSparkData d = make_dspark_data(c, data_seed);
    DSparkRunOpts r = random_dspark_opts(c, rng);
    r.bounds.clear();
    r.placement = DFSEL_CODEBOOKS_REPLICATED;
    SCOPED_TRACE(trace(c, data_seed, r));
    const DSparkResult one = run_dspark(c, d, r);
    ASSERT_EQ(one.status, DFSEL_SUCCESS) << one.error;
    for (int S = 2; S <= 4; ++S)
      for (dfsel_placement p : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
        if (c.d2t && p == DFSEL_CODEBOOKS_SHARDED) continue;
        r.bounds = random_bounds(c.V, S, 1, rng);
        r.placement = p;
        const DSparkResult many = run_dspark(c, d, r);
        ASSERT_EQ(many.status, DFSEL_SUCCESS) << many.error;
        EXPECT_EQ(dspark_bitwise_diff(one, many), "") << S << " ranks, placement " << p;
      }
  }
}

}  // namespace
}  // namespace dfsel::test
