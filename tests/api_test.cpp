// Every error path of the C API returns the right status and a message that names the
// argument and its value; nothing aborts.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace {

struct Fixture {
  int64_t V = 256, E = 64;
  int R = 32, K = 4, block = 4;
  std::vector<float> e_prev, e_next, w_h, logits, hidden, packed, scores;
  std::vector<int32_t> anchors{5, 7}, path, n_emitted, cand_ids;
  dfsel_plan_desc desc{};
  dfsel_inputs in{};
  dfsel_outputs out{};

  static dfsel_tensor f32(const void* p, int64_t ne0, int64_t ne1) {
    return dfsel_tensor_2d(p, DFSEL_TYPE_F32, ne0, ne1, (size_t)ne0 * 4);
  }

  Fixture() {
    e_prev.assign(V * R, 0.01f);
    e_next.assign(V * R, 0.02f);
    w_h.assign(R * E, 0.03f);
    const int n_tokens = 2 * block;
    logits.resize(n_tokens * V);
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = (float)((i * 2654435761u) % 1000) / 100.0f;
    hidden.assign(n_tokens * E, 0.5f);
    desc.config = dfsel_config{V, E, R, K, block, 1.0f, 0.0f, 2};
    desc.shard = dfsel_shard{0, 1, 0, V};
    desc.backend = DFSEL_BACKEND_CPU;
    desc.placement = DFSEL_CODEBOOKS_REPLICATED;
    desc.e_prev = f32(e_prev.data(), R, V);
    desc.e_next = f32(e_next.data(), R, V);
    desc.w_h = f32(w_h.data(), E, R);
    in.logits = f32(logits.data(), V, n_tokens);
    in.hidden = f32(hidden.data(), E, n_tokens);
    in.anchors = anchors.data();
    in.n_blocks = 2;
    path.resize(2 * (block - 1));
    n_emitted.resize(2);
    out.path = path.data();
    out.n_emitted = n_emitted.data();
  }
};

// Creates a plan from f.desc and expects status and a message containing every needle.
void expect_create_fails(const Fixture& f, dfsel_status want, std::vector<std::string> needles) {
  dfsel_plan* plan = reinterpret_cast<dfsel_plan*>(0x1);
  char msg[512] = "";
  EXPECT_EQ(dfsel_plan_create(&f.desc, &plan, msg, sizeof msg), want) << msg;
  EXPECT_EQ(plan, nullptr);
  for (const auto& n : needles) EXPECT_NE(std::string(msg).find(n), std::string::npos) << "message: " << msg << " lacks " << n;
}

