// DSpark (and DFlash2) at the edges: no silent wrong answer, no wild read, no crash.
//  - sampling at extreme temperatures or logits gives the limit (greedy as T -> 0);
//  - a table changed after plan creation (d2t) is caught at the entry a run uses;
//  - ranks of one group given different per-run inputs fail, every rank alike.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/dspark_problem.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

DSparkCase small_case() {
  DSparkCase c;
  c.V = c.V_target = 240;
  c.R = 16;
  c.N = 4;
  c.blocks = 3;
  return c;
}

// The logits of every row scaled by f (F32 logits, no padding).
void scale_logits(DSparkData* d, float f) {
  float* z = reinterpret_cast<float*>(d->logits.data());
  for (size_t i = 0; i < d->logits.size() / sizeof(float); ++i) z[i] *= f;
}

// A sampled chain that must be the greedy one (every row's maximum is unique here): the same
// tokens, q = 1 at every step, on the reference and on 1 and 2 ranks, bitwise.
void expect_greedy_limit(const DSparkCase& c, const DSparkData& d, float temperature) {
  SCOPED_TRACE("temperature " + std::to_string(temperature));
  DSparkRunOpts greedy;
  const DSparkResult g = reference_dspark(c, d, greedy);
  ASSERT_EQ(g.status, DFSEL_SUCCESS) << g.error;
  DSparkRunOpts r;
  r.temperature = temperature;
  r.seed = 12345;
  const DSparkResult ref = reference_dspark(c, d, r);
  ASSERT_EQ(ref.status, DFSEL_SUCCESS) << ref.error;
  EXPECT_EQ(ref.tokens, g.tokens);
  EXPECT_EQ(ref.n_emitted, g.n_emitted);
  for (size_t i = 0; i < ref.probs.size(); ++i) {
    EXPECT_EQ(ref.probs[i], 1.0f) << "step " << i << ": q of the greedy token";
    EXPECT_FALSE(std::isnan(ref.log_norm[i])) << "step " << i;
    EXPECT_GT(ref.log_norm[i], 0.0f) << "step " << i;  // m / T + log Z with m / T >= 1e30
  }
  for (int S : {1, 2}) {
    DSparkRunOpts rs = r;
    if (S == 2) rs.bounds = {0, 97, c.V};
    const DSparkResult got = run_dspark(c, d, rs);
    ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
    EXPECT_EQ(dspark_bitwise_diff(got, ref), "") << S << " ranks";
  }
}

TEST(DSparkEdges, TinyTemperaturesSampleTheGreedyLimit) {
  const DSparkCase c = small_case();
  DSparkData d = make_dspark_data(c, 21);
  // l ~ 1: l / T overflowed float for every T below about 1e-38, subnormal T included.
  for (float t : {1e-30f, 1e-38f, 1e-40f, 1.4e-45f}) expect_greedy_limit(c, d, t);
}

TEST(DSparkEdges, HugeLogitsSampleTheGreedyLimit) {
  const DSparkCase c = small_case();
  DSparkData d = make_dspark_data(c, 22);
  scale_logits(&d, 1e37f);  // |l| up to a few 1e37: l / T overflowed at T = 0.01
  for (float t : {0.01f, 0.5f}) expect_greedy_limit(c, d, t);
}

TEST(DSparkEdges, HugeTemperaturesStayFiniteAndAgree) {
  const DSparkCase c = small_case();
  DSparkData d = make_dspark_data(c, 23);
  scale_logits(&d, 1e37f);
  DSparkRunOpts r;
  r.temperature = 3e38f;
  r.seed = 7;
  const DSparkResult ref = reference_dspark(c, d, r);
  ASSERT_EQ(ref.status, DFSEL_SUCCESS) << ref.error;
  for (size_t i = 0; i < ref.probs.size(); ++i) {
    EXPECT_GT(ref.probs[i], 0.0f) << i;
    EXPECT_TRUE(std::isfinite(ref.log_norm[i])) << i;
  }
  r.bounds = {0, 100, c.V};
  const DSparkResult got = run_dspark(c, d, r);
  ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
  EXPECT_EQ(dspark_bitwise_diff(got, ref), "");
}

// The DFlash2 walk at a subnormal temperature is the greedy walk.
TEST(DSparkEdges, DFlash2WalkAtSubnormalTemperatureIsGreedy) {
  Case c;
  const Data d = make_data(c, 31);
  RunOpts greedy;
  const Result g = run_case(c, d, greedy);
  ASSERT_EQ(g.status, DFSEL_SUCCESS) << g.error;
  for (float t : {1e-38f, 1.4e-45f}) {
    RunOpts r;
    r.temperature = t;
    r.seed = 99;
    r.bounds = {0, 400, c.V};
    const Result s = run_case(c, d, r);
    ASSERT_EQ(s.status, DFSEL_SUCCESS) << s.error;
    EXPECT_EQ(s.path, g.path) << "temperature " << t;
    EXPECT_EQ(s.n_emitted, g.n_emitted) << "temperature " << t;
  }
}

