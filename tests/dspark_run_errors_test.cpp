// Every bad run of a DSpark plan is a status and a message naming the argument and its value,
// and nothing is written: inputs, outputs (capacity, alignment, overlap), groups of plans,
// and a plan another call holds.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "host/plan/dspark_plan.h"
#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

struct ChainRun {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  dfsel_dspark_plan* plan = nullptr;
  dfsel_dspark_inputs in{};
  dfsel_dspark_outputs out{};
  std::vector<int32_t> tokens, n_emitted, draft_ids;
  std::vector<float> logits, confidence;
  explicit ChainRun(int S = 1) {
    c.V = c.V_target = 200;
    c.E = 24;
    c.R = 32;
    d = make_dspark_data(c, 11);
    if (S > 1) r.bounds = {0, 70, 200};
    char msg[512] = "";
    const dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, 0);
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
    in = dspark_inputs(c, d, r, 0);
    const size_t cells = (size_t)c.blocks * c.N;
    tokens.assign(cells, 77);
    n_emitted.assign(c.blocks, 77);
    draft_ids.assign(cells, 77);
    logits.assign(cells, 7.0f);
    confidence.assign(cells, 7.0f);
    out = dfsel_dspark_outputs{c.blocks, tokens.data(), n_emitted.data(), draft_ids.data(), logits.data(),
                               nullptr,  nullptr,       confidence.data()};
  }
  ~ChainRun() { dfsel_dspark_plan_destroy(plan); }
  bool untouched() const {
    for (int32_t t : tokens)
      if (t != 77) return false;
    for (int32_t t : n_emitted)
      if (t != 77) return false;
    return true;
  }
};

void expect_run_fails(const std::function<void(ChainRun&)>& edit, dfsel_status want, const std::vector<std::string>& needles) {
  ChainRun run;
  edit(run);
  EXPECT_EQ(dfsel_dspark_plan_run(run.plan, &run.in, &run.out, nullptr), want);
  const std::string m = dfsel_dspark_plan_last_error(run.plan);
  for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "message: " << m << " lacks " << n;
  EXPECT_TRUE(run.untouched()) << "a refused run wrote outputs: " << m;
}

