// Special values through the CPU reference (SPEC sections 2 to 5; docs/DESIGN-NOTES.md, Numerics):
// logits all -inf, all NaN, all equal, huge, subnormal; Q8_0 codebooks with extreme scales;
// softcap and logit_scale on huge inputs. Each case asserts the outcome derived by hand from
// the design, that no NaN appears without a NaN input, and that 1 and 3 shards in both
// placements give bitwise the same result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <functional>

#include "kernels/common/numeric.cuh"
#include "kernels/common/philox.cuh"
#include "support/oracle.h"
#include "support/problem.h"
#include "support/special_problems.h"

namespace dfsel::test {
namespace {

constexpr double kOracleTol = 2e-4;

bool bits_equal(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

// Runs p with one shard, then with three in both placements (bitwise the same result, NaN
// payloads included), and checks that no NaN appears that no NaN input explains.
void run_cpu(const SpecialProblem& p, const RunOpts& opts, Result* out) {
  SCOPED_TRACE(p.str());
  *out = run_case(p.c, p.d, opts);
  ASSERT_EQ(out->status, DFSEL_SUCCESS) << out->error;
  EXPECT_EQ(unexplained_nan(p, *out), "");
  for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
    SCOPED_TRACE("S=3 placement=" + std::to_string(pl));
    RunOpts r = opts;
    r.bounds = even_bounds(p.c.V, 3);
    r.placement = pl;
    const Result x = run_case(p.c, p.d, r);
    ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
    EXPECT_EQ(bitwise_diff(x, *out), "");
  }
}

// Greedy run checked against the hand-derived outcome.
void run_expected(const SpecialProblem& p, Result* out) {
  run_cpu(p, RunOpts{}, out);
  if (::testing::Test::HasFatalFailure()) return;
  EXPECT_EQ(check_expected(p, expected_outcome(p), *out), "") << p.str();
}

// Runs p under its description as run_expected does, into a Result named r, and leaves the
// test on a fatal failure: the opening of most tests below.
#define RUN_EXPECTED(p, r)   \
  SCOPED_TRACE((p).str());   \
  Result r;                  \
  run_expected((p), &r);     \
  if (::testing::Test::HasFatalFailure()) return

int nd_of(const Case& c) { return c.blocks * (c.block - 1); }

const float* logit_row(const SpecialProblem& p, int d) {
  const int L = p.c.block - 1;
  return &p.d.logits_f[((size_t)(d / L) * p.c.block + d % L + 1) * p.c.V];
}

// Candidates of every row are ids 0..K-1 (the whole row ties, or is NaN: ids ascending).
void expect_lowest_ids(const SpecialProblem& p, const Result& r) {
  for (int d = 0; d < nd_of(p.c); ++d)
    for (int j = 0; j < p.c.K; ++j) ASSERT_EQ(r.cand_ids[(size_t)d * p.c.K + j], j) << "row " << d;
}

void expect_path_of_first_candidates(const SpecialProblem& p, const Result& r) {
  for (int d = 0; d < nd_of(p.c); ++d) EXPECT_EQ(r.path[d], r.cand_ids[(size_t)d * p.c.K]) << "row " << d;
  for (int b = 0; b < p.c.blocks; ++b) EXPECT_EQ(r.n_emitted[b], p.c.block - 1);
}

// Sampling where every step's q is known exactly: q[j] = 1/n for the n entries of `mass`,
// 0 elsewhere; the draw is the first j whose running sum of q exceeds u.
void expect_sampling(const SpecialProblem& p, const std::vector<std::vector<int>>& mass_of_row, uint64_t seed) {
  RunOpts o;
  o.temperature = 0.7f;
  o.seed = seed;
  Result r;
  run_cpu(p, o, &r);
  if (::testing::Test::HasFatalFailure()) return;
  const int K = p.c.K, L = p.c.block - 1;
  for (int b = 0; b < p.c.blocks; ++b)
    for (int pos = 1; pos <= L; ++pos) {
      const int d = b * L + pos - 1;
      const std::vector<int>& mass = mass_of_row[d];
      std::vector<float> q(K, 0.0f);
      for (int j : mass) q[j] = 1.0f / (float)mass.size();
      for (int j = 0; j < K; ++j)
        ASSERT_TRUE(bits_equal(r.q[(size_t)d * K + j], q[j])) << "q[" << d << "][" << j << "] = " << r.q[(size_t)d * K + j];
      const float u = philox_uniform(seed, (uint32_t)b, (uint32_t)pos);
      float cum = 0.0f;
      int drawn = -1;
      for (int j = 0; j < K && drawn < 0; ++j) {
        cum += q[j];
        if (q[j] > 0.0f && u < cum) drawn = j;
      }
      if (drawn < 0) drawn = mass.back();
      EXPECT_EQ(r.path[d], r.cand_ids[(size_t)d * K + drawn]) << "row " << d << " u=" << u;
    }
}

// p_min against a first step whose greedy probability is exactly `prob`: p_min = prob emits
// every step, the next float above stops before the first.
void expect_p_min_edge(const SpecialProblem& p, float prob) {
  RunOpts o;
  o.p_min = prob;
  Result r;
  run_cpu(p, o, &r);
  if (::testing::Test::HasFatalFailure()) return;
  for (int b = 0; b < p.c.blocks; ++b) EXPECT_EQ(r.n_emitted[b], p.c.block - 1) << "p_min = " << prob;
  o.p_min = std::nextafter(prob, 1.0f);
  run_cpu(p, o, &r);
  if (::testing::Test::HasFatalFailure()) return;
  for (int b = 0; b < p.c.blocks; ++b) EXPECT_EQ(r.n_emitted[b], 0) << "p_min just above " << prob;
  for (int32_t t : r.path) EXPECT_EQ(t, -1);
}

std::vector<std::vector<int>> uniform_mass(const SpecialProblem& p) {
  std::vector<int> all(p.c.K);
  for (int j = 0; j < p.c.K; ++j) all[j] = j;
  return std::vector<std::vector<int>>(nd_of(p.c), all);
}

const dfsel_type kTypes[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};

TEST(Numerics, AllNegInfRows) {
  for (dfsel_type t : kTypes)
    for (float cap : {0.0f, 30.0f}) {
      const SpecialProblem p = all_neg_inf(t, cap);
      RUN_EXPECTED(p, r);
      expect_lowest_ids(p, r);
      for (float u : r.unary) EXPECT_EQ(u, cap > 0 ? -cap : -INFINITY);
      if (cap == 0.0f) {
        // -inf plus a finite product: every score -inf, every step j = 0, no NaN.
        for (float s : r.scores) EXPECT_EQ(s, -INFINITY);
        expect_path_of_first_candidates(p, r);
      } else {
        for (float s : r.scores) EXPECT_TRUE(std::isfinite(s)) << s;
      }
    }
}

TEST(Numerics, AllNegInfRowsSampleUniformlyAndMeetPMinAtOneOverK) {
  const SpecialProblem p = all_neg_inf(DFSEL_TYPE_F32, 0.0f);
  SCOPED_TRACE(p.str());
  expect_sampling(p, uniform_mass(p), 1234);
  expect_p_min_edge(p, 1.0f / (float)p.c.K);
}

TEST(Numerics, AllNaNRows) {
  for (dfsel_type t : kTypes) {
    const SpecialProblem p = all_nan(t);
    SCOPED_TRACE(p.str());
    ASSERT_TRUE(has_nan_input(p));
    Result r;
    run_expected(p, &r);
    if (HasFatalFailure()) return;
    expect_lowest_ids(p, r);
    for (float u : r.unary) EXPECT_TRUE(std::isnan(u));
    for (float s : r.scores) EXPECT_TRUE(std::isnan(s));
    // Every score NaN: the walk takes j = 0 and emits every position.
    expect_path_of_first_candidates(p, r);
  }
  const SpecialProblem p = all_nan(DFSEL_TYPE_F32);
  SCOPED_TRACE(p.str());
  expect_sampling(p, uniform_mass(p), 99);  // q uniform, never NaN
  expect_p_min_edge(p, 1.0f / (float)p.c.K);
}

TEST(Numerics, NaNRanksBelowNegInf) {
  for (dfsel_type t : kTypes) {
    const SpecialProblem p = nan_below_neg_inf(t);
    RUN_EXPECTED(p, r);
    const int K = p.c.K;
    for (int d = 0; d < nd_of(p.c); ++d) {
      // 2.5, the large negative, the three -inf by id, then the three lowest NaN ids.
      const float* z = logit_row(p, d);
      std::vector<int32_t> want, ninf, nan_ids;
      for (int32_t v = 0; v < p.c.V; ++v) {
        if (z[v] == 2.5f) want.insert(want.begin(), v);
        else if (std::isfinite(z[v])) want.push_back(v);
        else if (z[v] == -INFINITY) ninf.push_back(v);
        else if ((int)nan_ids.size() < K - 5) nan_ids.push_back(v);
      }
      ASSERT_EQ(want.size(), 2u);
      ASSERT_EQ(ninf.size(), 3u);
      want.insert(want.end(), ninf.begin(), ninf.end());
      want.insert(want.end(), nan_ids.begin(), nan_ids.end());
      for (int j = 0; j < K; ++j) {
        EXPECT_EQ(r.cand_ids[(size_t)d * K + j], want[j]) << "row " << d << " j " << j;
        EXPECT_EQ(std::isnan(r.unary[(size_t)d * K + j]), j >= 5);
        for (int i = 0; i < K; ++i) EXPECT_EQ(std::isnan(r.scores[((size_t)d * K + i) * K + j]), j >= 5);
      }
    }
    expect_path_of_first_candidates(p, r);  // 2.5 + product beats everything at every step
    // Sampling: the -inf and NaN scores weigh nothing, the large negative underflows to 0.
    expect_sampling(p, std::vector<std::vector<int>>(nd_of(p.c), std::vector<int>{0}), 3);
  }
}

TEST(Numerics, AllEqualRowsTieOnTheLowestIds) {
  for (dfsel_type t : kTypes) {
    {
      const SpecialProblem p = all_equal(t, 0.5f, 1.0f, Gate::kZero);
      RUN_EXPECTED(p, r);
      expect_lowest_ids(p, r);
      for (float u : r.unary) EXPECT_EQ(u, 0.5f);
      for (float s : r.scores) EXPECT_EQ(s, 0.5f);  // g = 0: the product sum is +0
      expect_path_of_first_candidates(p, r);
      expect_sampling(p, uniform_mass(p), 7);
      expect_p_min_edge(p, 1.0f / (float)p.c.K);
    }
    {
      const SpecialProblem p = all_equal(t, 0.5f, 3.0f, Gate::kOneHot);
      RUN_EXPECTED(p, r);  // the products decide; equal products go to the lowest j
      expect_lowest_ids(p, r);
      for (float u : r.unary) EXPECT_EQ(u, 1.5f);
    }
    {
      const SpecialProblem p = signed_zeros(t);
      RUN_EXPECTED(p, r);
      expect_lowest_ids(p, r);  // -0 == +0: ids decide
      for (int d = 0; d < nd_of(p.c); ++d)
        for (int j = 0; j < p.c.K; ++j)
          EXPECT_TRUE(bits_equal(r.unary[(size_t)d * p.c.K + j], logit_row(p, d)[j])) << "the sign of 0 is kept";
      for (float s : r.scores) EXPECT_TRUE(bits_equal(s, 0.0f)) << "a score is never -0";
      expect_path_of_first_candidates(p, r);
    }
  }
}

TEST(Numerics, HugeLogits) {
  for (dfsel_type t : kTypes)
    for (float scale : {1.0f, 2.0f}) {
      const SpecialProblem p = huge_logits(t, scale, 0.0f);
      RUN_EXPECTED(p, r);
      ASSERT_FALSE(has_nan_input(p));
      const int K = p.c.K;
      std::vector<std::vector<int>> mass(nd_of(p.c));
      for (int d = 0; d < nd_of(p.c); ++d) {
        const float* z = logit_row(p, d);
        const int32_t* ids = &r.cand_ids[(size_t)d * K];
        // The two +inf first, by id; then the largest finite values.
        EXPECT_EQ(z[ids[0]], INFINITY);
        EXPECT_EQ(z[ids[1]], INFINITY);
        EXPECT_LT(ids[0], ids[1]);
        for (int j = 0; j < K; ++j) {
          const float u = r.unary[(size_t)d * K + j];
          EXPECT_TRUE(bits_equal(u, scale * z[ids[j]]));  // m * z, overflowing to +inf
          if (u == INFINITY) {
            mass[d].push_back(j);
            for (int i = 0; i < K; ++i) EXPECT_EQ(r.scores[((size_t)d * K + i) * K + j], INFINITY);
          }
        }
        // F32 and BF16 at m = 2: max-finite (twice) and 3e38 overflow too: five +inf share the mass
        // (F16's 65504 doubles to a finite float).
        EXPECT_EQ(mass[d].size(), t != DFSEL_TYPE_F16 && scale == 2.0f ? 5u : 2u);
        for (float s : std::vector<float>(r.scores.begin() + (size_t)d * K * K, r.scores.begin() + (size_t)(d + 1) * K * K))
          EXPECT_FALSE(std::isnan(s));
      }
      expect_path_of_first_candidates(p, r);  // the lower +inf id: ties go to the lowest j
      expect_sampling(p, mass, 5);
      expect_p_min_edge(p, 1.0f / (float)mass[0].size());
    }
}

TEST(Numerics, HugeLogitsUnderLargeScaleAndSoftcap) {
  for (dfsel_type t : kTypes) {
    const SpecialProblem p = huge_logits(t, 1.0f, 30.0f);
    RUN_EXPECTED(p, r);
    // Every huge or +inf candidate saturates to exactly c (|z / c| >= 34).
    for (size_t x = 0; x < r.unary.size(); ++x) {
      const float z = logit_row(p, (int)(x / p.c.K))[r.cand_ids[x]];
      if (z >= 1000.0f) {
        EXPECT_EQ(r.unary[x], 30.0f) << "z = " << z;
      }
    }
  }
  for (float cap : {0.0f, 30.0f}) {
    const SpecialProblem p = huge_logits(DFSEL_TYPE_F32, 1e30f, cap);
    RUN_EXPECTED(p, r);
    // 1e30 times a huge logit overflows; the background (-1 and below) goes to -1e30 and less.
    for (size_t x = 0; x < r.unary.size(); ++x) {
      const float z = logit_row(p, (int)(x / p.c.K))[r.cand_ids[x]];
      if (z >= 1e30f) {
        EXPECT_EQ(r.unary[x], cap > 0 ? 30.0f : INFINITY) << "z = " << z;
      } else {
        EXPECT_EQ(r.unary[x], cap > 0 ? -30.0f : 1e30f * z) << "z = " << z;
      }
    }
  }
}

TEST(Numerics, SubnormalLogitsAreNeitherFlushedNorReordered) {
  for (dfsel_type t : kTypes)
    for (float scale : {1.0f, 0.5f}) {
      const SpecialProblem p = subnormal_logits(t, scale);
      RUN_EXPECTED(p, r);
      const int K = p.c.K;
      for (int d = 0; d < nd_of(p.c); ++d) {
        const float* z = logit_row(p, d);
        const int32_t* ids = &r.cand_ids[(size_t)d * K];
        // Order by the raw logit: the smallest normal, then the positive subnormals, then the
        // zeros by id; never the negative subnormals ahead of a zero.
        EXPECT_EQ(std::fpclassify(z[ids[0]]), FP_NORMAL);
        for (int j = 1; j < K; ++j) {
          EXPECT_TRUE(z[ids[j - 1]] > z[ids[j]] || (z[ids[j - 1]] == z[ids[j]] && ids[j - 1] < ids[j]));
          EXPECT_GE(z[ids[j]], 0.0f);
        }
        for (int j = 0; j < K; ++j) {
          const float u = r.unary[(size_t)d * K + j];
          EXPECT_TRUE(bits_equal(u, scale * z[ids[j]]));
          // g = 0: the score is u + (+0): subnormals survive, -0 becomes +0.
          const float want = u == 0.0f ? 0.0f : u;
          for (int i = 0; i < K; ++i) EXPECT_TRUE(bits_equal(r.scores[((size_t)d * K + i) * K + j], want));
        }
      }
      expect_path_of_first_candidates(p, r);
    }
  // m = 0.5 halves the smallest subnormal to +0 (ties to even): its candidate keeps its rank.
  const SpecialProblem p = subnormal_logits(DFSEL_TYPE_F32, 0.5f);
  Result r;
  run_cpu(p, RunOpts{}, &r);
  ASSERT_FALSE(HasFatalFailure());
  bool seen = false;
  for (size_t x = 0; x < r.cand_ids.size(); ++x) {
    const float z = logit_row(p, (int)(x / p.c.K))[r.cand_ids[x]];
    if (bits_equal(z, bits_to_float(1u))) {
      seen = true;
      EXPECT_TRUE(bits_equal(r.unary[x], 0.0f));
      EXPECT_EQ(x % p.c.K, 4u) << "ranked after FLT_MIN, 0x007fffff, 5e-39, 1e-40";
    }
  }
  EXPECT_TRUE(seen);
  const SpecialProblem big = subnormal_logits(DFSEL_TYPE_F32, 1e30f);
  SCOPED_TRACE(big.str());
  run_expected(big, &r);
}

TEST(Numerics, Q8_0ExtremeScales) {
  struct S {
    uint16_t prev, next;
  };
  for (S s : {S{0x7bff, 0x7bff}, S{0xfbff, 0x7bff}, S{0x0001, 0x0001}, S{0x8001, 0x03ff}, S{0x7bff, 0x0001},
              S{0x0000, 0x7bff}, S{0x8000, 0x0000}}) {
    const SpecialProblem p = q8_scales(s.prev, s.next, Gate::kOneHot);
    RUN_EXPECTED(p, r);
    for (float x : r.scores) EXPECT_TRUE(std::isfinite(x)) << x;
    const float dp = f16_to_float(s.prev), dn = f16_to_float(s.next);
    if (dp == 0.0f || dn == 0.0f) {
      // A zero scale zeroes the row: every score is its unary value.
      const int K = p.c.K;
      for (size_t o = 0; o < r.scores.size(); ++o)
        EXPECT_TRUE(bits_equal(r.scores[o], r.unary[(o / (K * K)) * K + o % K]));
    }
    if (std::fabs(dp) == 65504.0f && dn == 65504.0f) {
      // Products of up to (65504 * 128)^2 = 7.0e13 are in play, and exact to one rounding.
      float largest = 0.0f;
      for (float x : r.scores) largest = std::max(largest, std::fabs(x));
      EXPECT_GT(largest, 1e13f);
    }
  }
  // g = 1 for every r: 32 products of up to (65504 * 128)^2 = 7e13 stay far from overflow.
  for (S s : {S{0x7bff, 0x7bff}, S{0xfbff, 0x7bff}, S{0x0001, 0x8001}}) {
    const SpecialProblem p = q8_scales(s.prev, s.next, Gate::kOnes);
    SCOPED_TRACE(p.str());
    Result r;
    run_cpu(p, RunOpts{}, &r);
    if (HasFatalFailure()) return;
    for (float x : r.scores) EXPECT_TRUE(std::isfinite(x)) << x;
    EXPECT_EQ(compare_with_oracle(p.c, oracle_lattice(p.c, p.d), r, 0.0f, kOracleTol), "");
  }
}

TEST(Numerics, SoftcapOnHugeInputs) {
  struct S {
    float cap, scale;
  };
  for (S s : {S{30.0f, 1.0f}, S{30.0f, 1e30f}, S{1e-30f, 1.0f}, S{3e38f, 1.0f}, S{3e38f, 1e30f},
              S{bits_to_float(1u), 1.0f}}) {
    const SpecialProblem p = softcap_extremes(s.cap, s.scale);
    RUN_EXPECTED(p, r);
    for (size_t x = 0; x < r.unary.size(); ++x) {
      const float z = logit_row(p, (int)(x / p.c.K))[r.cand_ids[x]];
      const float u = r.unary[x];
      EXPECT_FALSE(std::isnan(u));
      EXPECT_LE(std::fabs(u), s.cap) << "z = " << z;
      if (z == INFINITY) {
        EXPECT_EQ(u, s.cap);  // c * tanh(inf / c) = c, never inf - inf or inf * 0
      }
    }
    for (float x : r.scores) EXPECT_TRUE(std::isfinite(x)) << x;
  }
  // -inf under a softcap is -c.
  const SpecialProblem p = all_neg_inf(DFSEL_TYPE_F32, 3e38f);
  Result r;
  run_expected(p, &r);
  for (float u : r.unary) EXPECT_EQ(u, -3e38f);
}

TEST(Numerics, EveryProblemIsShardInvariantAndNaNFree) {
  // The whole list, greedy and sampled: bitwise the same for 1 and 3 shards, and NaN only
  // where a NaN input explains it (q never).
  for (const auto& make : special_problems(Size::kNarrow)) {
    const SpecialProblem p = make();
    const bool nan_in = has_nan_input(p);
    for (float temp : {0.0f, 0.7f}) {
      RunOpts o;
      o.temperature = temp;
      o.seed = 42;
      Result r;
      run_cpu(p, o, &r);
      if (HasFatalFailure()) return;
      if (!nan_in) {
        for (float x : r.unary) EXPECT_FALSE(std::isnan(x)) << p.str();
        for (float x : r.scores) EXPECT_FALSE(std::isnan(x)) << p.str();
      }
      if (temp == 0.0f && p.gate != Gate::kOnes) {
        EXPECT_EQ(check_expected(p, expected_outcome(p), r), "") << p.str();
      }
    }
  }
}

TEST(Numerics, WideRowsGiveTheDerivedOutcome) {
  // Specials at the end of 50000-token rows behind a background (a sample of the list; the
  // GPU suite runs all of it).
  const std::vector<std::function<SpecialProblem()>> makers = {
      [] { return all_neg_inf(DFSEL_TYPE_F32, 0.0f, Size::kWide); },
      [] { return all_nan(DFSEL_TYPE_BF16, Size::kWide); },
      [] { return nan_below_neg_inf(DFSEL_TYPE_F16, Size::kWide); },
      [] { return signed_zeros(DFSEL_TYPE_F16, Size::kWide); },
      [] { return huge_logits(DFSEL_TYPE_F32, 2.0f, 0.0f, Size::kWide); },
      [] { return subnormal_logits(DFSEL_TYPE_BF16, 1.0f, Size::kWide); },
      [] { return q8_scales(0x7bff, 0x7bff, Gate::kOneHot, Size::kWide); },
      [] { return softcap_extremes(30.0f, 1e30f, Size::kWide); },
  };
  for (const auto& make : makers) {
    const SpecialProblem p = make();
    Result r;
    run_expected(p, &r);
    if (HasFatalFailure()) return;
  }
}

}  // namespace
}  // namespace dfsel::test
