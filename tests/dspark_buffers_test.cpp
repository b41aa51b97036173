// dspark.h's buffer rules, the same as dfsel.h's (tests/api_buffers_test.cpp) and checked by the
// same code (host/plan/run_buffers.h): every pointer a run uses as int32 or float is aligned
// for it, a weight is aligned for its element, a caller-owned workspace shares memory with
// nothing else the plan touches, the plans of a group write nothing another reads, and a 2-D
// tensor's outer axes are exactly 1. Each refusal names the buffers, and nothing is written.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/abi_sweep.h"
#include "support/one_plan.h"

namespace dfsel::test {
namespace {

constexpr int kOutputs = 7;

// One DSpark plan with a confidence head, every output in its own buffer with room to move its
// pointer off the alignment; sampling, so that probs and log_norm are written too.
class DSparkBuffers : public testing::Test, public DSparkPlan {
 protected:
  void SetUp() override {
    c.V = c.V_target = 200;
    c.E = 24;
    c.R = 32;
    describe(12);
    anchors.assign(d.anchors.size() + 2, 0);
    std::memcpy(anchors.data(), d.anchors.data(), d.anchors.size() * 4);
    in.anchors = anchors.data();
    in.temperature = 0.7f;
    place_outputs(77, 2);
  }
  void create() { ASSERT_EQ(create_plan(), DFSEL_SUCCESS) << create_message; }
  std::string create_refused() {
    char msg[256] = "";
    dfsel_dspark_plan* p = nullptr;
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &p, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    dfsel_dspark_plan_destroy(p);
    return msg;
  }
  // The run's refusal; nothing may have been written.
  std::string refused() {
    EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    for (int i = 0; i < kOutputs; ++i)
      for (int32_t v : store[i]) EXPECT_EQ(v, 77) << "a refused run wrote output " << i;
    return dfsel_dspark_plan_last_error(plan);
  }
  size_t workspace_bytes() {
    size_t n = 0;
    EXPECT_EQ(dfsel_dspark_workspace_size(&desc, &n, nullptr, 0), DFSEL_SUCCESS);
    return n;
  }