void expect_run_fails(Fixture& f, dfsel_status want, std::vector<std::string> needles) {
  dfsel_plan* plan = nullptr;
  char msg[512] = "";
  ASSERT_EQ(dfsel_plan_create(&f.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_run(plan, &f.in, &f.out, nullptr), want);
  const std::string m = dfsel_plan_last_error(plan);
  for (const auto& n : needles) EXPECT_NE(m.find(n), std::string::npos) << "message: " << m << " lacks " << n;
  dfsel_plan_destroy(plan);
}

TEST(Api, VersionAndNames) {
  EXPECT_EQ(dfsel_version(), DFSEL_VERSION);
  EXPECT_STREQ(dfsel_type_name(DFSEL_TYPE_Q8_0), "Q8_0");
  EXPECT_STREQ(dfsel_status_string(DFSEL_INVALID_ARGUMENT), "invalid argument");
  EXPECT_STREQ(dfsel_status_string(DFSEL_TIMEOUT), "timed out");
  EXPECT_STREQ(dfsel_status_string((dfsel_status)99), "unknown status");
  EXPECT_STREQ(dfsel_type_name((dfsel_type)99), "unknown type");
}

TEST(Api, Tensor2dFillsGgmlStrides) {
  int x = 0;
  const dfsel_tensor a = dfsel_tensor_2d(&x, DFSEL_TYPE_BF16, 256, 10, 600);
  EXPECT_EQ(a.data, &x);
  EXPECT_EQ(a.nb[0], 2u);
  EXPECT_EQ(a.nb[1], 600u);
  EXPECT_EQ(a.nb[2], 6000u);
  EXPECT_EQ(a.ne[2], 1);
  EXPECT_EQ(a.ne[3], 1);
  EXPECT_EQ(dfsel_tensor_2d(&x, DFSEL_TYPE_F32, 8, 1, 32).nb[0], 4u);
  EXPECT_EQ(dfsel_tensor_2d(&x, DFSEL_TYPE_Q8_0, 64, 1, 68).nb[0], 34u);
  EXPECT_EQ(dfsel_tensor_2d(&x, DFSEL_TYPE_Q4_K, 256, 1, 144).nb[0], 144u);
  EXPECT_EQ(dfsel_tensor_2d(&x, DFSEL_TYPE_Q6_K, 256, 1, 210).nb[0], 210u);
}

TEST(Api, ValidPlanRuns) {
  Fixture f;
  dfsel_plan* plan = nullptr;
  char msg[256] = "";
  ASSERT_EQ(dfsel_plan_create(&f.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_backend(plan), DFSEL_BACKEND_CPU);
  EXPECT_EQ(dfsel_plan_run(plan, &f.in, &f.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  EXPECT_EQ(f.n_emitted[0], f.block - 1);
  // A CPU run is complete when dfsel_plan_run returns: waiting, with or without a limit,
  // reports success at once.
  EXPECT_EQ(dfsel_plan_check(plan, nullptr), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_wait(plan, nullptr, 0), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_wait(plan, nullptr, -1), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_wait(nullptr, nullptr, 10), DFSEL_INVALID_ARGUMENT);
  dfsel_plan_destroy(plan);
  size_t bytes = 0;
  EXPECT_EQ(dfsel_workspace_size(&f.desc, &bytes, msg, sizeof msg), DFSEL_SUCCESS);
  EXPECT_GT(bytes, 0u);
  // A caller-owned workspace of that size works; one byte less is refused.
  std::vector<uint8_t> ws(bytes);
  f.desc.workspace = ws.data();
  f.desc.workspace_bytes = bytes;
  ASSERT_EQ(dfsel_plan_create(&f.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_run(plan, &f.in, &f.out, nullptr), DFSEL_SUCCESS);
  dfsel_plan_destroy(plan);
  f.desc.workspace_bytes = bytes - 1;
  expect_create_fails(f, DFSEL_INVALID_ARGUMENT, {"workspace_bytes", std::to_string(bytes - 1)});
}

// The config a plan was created with comes back as given; a CPU plan reads host memory.
TEST(Api, PlanConfigAndMemoryCheck) {
  Fixture f;
  f.desc.config.logit_scale = 0.0f;  // "1", kept as given
  f.desc.config.softcap = 12.5f;
  dfsel_plan* plan = nullptr;
  char msg[256] = "";
  ASSERT_EQ(dfsel_plan_create(&f.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  dfsel_config c{};
  ASSERT_EQ(dfsel_plan_config(plan, &c), DFSEL_SUCCESS);
  EXPECT_EQ(0, std::memcmp(&c, &f.desc.config, sizeof c));
  EXPECT_EQ(dfsel_plan_config(plan, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_config(nullptr, &c), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_check_memory(plan, f.logits.data(), "logits", msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_check_memory(plan, nullptr, "hidden", msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ("hidden is NULL", msg);
  EXPECT_EQ(dfsel_plan_check_memory(nullptr, f.logits.data(), "logits", msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ("plan is NULL", msg);
  EXPECT_EQ(dfsel_plan_check_memory(plan, f.logits.data(), nullptr, nullptr, 0), DFSEL_SUCCESS);
  dfsel_plan_destroy(plan);
}

TEST(Api, NullPointers) {
  Fixture f;
  dfsel_plan* plan = nullptr;
  char msg[256] = "";
  EXPECT_EQ(dfsel_plan_create(nullptr, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("desc"), std::string::npos);
  EXPECT_EQ(dfsel_plan_create(&f.desc, nullptr, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("plan"), std::string::npos);
  EXPECT_EQ(dfsel_plan_create(&f.desc, &plan, nullptr, 0), DFSEL_SUCCESS);  // msg is optional
  EXPECT_EQ(dfsel_plan_run(plan, nullptr, &f.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(plan)).find("inputs"), std::string::npos);
  EXPECT_EQ(dfsel_plan_run(plan, &f.in, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_run(nullptr, &f.in, &f.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_check(nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_destroy(nullptr), DFSEL_SUCCESS);
  EXPECT_STREQ(dfsel_plan_last_error(nullptr), "plan is NULL");
  dfsel_plan_destroy(plan);
  Fixture g;
  g.desc.e_prev.data = nullptr;
  expect_create_fails(g, DFSEL_INVALID_ARGUMENT, {"e_prev.data", "NULL"});
  Fixture h;
  h.in.anchors = nullptr;
  expect_run_fails(h, DFSEL_INVALID_ARGUMENT, {"anchors", "NULL"});
  Fixture i;
  i.out.path = nullptr;
  expect_run_fails(i, DFSEL_INVALID_ARGUMENT, {"outputs.path"});
  Fixture j;
  j.in.logits.data = nullptr;
  expect_run_fails(j, DFSEL_INVALID_ARGUMENT, {"inputs.logits.data"});
}

TEST(Api, BadConfig) {
  struct Bad {
    void (*edit)(Fixture&);
    std::vector<std::string> needles;
  };
  const Bad bad[] = {
      {[](Fixture& f) { f.desc.config.top_k = 0; }, {"top_k = 0"}},
      {[](Fixture& f) { f.desc.config.top_k = 65; }, {"top_k = 65"}},
      {[](Fixture& f) { f.desc.config.n_vocab = 0; }, {"n_vocab = 0"}},
      {[](Fixture& f) { f.desc.config.n_embd = -3; }, {"n_embd = -3"}},
      {[](Fixture& f) { f.desc.config.codebook_rank = 0; }, {"codebook_rank = 0"}},
      {[](Fixture& f) { f.desc.config.block_size = 1; }, {"block_size = 1"}},
      {[](Fixture& f) { f.desc.config.logit_scale = -1.0f; }, {"logit_scale = -1"}},
      {[](Fixture& f) { f.desc.config.softcap = NAN; }, {"softcap"}},
      {[](Fixture& f) { f.desc.config.max_blocks = 0; }, {"max_blocks = 0"}},
      {[](Fixture& f) { f.desc.shard.rank = 2; }, {"shard.rank = 2"}},
      {[](Fixture& f) { f.desc.shard.n_ranks = 0; }, {"n_ranks = 0"}},
      {[](Fixture& f) { f.desc.shard.v_end = 300; }, {"[0, 300)", "256"}},
      {[](Fixture& f) { f.desc.shard.v_begin = 10; f.desc.shard.v_end = 10; }, {"[10, 10)"}},
      {[](Fixture& f) { f.desc.config.top_k = 8; f.desc.shard = dfsel_shard{0, 2, 0, 5}; }, {"top_k = 8", "5 tokens"}},
      {[](Fixture& f) { f.desc.backend = (dfsel_backend)7; }, {"backend = 7"}},
      {[](Fixture& f) { f.desc.placement = (dfsel_placement)3; }, {"placement = 3"}},
      {[](Fixture& f) { f.desc.e_prev.ne[0] = 31; }, {"e_prev.ne[0] = 31", "32"}},
      {[](Fixture& f) { f.desc.e_next.ne[1] = 255; }, {"e_next.ne[1] = 255", "256"}},
      {[](Fixture& f) { f.desc.w_h.ne[1] = 16; }, {"w_h.ne[1] = 16"}},
      {[](Fixture& f) { f.desc.e_prev.nb[0] = 8; }, {"e_prev.nb[0] = 8"}},
      {[](Fixture& f) { f.desc.e_prev.nb[1] = 64; f.desc.e_next.nb[1] = 64; }, {"e_prev.nb[1] = 64"}},
      // Both codebooks are read with one stride: the message says so (dfsel.h).
      {[](Fixture& f) { f.desc.e_next.nb[1] = 256; }, {"e_prev.nb[1] = 128", "e_next.nb[1] = 256", "one row stride"}},
      {[](Fixture& f) { f.desc.e_prev.ne[2] = 2; }, {"e_prev.ne[2..3]"}},
      {[](Fixture& f) { f.desc.placement = DFSEL_CODEBOOKS_SHARDED; f.desc.shard = dfsel_shard{0, 2, 0, 128}; }, {"e_prev.ne[1] = 256", "128"}},
      {[](Fixture& f) { f.desc.workspace = f.e_prev.data(); f.desc.workspace_bytes = 0; }, {"workspace_bytes = 0"}},
  };
  for (const Bad& b : bad) {
    Fixture f;
    b.edit(f);
    expect_create_fails(f, DFSEL_INVALID_ARGUMENT, b.needles);
  }
}

TEST(Api, UnsupportedTypesAndBackends) {
  {
    Fixture f;
    f.desc.e_prev.type = (dfsel_type)16;  // ggml's IQ2_XXS: named, and the types read listed
    expect_create_fails(f, DFSEL_UNSUPPORTED, {"e_prev.type = 16 (iq2_xxs)", "Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K"});
  }
  {
    Fixture f;  // K-quants need rows of whole 256-value super-blocks
    f.desc.e_prev.type = f.desc.e_next.type = DFSEL_TYPE_Q4_K;
    expect_create_fails(f, DFSEL_INVALID_ARGUMENT, {"e_prev is Q4_K", "ne[0] = 32", "multiple of 256"});
  }
  {
    Fixture f;  // and Q4_0 .. Q5_1 of whole 32-value blocks
    f.desc.w_h.type = DFSEL_TYPE_Q5_1;
    f.desc.config.n_embd = f.desc.w_h.ne[0] = 48;
    expect_create_fails(f, DFSEL_INVALID_ARGUMENT, {"w_h is Q5_1", "ne[0] = 48", "multiple of 32"});
  }
  {
    Fixture f;
    f.desc.e_next.type = (dfsel_type)77;
    expect_create_fails(f, DFSEL_UNSUPPORTED, {"e_next.type = 77"});
  }
  {
    Fixture f;
    f.desc.nccl_comm = &f;  // the CPU backend exchanges in process only
    expect_create_fails(f, DFSEL_UNSUPPORTED, {"nccl_comm"});
  }
  {
    Fixture f;
    f.in.logits.type = DFSEL_TYPE_Q8_0;
    expect_run_fails(f, DFSEL_UNSUPPORTED, {"inputs.logits.type", "Q8_0"});
  }
  int n = -1;
  EXPECT_EQ(dfsel_cuda_device_count(&n), DFSEL_SUCCESS);
  if (n == 0) {
    Fixture f;
    f.desc.backend = DFSEL_BACKEND_CUDA;
    dfsel_plan* plan = nullptr;
    char msg[256] = "";
    const dfsel_status s = dfsel_plan_create(&f.desc, &plan, msg, sizeof msg);
    EXPECT_TRUE(s == DFSEL_NO_DEVICE || s == DFSEL_UNSUPPORTED) << msg;
    EXPECT_NE(std::string(msg).find("CUDA"), std::string::npos) << msg;
  }
}

TEST(Api, BadRunArguments) {
  struct Bad {
    void (*edit)(Fixture&);
    std::vector<std::string> needles;
  };
  const Bad bad[] = {
      {[](Fixture& f) { f.in.n_blocks = 3; }, {"n_blocks = 3", "max_blocks = 2"}},
      {[](Fixture& f) { f.in.n_blocks = 0; }, {"n_blocks = 0"}},
      {[](Fixture& f) { f.in.logits.ne[0] = 255; }, {"inputs.logits.ne[0] = 255", "256"}},
      {[](Fixture& f) { f.in.logits.ne[1] = 7; }, {"inputs.logits.ne[1] = 7", "at least 8"}},
      {[](Fixture& f) { f.in.hidden.ne[0] = 63; }, {"inputs.hidden.ne[0] = 63"}},
      {[](Fixture& f) { f.in.logits.nb[1] = 100; }, {"inputs.logits.nb[1] = 100"}},
      {[](Fixture& f) { f.in.temperature = INFINITY; }, {"temperature"}},
      {[](Fixture& f) { f.in.p_min = 1.5f; }, {"p_min = 1.5"}},
      {[](Fixture& f) { f.anchors[1] = 256; }, {"anchors[1] = 256", "[0, 256)"}},
      {[](Fixture& f) { f.anchors[0] = -4; }, {"anchors[0] = -4"}},
      {[](Fixture& f) { f.desc.config.top_k = 8; f.out.packed = f.logits.data(); }, {"packed", "K + K*K = 72", "n_embd = 64"}},
  };
  for (const Bad& b : bad) {
    Fixture f;
    b.edit(f);
    expect_run_fails(f, DFSEL_INVALID_ARGUMENT, b.needles);
  }
  {
    Fixture f;
    f.desc.config.n_embd = f.E = 64;
    f.desc.config.top_k = 4;  // K + K*K = 20 <= 64
    f.out.packed = f.logits.data();
    f.out.packed_row_stride = 10;
    expect_run_fails(f, DFSEL_INVALID_ARGUMENT, {"packed_row_stride = 10"});
  }
}

TEST(Api, GroupsMustTileTheVocabulary) {
  Fixture a, b;
  a.desc.shard = dfsel_shard{0, 2, 0, 128};
  b.desc.shard = dfsel_shard{1, 2, 120, 256};
  a.in.logits = Fixture::f32(a.logits.data(), 128, 8);
  a.in.logits.nb[1] = 256 * 4;
  b.in.logits = Fixture::f32(b.logits.data() + 120, 136, 8);
  b.in.logits.nb[1] = 256 * 4;
  dfsel_plan* plans[2] = {nullptr, nullptr};
  char msg[256];
  ASSERT_EQ(dfsel_plan_create(&a.desc, &plans[0], msg, sizeof msg), DFSEL_SUCCESS) << msg;
  ASSERT_EQ(dfsel_plan_create(&b.desc, &plans[1], msg, sizeof msg), DFSEL_SUCCESS) << msg;
  dfsel_inputs in[2] = {a.in, b.in};
  dfsel_outputs out[2] = {a.out, b.out};
  EXPECT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(plans[0])).find("overlap at token 120"), std::string::npos)
      << dfsel_plan_last_error(plans[0]);
  EXPECT_EQ(dfsel_plan_run(plans[0], &a.in, &a.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(plans[0])).find("n_ranks = 2"), std::string::npos);
  EXPECT_EQ(dfsel_run_group(0, plans, in, out, nullptr), DFSEL_INVALID_ARGUMENT);
  for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
}

}  // namespace