TEST(DSparkRunErrors, BadInputsAndOutputsAreRefusedBeforeAnythingIsWritten) {
  ChainRun ok;
  ASSERT_EQ(dfsel_dspark_plan_run(ok.plan, &ok.in, &ok.out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(ok.plan);
  EXPECT_STREQ(dfsel_dspark_plan_last_error(ok.plan), "");
  expect_run_fails([](ChainRun& r) { r.in.n_blocks = 3; }, DFSEL_INVALID_ARGUMENT, {"inputs.n_blocks = 3", "max_blocks = 2"});
  expect_run_fails([](ChainRun& r) { r.in.logits.ne[0] = 199; }, DFSEL_INVALID_ARGUMENT, {"inputs.logits.ne[0] = 199"});
  expect_run_fails([](ChainRun& r) { r.in.logits.ne[1] = 3; }, DFSEL_INVALID_ARGUMENT, {"inputs.logits.ne[1] = 3"});
  expect_run_fails([](ChainRun& r) { r.in.logits.type = DFSEL_TYPE_Q8_0; }, DFSEL_UNSUPPORTED, {"inputs.logits.type = 8"});
  expect_run_fails([](ChainRun& r) { r.in.hidden.data = nullptr; }, DFSEL_INVALID_ARGUMENT, {"inputs.hidden.data is NULL"});
  expect_run_fails([](ChainRun& r) { r.in.anchors = nullptr; }, DFSEL_INVALID_ARGUMENT, {"inputs.anchors is NULL"});
  expect_run_fails([](ChainRun& r) { r.in.anchors = reinterpret_cast<const int32_t*>(reinterpret_cast<const char*>(r.d.anchors.data()) + 1); },
                   DFSEL_INVALID_ARGUMENT, {"inputs.anchors = ", "aligned to 4"});
  expect_run_fails([](ChainRun& r) { r.d.anchors[1] = 200; }, DFSEL_INVALID_ARGUMENT, {"inputs.anchors[1] = 200", "[0, config.n_target_vocab = 200)"});
  expect_run_fails([](ChainRun& r) { r.d.anchors[0] = -1; }, DFSEL_INVALID_ARGUMENT, {"inputs.anchors[0] = -1"});
  expect_run_fails([](ChainRun& r) { r.in.temperature = NAN; }, DFSEL_INVALID_ARGUMENT, {"inputs.temperature = nan"});
  expect_run_fails([](ChainRun& r) { r.in.p_min = 1.5f; }, DFSEL_INVALID_ARGUMENT, {"inputs.p_min = 1.5"});
  expect_run_fails([](ChainRun& r) { r.out.n_blocks = 1; }, DFSEL_INVALID_ARGUMENT, {"outputs.n_blocks = 1", "inputs.n_blocks = 2"});
  expect_run_fails([](ChainRun& r) { r.out.tokens = nullptr; }, DFSEL_INVALID_ARGUMENT, {"outputs.tokens is NULL"});
  expect_run_fails([](ChainRun& r) { r.out.n_emitted = nullptr; }, DFSEL_INVALID_ARGUMENT, {"outputs.n_emitted is NULL"});
  expect_run_fails([](ChainRun& r) { r.out.logits = reinterpret_cast<float*>(reinterpret_cast<char*>(r.logits.data()) + 2); },
                   DFSEL_INVALID_ARGUMENT, {"outputs.logits = ", "aligned to 4"});
  expect_run_fails([](ChainRun& r) { r.out.draft_ids = r.tokens.data() + 1; }, DFSEL_INVALID_ARGUMENT,
                   {"outputs.tokens", "outputs.draft_ids", "overlap"});
  expect_run_fails([](ChainRun& r) { r.out.logits = const_cast<float*>(reinterpret_cast<const float*>(r.d.logits.data())); },
                   DFSEL_INVALID_ARGUMENT, {"outputs.logits", "inputs.logits"});
  expect_run_fails([](ChainRun& r) { r.out.confidence = reinterpret_cast<float*>(r.d.w2.data()); }, DFSEL_INVALID_ARGUMENT,
                   {"outputs.confidence", "w2"});
  expect_run_fails([](ChainRun& r) { r.out.tokens = reinterpret_cast<int32_t*>(const_cast<int32_t*>(r.d.anchors.data())); },
                   DFSEL_INVALID_ARGUMENT, {"outputs.tokens", "inputs.anchors"});
  EXPECT_EQ(dfsel_dspark_plan_run(ok.plan, nullptr, &ok.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(dfsel_dspark_plan_last_error(ok.plan), "inputs is NULL");
  EXPECT_EQ(dfsel_dspark_plan_run(ok.plan, &ok.in, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(dfsel_dspark_plan_last_error(ok.plan), "outputs is NULL");
  EXPECT_EQ(dfsel_dspark_plan_run(nullptr, &ok.in, &ok.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(dfsel_dspark_plan_last_error(nullptr), "plan is NULL");
}

TEST(DSparkRunErrors, ConfidenceAndPMinNeedAConfidenceHead) {
  ChainRun r;
  r.c.E = 0;
  r.d = make_dspark_data(r.c, 3);
  dfsel_dspark_plan* plan = nullptr;
  const dfsel_dspark_plan_desc desc = dspark_desc(r.c, r.d, r.r, 0);
  ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plan, nullptr, 0), DFSEL_SUCCESS);
  dfsel_dspark_inputs in = dspark_inputs(r.c, r.d, r.r, 0);
  in.p_min = 0.5f;
  EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &r.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_dspark_plan_last_error(plan)).find("inputs.p_min = 0.5 needs a confidence head"), std::string::npos);
  in.p_min = 0.0f;
  EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &r.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_dspark_plan_last_error(plan)).find("outputs.confidence is set"), std::string::npos);
  dfsel_dspark_plan_destroy(plan);
}

TEST(DSparkRunErrors, GroupsMustBeOneWholeChain) {
  DSparkCase c;
  c.V = c.V_target = 200;
  const DSparkData d = make_dspark_data(c, 5);
  DSparkRunOpts r;
  r.bounds = {0, 70, 200};
  auto group = [&](const std::function<void(int, dfsel_dspark_plan_desc&, dfsel_dspark_inputs&)>& edit, int n,
                   const std::vector<std::string>& needles) {
    std::vector<dfsel_dspark_plan*> plans(2, nullptr);
    std::vector<dfsel_dspark_inputs> in(2);
    std::vector<std::vector<int32_t>> tok(2, std::vector<int32_t>(c.blocks * c.N)), ne(2, std::vector<int32_t>(c.blocks));
    std::vector<dfsel_dspark_outputs> out(2);
    for (int s = 0; s < 2; ++s) {
      dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, s);
      in[s] = dspark_inputs(c, d, r, s);
      edit(s, desc, in[s]);
      ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plans[s], nullptr, 0), DFSEL_SUCCESS);
      out[s] = dfsel_dspark_outputs{c.blocks, tok[s].data(), ne[s].data(), nullptr, nullptr, nullptr, nullptr, nullptr};
    }
    EXPECT_EQ(dfsel_dspark_run_group(n, plans.data(), in.data(), out.data(), nullptr), DFSEL_INVALID_ARGUMENT);
    const std::string m = dfsel_dspark_plan_last_error(plans[0]);
    for (const auto& x : needles) EXPECT_NE(m.find(x), std::string::npos) << "message: " << m << " lacks " << x;
    for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
  };
  group([](int, auto&, auto&) {}, 1, {"1 plans given", "shard.n_ranks = 2"});
  group([](int s, auto&, auto& in) { in.seed = (uint64_t)s; }, 2, {"inputs[1]", "seed 1", "draw the same way"});
  group([](int s, auto&, auto& in) { in.n_blocks = s ? 1 : 2; }, 2, {"inputs[1].n_blocks = 1"});
  group([](int s, auto& d, auto&) { d.config.max_blocks = s ? 3 : 2; }, 2, {"plans[1] describes another selector",
                                                                          "config.max_blocks = 3, against 2"});
  group([](int s, auto& d, auto&) { if (s) d.config.logit_scale = 1.0f; }, 2, {"config.logit_scale = 1, against 0"});
  group(
      [](int s, auto& d, auto& in) {
        if (!s) return;
        d.shard.v_begin = 80;
        d.w2.ne[1] = 120;
        in.logits.ne[0] = 120;
      },
      2, {"a gap", "[80, 200)"});
  EXPECT_EQ(dfsel_dspark_run_group(0, nullptr, nullptr, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
}

// Creation widens Q4_0 .. Q6_K weights to BF16, but the ranks of a chain are compared on the
// types the caller gave, as the NCCL set-up compares them: Q4_0 W1 and W2 beside BF16 ones is
// another chain, refused as F16 beside BF16 is (once such a group ran).
TEST(DSparkRunErrors, BlockTypesAreComparedAsGivenNotAsWidened) {
  DSparkRunOpts r;
  r.bounds = {0, 70, 200};
  auto run = [&](dfsel_type rank0, dfsel_type rank1, std::string* why) {
    DSparkCase c[2];
    DSparkData d[2];
    std::vector<dfsel_dspark_plan*> plans(2, nullptr);
    std::vector<dfsel_dspark_inputs> in(2);
    std::vector<dfsel_dspark_outputs> out(2);
    std::vector<std::vector<int32_t>> tok(2), ne(2);
    for (int s = 0; s < 2; ++s) {
      c[s].V = c[s].V_target = 200;
      c[s].R = 32;  // whole blocks of Q4_0
      c[s].w1_t = c[s].w2_t = s ? rank1 : rank0;
      d[s] = make_dspark_data(c[s], 5);
      const dfsel_dspark_plan_desc desc = dspark_desc(c[s], d[s], r, s);
      char msg[512] = "";
      EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plans[s], msg, sizeof msg), DFSEL_SUCCESS) << msg;
      in[s] = dspark_inputs(c[0], d[0], r, s);  // every rank the same inputs
      tok[s].assign((size_t)c[s].blocks * c[s].N, 0);
      ne[s].assign(c[s].blocks, 0);
      out[s] = dfsel_dspark_outputs{c[s].blocks, tok[s].data(), ne[s].data(), nullptr, nullptr, nullptr, nullptr, nullptr};
    }
    const dfsel_status st =
        plans[0] && plans[1] ? dfsel_dspark_run_group(2, plans.data(), in.data(), out.data(), nullptr) : DFSEL_INTERNAL_ERROR;
    if (plans[0]) *why = dfsel_dspark_plan_last_error(plans[0]);
    for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
    return st;
  };
  const struct {
    dfsel_type rank0, rank1;
    const char* names;
  } cases[] = {
      {DFSEL_TYPE_Q4_0, DFSEL_TYPE_BF16, "w1.type = BF16, against Q4_0"},
      {DFSEL_TYPE_BF16, DFSEL_TYPE_Q5_1, "w1.type = Q5_1, against BF16"},
      {DFSEL_TYPE_F16, DFSEL_TYPE_BF16, "w1.type = BF16, against F16"},
  };
  for (const auto& m : cases) {
    std::string why;
    EXPECT_EQ(run(m.rank0, m.rank1, &why), DFSEL_INVALID_ARGUMENT) << m.names;
    EXPECT_NE(why.find(std::string("plans[1] describes another selector than plans[0]: ") + m.names), std::string::npos)
        << why;
  }
  std::string why;
  EXPECT_EQ(run(DFSEL_TYPE_Q4_0, DFSEL_TYPE_Q4_0, &why), DFSEL_SUCCESS) << why;
}

