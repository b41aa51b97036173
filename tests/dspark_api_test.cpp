// Every bad input to a DSpark plan is a status and a message that names the argument and its
// value (dspark.h): descriptions, runs, outputs, groups, the CUDA backend, plans in use.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

struct Bad {
  const char* what;
  dfsel_status status;
  std::vector<std::string> needles;
};

// A valid one-rank case with every optional part: confidence head, scale, W1 of its own size.
struct Base {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  Base() {
    c.V = c.V_target = 200;
    c.E = 24;
    c.R = 32;
    c.scale_rows = 2;
    d = make_dspark_data(c, 7);
  }
};

void expect_message(const std::string& m, const std::vector<std::string>& needles) {
  for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "message: " << m << " lacks " << n;
}

void expect_create_fails(const dfsel_dspark_plan_desc& desc, const Bad& bad) {
  SCOPED_TRACE(bad.what);
  dfsel_dspark_plan* plan = reinterpret_cast<dfsel_dspark_plan*>(0x1);
  char msg[512] = "";
  EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), bad.status) << msg;
  EXPECT_EQ(plan, nullptr);
  expect_message(msg, bad.needles);
  size_t bytes = 0;
  char ws_msg[512] = "";
  EXPECT_EQ(dfsel_dspark_workspace_size(&desc, &bytes, ws_msg, sizeof ws_msg), bad.status) << ws_msg;
}