// A d2t entry changed after plan creation, to an id outside W1, is caught where a run uses it.
struct D2tRun {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  std::vector<dfsel_dspark_plan*> plans;
  std::vector<dfsel_dspark_inputs> in;
  std::vector<std::vector<int32_t>> tokens, n_emitted, draft_ids;
  std::vector<dfsel_dspark_outputs> out;
  explicit D2tRun(int S) {
    c = small_case();
    c.V_target = 400;
    c.d2t = true;
    d = make_dspark_data(c, 41);
    if (S == 2) r.bounds = {0, 120, c.V};
    plans.assign(S, nullptr);
    in.resize(S);
    out.resize(S);
    tokens.assign(S, std::vector<int32_t>((size_t)c.blocks * c.N));
    draft_ids = tokens;
    n_emitted.assign(S, std::vector<int32_t>(c.blocks));
    for (int s = 0; s < S; ++s) {
      const dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, s);
      char msg[512] = "";
      EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plans[s], msg, sizeof msg), DFSEL_SUCCESS) << msg;
      in[s] = dspark_inputs(c, d, r, s);
      out[s] = dfsel_dspark_outputs{c.blocks, tokens[s].data(), n_emitted[s].data(), draft_ids[s].data(),
                                    nullptr,  nullptr,          nullptr,            nullptr};
    }
  }
  ~D2tRun() {
    for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
  }
  dfsel_status run() { return dfsel_dspark_run_group((int)plans.size(), plans.data(), in.data(), out.data(), nullptr); }
};

TEST(DSparkEdges, D2tChangedAfterCreationIsCaughtWhereItIsUsed) {
  for (int S : {1, 2}) {
    SCOPED_TRACE(std::to_string(S) + " ranks");
    for (int32_t bad : {-1, 400, 1 << 30}) {
      D2tRun run(S);
      ASSERT_EQ(run.run(), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(run.plans[0]);
      const int32_t id = run.draft_ids[0][1];  // block 0, step 2
      ASSERT_GE(id, 0);
      run.d.d2t[(size_t)id] = bad;  // the plans read d2t in place
      EXPECT_EQ(run.run(), DFSEL_INVALID_ARGUMENT);
      for (int s = 0; s < S; ++s) {
        const std::string m = dfsel_dspark_plan_last_error(run.plans[s]);
        EXPECT_NE(m.find("d2t maps draft id " + std::to_string(id)), std::string::npos) << m;
        EXPECT_NE(m.find("to " + std::to_string(bad) + ", outside [0, config.n_target_vocab = 400)"), std::string::npos) << m;
        EXPECT_NE(m.find("must not change"), std::string::npos) << m;
      }
      // The reference checks the same entry.
      const DSparkResult ref = reference_dspark(run.c, run.d, DSparkRunOpts{});
      EXPECT_EQ(ref.status, DFSEL_INVALID_ARGUMENT);
      EXPECT_NE(ref.error.find("d2t maps draft id " + std::to_string(id)), std::string::npos) << ref.error;
      // Put back, the plans run again.
      run.d.d2t[(size_t)id] = 5;
      EXPECT_EQ(run.run(), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(run.plans[0]);
    }
  }
}


// Ranks of one chain given different per-run inputs (or conf_w): every rank fails, naming what
// differs. Rank 1's plan and inputs read its own copy of everything.
void expect_group_disagrees(const std::function<void(DSparkData&)>& edit, const std::vector<std::string>& needles,
                            dfsel_placement placement = DFSEL_CODEBOOKS_REPLICATED, float temperature = 0.0f) {
  DSparkCase c = small_case();
  c.E = 24;
  const DSparkData d = make_dspark_data(c, 51);
  DSparkData other = d;  // rank 1 reads its copy
  edit(other);
  DSparkRunOpts r;
  r.bounds = {0, 110, c.V};
  r.placement = placement;
  r.temperature = temperature;
  std::vector<dfsel_dspark_plan*> plans(2, nullptr);
  std::vector<dfsel_dspark_inputs> in(2);
  std::vector<std::vector<int32_t>> tok(2, std::vector<int32_t>((size_t)c.blocks * c.N)), ne(2, std::vector<int32_t>(c.blocks));
  std::vector<dfsel_dspark_outputs> out(2);
  for (int s = 0; s < 2; ++s) {
    const DSparkData& mine = s ? other : d;
    const dfsel_dspark_plan_desc desc = dspark_desc(c, mine, r, s);
    ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plans[s], nullptr, 0), DFSEL_SUCCESS);
    in[s] = dspark_inputs(c, mine, r, s);
    out[s] = dfsel_dspark_outputs{c.blocks, tok[s].data(), ne[s].data(), nullptr, nullptr, nullptr, nullptr, nullptr};
  }
  EXPECT_EQ(dfsel_dspark_run_group(2, plans.data(), in.data(), out.data(), nullptr), DFSEL_INVALID_ARGUMENT);
  const std::string m = dfsel_dspark_plan_last_error(plans[0]);
  for (const auto& x : needles) EXPECT_NE(m.find(x), std::string::npos) << "message: " << m << " lacks " << x;
  for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
}

TEST(DSparkEdges, RanksGivenDifferentAnchorsFailTogether) {
  auto anchor = [](DSparkData& o) { o.anchors[1] = (o.anchors[1] + 1) % 240; };
  const std::vector<std::string> want = {"different inputs", "inputs.anchors[1] is", "on rank 1"};
  expect_group_disagrees(anchor, want);
  expect_group_disagrees(anchor, want, DFSEL_CODEBOOKS_SHARDED);
  expect_group_disagrees(anchor, want, DFSEL_CODEBOOKS_REPLICATED, 0.7f);
}

TEST(DSparkEdges, RanksGivenDifferentHiddenRowsFailTogether) {
  // One byte of block 2's last hidden row differs on rank 1.
  expect_group_disagrees(
      [](DSparkData& o) {
        const size_t at = o.hidden.size() - 3 * o.hidden_nb1 / 4;
        o.hidden[at] ^= 0x10;
      },
      {"different inputs for block 2", "rank 1's inputs.hidden"});
}

TEST(DSparkEdges, RanksHoldingAnotherConfWFailTogether) {
  // conf_w is every rank's whole, digested at plan creation: it differs for every block.
  expect_group_disagrees([](DSparkData& o) { o.conf_w[o.conf_w.size() / 2] ^= 0x01; },
                         {"different inputs for block 0", "conf_w"});
}

}  // namespace
}  // namespace dfsel::test
