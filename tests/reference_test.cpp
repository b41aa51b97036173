// The CPU reference against the brute-force oracle, across shapes, types, special values and
// shard counts (SPEC sections 2 to 5).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "kernels/common/numeric.cuh"
#include "support/oracle.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr double kTol = 2e-4;

void expect_matches_oracle(const Case& c, uint64_t seed, const RunOpts& run = RunOpts{}) {
  SCOPED_TRACE(c.str() + " seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  const Result r = run_case(c, d, run);
  ASSERT_EQ(r.status, DFSEL_SUCCESS) << r.error;
  const std::string why = compare_with_oracle(c, oracle_lattice(c, d), r, run.p_min, kTol);
  EXPECT_EQ(why, "");
}

TEST(Reference, MatchesOracleOnRandomShapes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 24; ++i) {
    Case c;
    c.V = 16 + rng() % 3000;
    c.K = std::min<int64_t>(c.V, 1 + rng() % 40);
    c.R = 32 * (1 + rng() % 3);
    c.E = 32 * (1 + rng() % 4);
    c.block = 2 + rng() % 6;
    c.blocks = 1 + rng() % 3;
    c.logits_pad = rng() % 3 == 0 ? rng() % 9 : 0;
    c.softcap = rng() % 2 ? 0.0f : 5.0f + rng() % 20;
    c.scale = rng() % 2 ? 1.0f : 0.5f + (float)(rng() % 100) / 50.0f;
    expect_matches_oracle(c, rng());
  }
}

TEST(Reference, KEqualsOneAndKEqualsShard) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.K = 1;
  expect_matches_oracle(c, rng());
  c.V = 40;
  c.K = 40;
  expect_matches_oracle(c, rng());
}

TEST(Reference, SpecialValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual,
                    Special::kMixed}) {
    for (int K : {1, 8, 16, 64}) {
      Case c;
      c.V = 700;
      c.K = K;
      c.special = s;
      c.softcap = rng() % 2 ? 0.0f : 10.0f;
      expect_matches_oracle(c, rng());
    }
  }
}

TEST(Reference, ShortRowsStillYieldKCandidatesInOrder) {
  Case c;
  c.V = 300;
  c.K = 16;
  c.special = Special::kShortRows;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  const Result r = run_case(c, d, RunOpts{});
  ASSERT_EQ(r.status, DFSEL_SUCCESS) << r.error;
  // Each row holds about 3 finite values: the rest of its 16 candidates are -inf, then NaN,
  // each group by ascending id.
  const int L = c.block - 1;
  for (int b = 0; b < c.blocks; ++b)
    for (int p = 1; p <= L; ++p) {
      const float* z = &d.logits_f[((size_t)b * c.block + p) * c.V];
      const int32_t* ids = &r.cand_ids[((size_t)b * L + p - 1) * c.K];
      for (int j = 1; j < c.K; ++j) {
        const float a = z[ids[j - 1]], x = z[ids[j]];
        const bool ordered = std::isnan(x) ? (!std::isnan(a) || ids[j - 1] < ids[j])
                                           : (!std::isnan(a) && (a > x || (a == x && ids[j - 1] < ids[j])));
        EXPECT_TRUE(ordered) << "row " << b << "/" << p << " position " << j;
      }
    }
}

TEST(Reference, ShardedEqualsOneShardBitwise) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type cb : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0}) {
    Case c;
    c.V = 900 + rng() % 500;
    c.K = 1 + rng() % 16;
    c.cb_t = cb;
    c.wh_t = cb;
    c.special = rng() % 2 ? Special::kMixed : Special::kNone;
    const Data d = make_data(c, rng());
    RunOpts one;
    const Result base = run_case(c, d, one);
    ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
    for (int S : {1, 2, 3, 4, 7, 8}) {
      for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
        RunOpts r;
        r.bounds = random_bounds(c.V, S, c.K, rng);
        r.placement = pl;
        const Result x = run_case(c, d, r);
        SCOPED_TRACE("S=" + std::to_string(S) + " placement=" + std::to_string(pl) + " " + c.str());
        ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
        EXPECT_EQ(bitwise_diff(x, base), "");
      }
    }
  }
}

