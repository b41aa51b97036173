// dfsel.h's rules for the buffers a call touches, on CPU plans: every pointer the library uses
// as int32 or float is aligned for it, a caller-owned workspace shares memory with nothing else
// the plan touches, a group names each plan once, and a 2-D tensor's outer axes are exactly 1.
// Each was accepted before and read or wrote where it should not.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/abi_sweep.h"
#include "support/one_plan.h"

namespace dfsel::test {
namespace {

// One plan, every output in its own buffer with room to move its pointer off the alignment.
class Buffers : public OnePlan {
 protected:
  void SetUp() override {
    c.V = 300;
    c.E = 96;  // K + K*K = 72 fits: the packed rows are written too
    describe(5);
    anchors.assign(d.anchors.size() + 2, 0);
    std::memcpy(anchors.data(), d.anchors.data(), d.anchors.size() * 4);
    in.anchors = anchors.data();
    in.temperature = 0.7f;  // q is written
    const size_t nd = (size_t)c.blocks * (c.block - 1), n_tokens = (size_t)c.blocks * c.block;
    const size_t counts[] = {nd * c.K, nd * c.K, nd * c.K * c.K, nd * c.K, nd, (size_t)c.blocks, n_tokens * c.E};
    for (int i = 0; i < kOutputs; ++i) store[i].assign(counts[i] + 2, 0);  // 8 bytes of slack
    out.cand_ids = reinterpret_cast<int32_t*>(store[0].data());
    out.unary = reinterpret_cast<float*>(store[1].data());
    out.scores = reinterpret_cast<float*>(store[2].data());
    out.q = reinterpret_cast<float*>(store[3].data());
    out.path = reinterpret_cast<int32_t*>(store[4].data());
    out.n_emitted = reinterpret_cast<int32_t*>(store[5].data());
    out.packed = reinterpret_cast<float*>(store[6].data());
  }
  std::string create_refused() {
    char msg[256] = "";
    dfsel_plan* p = nullptr;
    EXPECT_EQ(dfsel_plan_create(&desc, &p, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    dfsel_plan_destroy(p);
    return msg;
  }
  size_t workspace_bytes() {
    size_t n = 0;
    EXPECT_EQ(dfsel_workspace_size(&desc, &n, nullptr, 0), DFSEL_SUCCESS);
    return n;
  }

  static constexpr int kOutputs = 7;
  std::vector<int32_t> anchors, store[kOutputs];
};

TEST_F(Buffers, AlignedBuffersRun) {
  create();
  ASSERT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
}

// They were read or written misaligned (UndefinedBehaviorSanitizer: misaligned store).
TEST_F(Buffers, MisalignedOutputsAndAnchorsAreRefused) {
  create();
  expect_misaligned_refused(
      {{"outputs.cand_ids", reinterpret_cast<void**>(&out.cand_ids)},
       {"outputs.unary", reinterpret_cast<void**>(&out.unary)},
       {"outputs.scores", reinterpret_cast<void**>(&out.scores)},
       {"outputs.q", reinterpret_cast<void**>(&out.q)},
       {"outputs.path", reinterpret_cast<void**>(&out.path)},
       {"outputs.n_emitted", reinterpret_cast<void**>(&out.n_emitted)},
       {"outputs.packed", reinterpret_cast<void**>(&out.packed)},
       {"inputs.anchors", const_cast<void**>(reinterpret_cast<const void**>(&in.anchors))}},
      [&] { return refused(); });
}

// It used to be accepted and the run overwrote the caller's codebook.
TEST_F(Buffers, AWorkspaceOverAWeightIsRefusedAtCreation) {
  for (const char* weight : {"e_prev", "e_next", "w_h"}) {
    SetUp();
    std::vector<uint8_t>& w = weight[0] == 'w' ? d.w_h : std::string(weight) == "e_prev" ? d.e_prev : d.e_next;
    desc.workspace_bytes = workspace_bytes();
    desc.workspace = w.data();
    const std::string why = create_refused();
    EXPECT_NE(why.find("workspace"), std::string::npos) << why;
    EXPECT_NE(why.find(weight), std::string::npos) << why;
  }
}

// A run writes its workspace: one that holds an input or an output is refused before anything
// is written, in one plan and across the plans of a group.
TEST_F(Buffers, AWorkspaceOverAnInputOrAnOutputIsRefused) {
  const size_t need = workspace_bytes();
  std::vector<int32_t> ws(need / 4 + 64);
  desc.workspace = ws.data();
  desc.workspace_bytes = ws.size() * 4;
  create();
  int32_t* tail = ws.data() + need / 4 + 8;  // inside the claimed bytes, past what the carve uses
  tail[0] = anchors[0];
  tail[1] = anchors[1];
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

TEST_F(Buffers, AGroupNamesEachPlanOnce) {
  create();
  dfsel_plan* twice[2] = {plan, plan};
  dfsel_inputs ins[2] = {in, in};
  dfsel_outputs outs[2] = {out, out};
  EXPECT_EQ(dfsel_run_group(2, twice, ins, outs, nullptr), DFSEL_INVALID_ARGUMENT);
  const std::string why = dfsel_plan_last_error(plan);
  EXPECT_NE(why.find("plans[0] and plans[1] are the same plan"), std::string::npos) << why;
}

// ggml's empty tensors have a zero among ne[]: a view with ne[2] or ne[3] = 0 holds nothing.
TEST_F(Buffers, OuterAxesOfZeroAreRefused) {
  desc.e_prev.ne[3] = 0;
  EXPECT_NE(create_refused().find("e_prev.ne[2..3] = {1, 0}"), std::string::npos);
  desc.e_prev.ne[3] = 1;
  create();
  in.hidden.ne[2] = 0;
  EXPECT_NE(refused().find("inputs.hidden.ne[2..3] = {0, 1}"), std::string::npos);
}

// A workspace larger than the machine's memory is refused before it is allocated, with the
// sizes named: where the system overcommits memory, allocating and zeroing it would get the
// process killed (seen with shard.n_ranks = 2^31 - 1 on a 128 GiB machine).
TEST_F(Buffers, AWorkspaceLargerThanTheMachineIsRefusedBeforeItIsAllocated) {
  desc.shard.n_ranks = INT32_MAX;
  char msg[256] = "";
  dfsel_plan* p = nullptr;
  EXPECT_EQ(dfsel_plan_create(&desc, &p, msg, sizeof msg), DFSEL_OUT_OF_MEMORY);
  EXPECT_EQ(p, nullptr);
  EXPECT_NE(std::string(msg).find("more than this machine's"), std::string::npos) << msg;
  EXPECT_NE(std::string(msg).find("shard.n_ranks = 2147483647"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dfsel::test