  std::vector<int32_t> anchors;
};

TEST_F(DSparkBuffers, AlignedBuffersRun) {
  create();
  ASSERT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plan);
}

TEST_F(DSparkBuffers, MisalignedOutputsAndAnchorsAreRefused) {
  create();
  expect_misaligned_refused(
      {{"outputs.tokens", reinterpret_cast<void**>(&out.tokens)},
       {"outputs.n_emitted", reinterpret_cast<void**>(&out.n_emitted)},
       {"outputs.draft_ids", reinterpret_cast<void**>(&out.draft_ids)},
       {"outputs.logits", reinterpret_cast<void**>(&out.logits)},
       {"outputs.probs", reinterpret_cast<void**>(&out.probs)},
       {"outputs.log_norm", reinterpret_cast<void**>(&out.log_norm)},
       {"outputs.confidence", reinterpret_cast<void**>(&out.confidence)},
       {"inputs.anchors", const_cast<void**>(reinterpret_cast<const void**>(&in.anchors))}},
      [&] { return refused(); });
}

TEST_F(DSparkBuffers, MisalignedWeightsAreRefusedAtCreation) {
  std::vector<uint8_t> moved(d.w2.size() + 8);
  std::memcpy(moved.data() + 2, d.w2.data(), d.w2.size());
  desc.w2.data = moved.data() + 2;
  const std::string why = create_refused();
  EXPECT_NE(why.find("w2 = "), std::string::npos) << why;
  EXPECT_NE(why.find("aligned to 4 bytes"), std::string::npos) << why;
}

// A workspace the run would write over a weight or d2t: refused when the plan is created. Each
// weight is moved into a buffer larger than the workspace, so that only it lies under it.
TEST_F(DSparkBuffers, AWorkspaceOverAWeightIsRefusedAtCreation) {
  std::vector<int32_t> ids(c.V, 0);
  for (const char* weight : {"w1", "w2", "conf_w", "d2t"}) {
    SetUp();
    desc.d2t = ids.data();
    const size_t need = workspace_bytes();
    const std::string w = weight;
    const void** data = w == "w1" ? &desc.w1.data : w == "w2" ? &desc.w2.data : w == "conf_w" ? &desc.conf_w.data
                                                                                            : reinterpret_cast<const void**>(&desc.d2t);
    const size_t bytes = w == "w1" ? d.w1.size() : w == "w2" ? d.w2.size() : w == "conf_w" ? d.conf_w.size() : ids.size() * 4;
    std::vector<int32_t> under((need + bytes) / 4 + 16);
    std::memcpy(under.data(), *data, bytes);
    *data = under.data();
    desc.workspace = under.data();
    desc.workspace_bytes = need;
    const std::string why = create_refused();
    EXPECT_NE(why.find("workspace"), std::string::npos) << why;
    EXPECT_NE(why.find(weight), std::string::npos) << why;
  }
}

TEST_F(DSparkBuffers, AWorkspaceOverAnInputOrAnOutputIsRefused) {
  const size_t need = workspace_bytes();
  std::vector<int32_t> ws(need / 4 + 64);
  desc.workspace = ws.data();
  desc.workspace_bytes = ws.size() * 4;
  create();
  int32_t* tail = ws.data() + need / 4 + 8;  // inside the claimed bytes, past what the carve uses
  std::memcpy(tail, anchors.data(), (size_t)c.blocks * 4);
  in.anchors = tail;
  std::string why = refused();
  EXPECT_NE(why.find("workspace"), std::string::npos) << why;
  EXPECT_NE(why.find("inputs.anchors"), std::string::npos) << why;
  in.anchors = anchors.data();
  out.n_emitted = tail;
  why = refused();
  EXPECT_NE(why.find("workspace"), std::string::npos) << why;
  EXPECT_NE(why.find("outputs.n_emitted"), std::string::npos) << why;
}

TEST_F(DSparkBuffers, OuterAxesOfZeroAreRefused) {
  desc.w1.ne[3] = 0;
  EXPECT_NE(create_refused().find("w1.ne[2..3] = {1, 0}"), std::string::npos);
  desc.w1.ne[3] = 1;
  create();
  in.logits.ne[2] = 0;
  EXPECT_NE(refused().find("inputs.logits.ne[2..3] = {0, 1}"), std::string::npos);
}

// Two ranks of one chain: one rank's output over what the other reads or writes is refused,
// both plans named.
TEST_F(DSparkBuffers, TheRanksOfAGroupShareNothingTheyWrite) {
  DSparkRunOpts two;
  two.bounds = {0, 90, 200};
  dfsel_dspark_plan* plans[2] = {nullptr, nullptr};
  dfsel_dspark_inputs ins[2];
  std::vector<int32_t> tok[2], ne[2];
  dfsel_dspark_outputs outs[2];
  for (int s = 0; s < 2; ++s) {
    const dfsel_dspark_plan_desc ds = dspark_desc(c, d, two, s);
    ASSERT_EQ(dfsel_dspark_plan_create(&ds, &plans[s], nullptr, 0), DFSEL_SUCCESS);
    ins[s] = dspark_inputs(c, d, two, s);
    tok[s].assign((size_t)c.blocks * c.N, 77);
    ne[s].assign(c.blocks, 77);
    outs[s] = dfsel_dspark_outputs{c.blocks, tok[s].data(), ne[s].data(), nullptr, nullptr, nullptr, nullptr, nullptr};
  }
  ASSERT_EQ(dfsel_dspark_run_group(2, plans, ins, outs, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plans[0]);
  outs[1].tokens = tok[0].data();
  EXPECT_EQ(dfsel_dspark_run_group(2, plans, ins, outs, nullptr), DFSEL_INVALID_ARGUMENT);
  std::string why = dfsel_dspark_plan_last_error(plans[0]);
  EXPECT_NE(why.find("plans[0]'s outputs.tokens"), std::string::npos) << why;
  EXPECT_NE(why.find("plans[1]'s outputs.tokens"), std::string::npos) << why;
  outs[1].tokens = tok[1].data();
  outs[1].n_emitted = const_cast<int32_t*>(d.anchors.data());
  EXPECT_EQ(dfsel_dspark_run_group(2, plans, ins, outs, nullptr), DFSEL_INVALID_ARGUMENT);
  why = dfsel_dspark_plan_last_error(plans[0]);
  EXPECT_NE(why.find("outputs.n_emitted"), std::string::npos) << why;
  EXPECT_NE(why.find("inputs.anchors"), std::string::npos) << why;
  for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
}

}  // namespace
}  // namespace dfsel::test