TEST(Reference, PackedRowsHoldIdsAndScores) {
  Case c;
  c.V = 500;
  c.K = 6;
  c.E = 64;
  c.block = 4;
  c.blocks = 3;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts run;
  run.packed_pad = 5;
  const Result r = run_case(c, d, run);
  ASSERT_EQ(r.status, DFSEL_SUCCESS) << r.error;
  const int L = c.block - 1, K = c.K;
  for (int b = 0; b < c.blocks; ++b)
    for (int p = 0; p <= L; ++p) {
      const float* row = &r.packed[((size_t)b * c.block + p) * r.packed_row_floats];
      for (int x = 0; x < c.E; ++x) {
        float want = 0.0f;
        if (p > 0 && x < K) want = (float)r.cand_ids[((size_t)b * L + p - 1) * K + x];
        else if (p > 0 && x < K + K * K) want = r.scores[((size_t)b * L + p - 1) * K * K + (x - K)];
        ASSERT_EQ(std::memcmp(&row[x], &want, 4), 0) << "block " << b << " row " << p << " element " << x;
      }
      // At p = 1 every predecessor row repeats the anchor's scores.
      if (p == 1)
        for (int i = 1; i < K; ++i)
          for (int j = 0; j < K; ++j) ASSERT_EQ(row[K + i * K + j], row[K + j]);
    }
}

TEST(Reference, PMinStopsTheWalk) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (float p_min : {0.05f, 0.2f, 0.5f, 0.9f}) {
    Case c;
    c.V = 400;
    c.K = 4;
    c.R = 32;
    c.block = 8;
    c.blocks = 4;
    RunOpts r;
    r.p_min = p_min;
    expect_matches_oracle(c, rng(), r);
  }
  Case c;
  RunOpts all;
  all.p_min = 1.0f;  // no choice has probability 1 among 8 finite scores
  const Data d = make_data(c, rng());
  const Result r = run_case(c, d, all);
  ASSERT_EQ(r.status, DFSEL_SUCCESS) << r.error;
  for (int b = 0; b < c.blocks; ++b) EXPECT_EQ(r.n_emitted[b], 0);
  for (int32_t t : r.path) EXPECT_EQ(t, -1);
}