TEST(DSparkApi, BadDescriptionsAreRefusedWithTheirValue) {
  Base b;
  std::vector<uint8_t> ws(1 << 16);
  const std::vector<std::pair<Bad, std::function<void(dfsel_dspark_plan_desc&)>>> cases = {
      {{"n_vocab", DFSEL_INVALID_ARGUMENT, {"config.n_vocab = 0"}}, [](auto& d) { d.config.n_vocab = 0; }},
      {{"n_target_vocab", DFSEL_INVALID_ARGUMENT, {"config.n_target_vocab = -3"}}, [](auto& d) { d.config.n_target_vocab = -3; }},
      {{"target without d2t", DFSEL_INVALID_ARGUMENT, {"n_target_vocab = 300", "d2t is NULL"}},
       [](auto& d) { d.config.n_target_vocab = 300; }},
      {{"n_embd", DFSEL_INVALID_ARGUMENT, {"config.n_embd = -1"}}, [](auto& d) { d.config.n_embd = -1; }},
      {{"rank", DFSEL_INVALID_ARGUMENT, {"config.markov_rank = 2000"}}, [](auto& d) { d.config.markov_rank = 2000; }},
      {{"n_draft", DFSEL_INVALID_ARGUMENT, {"config.n_draft = 0"}}, [](auto& d) { d.config.n_draft = 0; }},
      {{"layout", DFSEL_INVALID_ARGUMENT, {"config.sample_from_anchor = 2"}}, [](auto& d) { d.config.sample_from_anchor = 2; }},
      {{"scale", DFSEL_INVALID_ARGUMENT, {"config.logit_scale = -1"}}, [](auto& d) { d.config.logit_scale = -1.0f; }},
      {{"softcap", DFSEL_INVALID_ARGUMENT, {"config.softcap = inf"}}, [](auto& d) { d.config.softcap = INFINITY; }},
      {{"max_blocks", DFSEL_INVALID_ARGUMENT, {"config.max_blocks = 0"}}, [](auto& d) { d.config.max_blocks = 0; }},
      {{"rows overflow", DFSEL_INVALID_ARGUMENT, {"config.max_blocks = 2000000000"}},
       [](auto& d) { d.config.max_blocks = 2000000000; }},
      {{"shard rank", DFSEL_INVALID_ARGUMENT, {"shard.rank = 3"}}, [](auto& d) { d.shard.rank = 3; }},
      {{"shard range", DFSEL_INVALID_ARGUMENT, {"[0, 201)"}}, [](auto& d) { d.shard.v_end = 201; }},
      {{"backend", DFSEL_INVALID_ARGUMENT, {"backend = 7"}}, [](auto& d) { d.backend = (dfsel_backend)7; }},
      {{"placement", DFSEL_INVALID_ARGUMENT, {"placement = 5"}}, [](auto& d) { d.placement = (dfsel_placement)5; }},
      {{"w1 missing", DFSEL_INVALID_ARGUMENT, {"w1.data is NULL"}}, [](auto& d) { d.w1.data = nullptr; }},
      {{"w1 rows", DFSEL_INVALID_ARGUMENT, {"w1.ne[1] = 199", "expected 200"}}, [](auto& d) { d.w1.ne[1] = 199; }},
      {{"w2 width", DFSEL_INVALID_ARGUMENT, {"w2.ne[0] = 31", "expected 32"}}, [](auto& d) { d.w2.ne[0] = 31; }},
      {{"w2 type", DFSEL_UNSUPPORTED, {"w2.type = 23 (iq4_xs)", "Q5_K or Q6_K"}}, [](auto& d) { d.w2.type = (dfsel_type)23; }},
      {{"w2 stride", DFSEL_INVALID_ARGUMENT, {"w2.nb[1] = 4"}}, [](auto& d) { d.w2.nb[1] = 4; }},
      {{"scale type", DFSEL_UNSUPPORTED, {"w2_scale.type = 1"}}, [](auto& d) { d.w2_scale.type = DFSEL_TYPE_F16; }},
      {{"scale rows", DFSEL_INVALID_ARGUMENT, {"w2_scale.ne[0] = 7"}}, [](auto& d) { d.w2_scale.ne[0] = 7; }},
      {{"conf width", DFSEL_INVALID_ARGUMENT, {"conf_w.ne[0] = 56", "expected 57"}}, [](auto& d) { d.config.n_embd = 25; }},
      {{"conf without width", DFSEL_INVALID_ARGUMENT, {"conf_w is given", "n_embd = 0"}}, [](auto& d) { d.config.n_embd = 0; }},
      {{"width without conf", DFSEL_INVALID_ARGUMENT, {"config.n_embd = 24", "conf_w is NULL"}},
       [](auto& d) { d.conf_w.data = nullptr; }},
      {{"conf bias", DFSEL_INVALID_ARGUMENT, {"conf_bias = nan"}}, [](auto& d) { d.conf_bias = NAN; }},
      {{"sharded with d2t", DFSEL_INVALID_ARGUMENT, {"placement = SHARDED", "d2t"}},
       [](auto& d) {
         static const int32_t ids[200] = {};
         d.placement = DFSEL_CODEBOOKS_SHARDED;
         d.d2t = ids;
       }},
      {{"d2t range", DFSEL_INVALID_ARGUMENT, {"d2t[3] = 250", "n_target_vocab = 200"}},
       [](auto& d) {
         static int32_t ids[200] = {};
         ids[3] = 250;
         d.d2t = ids;
       }},
      {{"threads", DFSEL_INVALID_ARGUMENT, {"n_threads = -2"}}, [](auto& d) { d.n_threads = -2; }},
      {{"workspace bytes", DFSEL_INVALID_ARGUMENT, {"workspace_bytes = 0"}},
       [&](auto& d) { d.workspace = ws.data(); }},
      {{"nccl on the CPU", DFSEL_UNSUPPORTED, {"nccl_comm is set"}}, [](auto& d) { d.nccl_comm = (void*)0x10; }},
  };
  for (const auto& [bad, edit] : cases) {
    dfsel_dspark_plan_desc desc = dspark_desc(b.c, b.d, b.r, 0);
    edit(desc);
    expect_create_fails(desc, bad);
  }
  dfsel_dspark_plan* plan = nullptr;
  char msg[256];
  // The CPU backend's own needs, as for DFlash2 plans: refused when the plan is created, while
  // dfsel_dspark_workspace_size answers the size (host/backend/cpu_setup.h).
  const std::vector<std::pair<Bad, std::function<void(dfsel_dspark_plan_desc&)>>> at_creation = {
      {{"workspace alignment", DFSEL_INVALID_ARGUMENT, {"workspace = ", "not aligned to 16 bytes"}},
       [&](auto& d) {
         d.workspace = ws.data() + 4;
         d.workspace_bytes = ws.size() - 4;
       }},
      {{"workspace size", DFSEL_INVALID_ARGUMENT, {"workspace_bytes = 64 is less than"}},
       [&](auto& d) {
         d.workspace = ws.data();
         d.workspace_bytes = 64;
       }},
      {{"threads", DFSEL_INVALID_ARGUMENT, {"n_threads = 1025", "1024 worker threads"}}, [](auto& d) { d.n_threads = 1025; }},
      {{"larger than the machine", DFSEL_OUT_OF_MEMORY, {"more than this machine's", "shard.n_ranks = 2147483647"}},
       [](auto& d) { d.shard.n_ranks = INT32_MAX; }},
      {{"larger than the address space", DFSEL_OUT_OF_MEMORY, {"does not fit in the address space", "config.max_blocks"}},
       [](auto& d) {
         d.shard.n_ranks = INT32_MAX;
         d.config.max_blocks = INT32_MAX / 4;
       }},
  };
  for (const auto& [bad, edit] : at_creation) {
    SCOPED_TRACE(bad.what);
    dfsel_dspark_plan_desc desc = dspark_desc(b.c, b.d, b.r, 0);
    edit(desc);
    plan = reinterpret_cast<dfsel_dspark_plan*>(0x1);
    msg[0] = '\0';
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), bad.status) << msg;
    EXPECT_EQ(plan, nullptr);
    expect_message(msg, bad.needles);
    size_t bytes = 0;
    EXPECT_EQ(dfsel_dspark_workspace_size(&desc, &bytes, nullptr, 0), DFSEL_SUCCESS);
  }
  plan = nullptr;
  EXPECT_EQ(dfsel_dspark_plan_create(nullptr, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(msg, "desc is NULL");
  const dfsel_dspark_plan_desc desc = dspark_desc(b.c, b.d, b.r, 0);
  EXPECT_EQ(dfsel_dspark_plan_create(&desc, nullptr, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("plan (the output pointer) is NULL"), std::string::npos);
}

// A K-quant W1 is widened to BF16 at creation, and sharded W1 rows travel in the records: the
// size dfsel_dspark_workspace_size answers is the size of the plan made, so that a caller's
// workspace of exactly that size is taken.
TEST(DSparkApi, WorkspaceSizeOfKQuantShardedW1IsTheWidenedPlans) {
  DSparkCase c;
  c.V = c.V_target = 300;
  c.R = 256;
  c.w1_t = DFSEL_TYPE_Q4_K;
  c.w2_t = DFSEL_TYPE_Q6_K;
  const DSparkData d = make_dspark_data(c, 11);
  DSparkRunOpts r;
  r.bounds = {0, 140, 300};
  r.placement = DFSEL_CODEBOOKS_SHARDED;
  dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, 1);
  desc.backend = DFSEL_BACKEND_CPU;
  size_t bytes = 0;
  char msg[512] = "";
  ASSERT_EQ(dfsel_dspark_workspace_size(&desc, &bytes, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  std::vector<uint64_t> ws(bytes / 8 + 2);
  desc.workspace = ws.data();
  desc.workspace_bytes = bytes;
  dfsel_dspark_plan* plan = nullptr;
  ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_dspark_plan_destroy(plan), DFSEL_SUCCESS);
}

TEST(DSparkApi, TheCudaBackendNeedsADevice) {
  Base b;
  dfsel_dspark_plan_desc desc = dspark_desc(b.c, b.d, b.r, 0);
  desc.backend = DFSEL_BACKEND_CUDA;
  dfsel_dspark_plan* plan = nullptr;
  char msg[512] = "";
  const dfsel_status st = dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg);
  if (st != DFSEL_UNSUPPORTED && st != DFSEL_NO_DEVICE) {
    if (plan) dfsel_dspark_plan_destroy(plan);
    GTEST_SKIP() << "this machine has a CUDA device; dfsel_gpu_tests runs CUDA DSpark plans (on device memory)";
  }
  // Without a GPU the backend is missing (a build without CUDA) or finds no device.
  EXPECT_EQ(plan, nullptr);
  EXPECT_NE(std::string(msg).find("CUDA"), std::string::npos) << msg;
}

}  // namespace
}  // namespace dfsel::test