TEST(DSparkRunErrors, APlanListedTwiceOrHeldElsewhereIsRefused) {
  ChainRun run;
  dfsel_dspark_plan* twice[2] = {run.plan, run.plan};
  dfsel_dspark_inputs in[2] = {run.in, run.in};
  dfsel_dspark_outputs out[2] = {run.out, run.out};
  EXPECT_EQ(dfsel_dspark_run_group(2, twice, in, out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_dspark_plan_last_error(run.plan)).find("plans[0] and plans[1] are the same plan"),
            std::string::npos)
      << dfsel_dspark_plan_last_error(run.plan);
  EXPECT_TRUE(run.untouched());
  // A plan held by a call of another thread, its claim taken as that call would: every call is
  // refused with DFSEL_BUSY at once, and the holder's message is left alone.
  const std::string before = dfsel_dspark_plan_last_error(run.plan);
  ASSERT_TRUE(run.plan->in_use.try_claim());
  EXPECT_EQ(dfsel_dspark_plan_run(run.plan, &run.in, &run.out, nullptr), DFSEL_BUSY);
  EXPECT_EQ(dfsel_dspark_run_group(1, &run.plan, &run.in, &run.out, nullptr), DFSEL_BUSY);
  EXPECT_EQ(dfsel_dspark_plan_wait(run.plan, nullptr, -1), DFSEL_BUSY);
  EXPECT_EQ(dfsel_dspark_plan_destroy(run.plan), DFSEL_BUSY) << "a plan in use was freed";
  EXPECT_EQ(dfsel_dspark_plan_last_error(run.plan), before);
  EXPECT_TRUE(run.untouched());
  run.plan->in_use.release();
  EXPECT_EQ(dfsel_dspark_plan_run(run.plan, &run.in, &run.out, nullptr), DFSEL_SUCCESS);
  EXPECT_STREQ(dfsel_dspark_plan_last_error(run.plan), "");
  EXPECT_FALSE(run.untouched());
  EXPECT_EQ(dfsel_dspark_plan_wait(run.plan, nullptr, 0), DFSEL_SUCCESS);
}

}  // namespace
}  // namespace dfsel::test