// Identical blocks give draws from the same q, keyed by block: their histogram must follow q.
TEST(Reference, SamplingFollowsQ) {
  Case c;
  c.V = 64;
  c.K = 6;
  c.R = 32;
  c.E = 32;
  c.block = 2;
  c.blocks = 12000;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Data d = make_data(c, seed);
  for (int b = 1; b < c.blocks; ++b) {
    std::memcpy(&d.logits[(size_t)b * c.block * d.logits_nb1], d.logits.data(), c.block * d.logits_nb1);
    std::memcpy(&d.logits_f[(size_t)b * c.block * c.V], d.logits_f.data(), c.block * c.V * 4);
    std::memcpy(&d.hidden[(size_t)b * c.block * d.hidden_nb1], d.hidden.data(), c.block * d.hidden_nb1);
    d.anchors[b] = d.anchors[0];
  }
  RunOpts r;
  r.temperature = 2.0f;
  r.seed = seed + 1;
  r.packed = false;
  const Result x = run_case(c, d, r);
  ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
  std::vector<double> count(c.K, 0);
  for (int b = 0; b < c.blocks; ++b) {
    ASSERT_EQ(x.n_emitted[b], 1);
    int j = 0;
    while (j < c.K && x.cand_ids[(size_t)b * c.K + j] != x.path[b]) ++j;
    ASSERT_LT(j, c.K);
    count[j] += 1;
    for (int i = 0; i < c.K; ++i) ASSERT_EQ(x.q[(size_t)b * c.K + i], x.q[i]);
  }
  // Bins expected to hold fewer than 5 draws are pooled (the chi-square approximation needs
  // it); the threshold is the p = 1e-6 critical value, so fresh seeds fail about once in a
  // million runs while a biased sampler, thousands of draws off, fails every time.
  std::vector<double> obs, exp_;
  double pool_o = 0, pool_e = 0;
  for (int j = 0; j < c.K; ++j) {
    const double e = x.q[j] * c.blocks;
    if (e < 5) {
      pool_o += count[j];
      pool_e += e;
    } else {
      obs.push_back(count[j]);
      exp_.push_back(e);
    }
  }
  if (pool_e > 0) {
    obs.push_back(pool_o);
    exp_.push_back(pool_e);
  }
  double chi2 = 0;
  for (size_t i = 0; i < obs.size(); ++i) chi2 += (obs[i] - exp_[i]) * (obs[i] - exp_[i]) / exp_[i];
  const double critical[] = {0, 23.93, 27.63, 30.66, 33.38, 35.89, 38.32, 40.52};
  const size_t dof = obs.size() - 1;
  ASSERT_GE(dof, 1u);
  EXPECT_LT(chi2, critical[dof]) << "chi-square with " << dof << " degrees of freedom, p < 1e-6";
  // The same seed draws the same tokens; another seed draws others.
  const Result y = run_case(c, d, r);
  EXPECT_EQ(first_diff(x.path, y.path), -1);
  r.seed += 1;
  const Result z = run_case(c, d, r);
  EXPECT_NE(first_diff(x.path, z.path), -1);
}

// Each stored type gives exactly the result of an F32 problem holding the same values.
TEST(Reference, TypesMatchF32OfTheSameValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const dfsel_type act[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
  const dfsel_type wt[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
  for (dfsel_type lt : act)
    for (dfsel_type cb : wt) {
      Case c;
      c.V = 600;
      c.K = 8;
      c.logits_t = lt;
      c.hidden_t = act[rng() % 3];
      c.cb_t = cb;
      c.wh_t = wt[rng() % 4];
      const Data d = make_data(c, rng());
      // The same values as F32.
      Case f = c;
      f.logits_t = f.hidden_t = f.cb_t = f.wh_t = DFSEL_TYPE_F32;
      Data g = d;
      auto widen = [](const std::vector<uint8_t>& src, dfsel_type t, size_t n) {
        std::vector<uint8_t> out(n * 4);
        for (size_t i = 0; i < n; ++i) {
          const float v = load_elem(src.data(), t, (int64_t)i);
          std::memcpy(&out[4 * i], &v, 4);
        }
        return out;
      };
      const size_t n_tokens = (size_t)c.blocks * c.block;
      g.logits = widen(d.logits, c.logits_t, n_tokens * c.V);
      g.logits_nb1 = c.V * 4;
      g.hidden = widen(d.hidden, c.hidden_t, n_tokens * c.E);
      g.hidden_nb1 = c.E * 4;
      g.e_prev = widen(d.e_prev, c.cb_t, (size_t)c.V * c.R);
      g.e_next = widen(d.e_next, c.cb_t, (size_t)c.V * c.R);
      g.w_h = widen(d.w_h, c.wh_t, (size_t)c.R * c.E);
      const Result a = run_case(c, d, RunOpts{}), b = run_case(f, g, RunOpts{});
      SCOPED_TRACE(c.str());
      ASSERT_EQ(a.status, DFSEL_SUCCESS) << a.error;
      ASSERT_EQ(b.status, DFSEL_SUCCESS) << b.error;
      EXPECT_EQ(first_diff(a.cand_ids, b.cand_ids), -1);
      EXPECT_EQ(first_diff(a.scores, b.scores), -1);
      EXPECT_EQ(first_diff(a.path, b.path), -1);
      expect_matches_oracle(c, rng());
    }
}

}  // namespace
}  // namespace dfsel::test
