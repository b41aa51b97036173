// dfsel_ggml_run on ggml's CPU backend: a CPU plan's step on ggml tensors (of a context, or of a
// ggml CPU buffer) is bitwise dfsel_plan_run on the same views; each malformed step tensor is
// refused with its name and nothing written. The ggml-cuda side is tests/ggml_cuda/.
#include <gtest/gtest.h>

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>

#include <cstring>

#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "plan_run.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr int kR = 32, kK = 4, kB = 5, kBlocks = 3;
constexpr int64_t kV = 3001, kE = 64;

struct CpuStep {
  GgmlContext ctx{(size_t)(kV * kR * 8 + kV * kB * kBlocks * 4 + kE * 1024) + (4u << 20)};
  ggml_tensor *ep, *en, *wh, *z, *h, *anchors, *packed, *path, *n_emitted;
  dfsel_plan* plan = nullptr;
  std::vector<int32_t> a;

  CpuStep() {
    std::mt19937_64 rng(fresh_seed());
    ggml_context* g = ctx.get();
    const int64_t T = (int64_t)kB * kBlocks;
    ep = new_filled(g, GGML_TYPE_F32, kR, kV, uniform(rng, (size_t)(kV * kR), 0.3f).data(), "e_prev");
    en = new_filled(g, GGML_TYPE_F32, kR, kV, uniform(rng, (size_t)(kV * kR), 0.3f).data(), "e_next");
    wh = new_filled(g, GGML_TYPE_F32, kE, kR, uniform(rng, (size_t)(kE * kR), 0.1f).data(), "w_h");
    z = new_filled(g, GGML_TYPE_F32, kV, T, uniform(rng, (size_t)(kV * T), 5.0f).data(), "t_logits");
    h = new_filled(g, GGML_TYPE_F32, kE, T, uniform(rng, (size_t)(kE * T), 1.0f).data(), "t_embd");
    anchors = ggml_new_tensor_1d(g, GGML_TYPE_I32, kBlocks);
    ggml_set_name(anchors, "anchors");
    for (int b = 0; b < kBlocks; ++b) a.push_back((int32_t)(rng() % kV));
    std::memcpy(anchors->data, a.data(), a.size() * 4);
    packed = ggml_new_tensor_2d(g, GGML_TYPE_F32, kE, T);
    ggml_set_name(packed, "packed");
    path = ggml_new_tensor_2d(g, GGML_TYPE_I32, kB - 1, kBlocks);
    ggml_set_name(path, "path");
    n_emitted = ggml_new_tensor_1d(g, GGML_TYPE_I32, kBlocks);
    ggml_set_name(n_emitted, "n_emitted");
    dfsel_plan_desc d{};
    d.config = make_config(kV, kE, kR, kK, kB, kBlocks, 1.0f, 0.0f);
    d.shard = dfsel_shard{0, 1, 0, kV};
    d.backend = DFSEL_BACKEND_CPU;
    d.n_threads = 1;
    char msg[256];
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(ep, &d.e_prev, msg, sizeof msg)) << msg;
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(en, &d.e_next, msg, sizeof msg)) << msg;
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(wh, &d.w_h, msg, sizeof msg)) << msg;
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_plan_create(&d, &plan, msg, sizeof msg)) << msg;
  }
  ~CpuStep() { dfsel_plan_destroy(plan); }
  dfsel_ggml_step step() const {
    dfsel_ggml_step s{};
    s.logits = z;
    s.hidden = h;
    s.anchors = anchors;
    s.packed = packed;
    s.path = path;
    s.n_emitted = n_emitted;
    return s;
  }
  void poison() {
    for (ggml_tensor* t : {packed, path, n_emitted}) std::memset(t->data, 0xff, ggml_nbytes(t));
  }
  bool untouched() const {
    const int32_t* n = static_cast<const int32_t*>(n_emitted->data);
    for (int b = 0; b < kBlocks; ++b)
      if (n[b] != -1) return false;
    return true;
  }
};

TEST(GgmlRunStep, CpuPlanIsBitwiseThePlanRun) {
  CpuStep c;
  c.poison();
  const dfsel_ggml_step s = c.step();
  char msg[256] = "";
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_run(c.plan, &s, nullptr, msg, sizeof msg)) << msg;
  EXPECT_STREQ("", msg);
  PlanIo io;
  io.cfg = make_config(kV, kE, kR, kK, kB, kBlocks, 1.0f, 0.0f);
  char m[256];
  dfsel_ggml_tensor(c.ep, &io.e_prev, m, sizeof m);
  dfsel_ggml_tensor(c.en, &io.e_next, m, sizeof m);
  dfsel_ggml_tensor(c.wh, &io.w_h, m, sizeof m);
  dfsel_ggml_tensor(c.z, &io.logits, m, sizeof m);
  dfsel_ggml_tensor(c.h, &io.hidden, m, sizeof m);
  io.anchors = c.a.data();
  io.n_blocks = kBlocks;
  const PlanOut ref = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, ref.status) << ref.error;
  EXPECT_EQ(-1, first_bit_diff(ref.packed.data(), static_cast<const float*>(c.packed->data), ref.packed.size()));
  const int32_t* n = static_cast<const int32_t*>(c.n_emitted->data);
  for (int b = 0; b < kBlocks; ++b) EXPECT_EQ(kB - 1, n[b]);
}

TEST(GgmlRunStep, CpuBufferTensorsAreAccepted) {
  CpuStep c;
  // t_embd copied into a ggml CPU backend buffer, as a graph allocator would place it.
  GgmlContext meta(4 * ggml_tensor_overhead(), /*no_alloc=*/true);
  ggml_tensor* h2 = ggml_dup_tensor(meta.get(), c.h);
  ggml_set_name(h2, "t_embd_in_buffer");
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(meta.get(), ggml_backend_cpu_buffer_type());
  ASSERT_NE(nullptr, buf);
  ggml_backend_tensor_set(h2, c.h->data, 0, ggml_nbytes(c.h));
  dfsel_ggml_step s = c.step();
  s.hidden = h2;
  c.poison();
  char msg[256] = "";
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_run(c.plan, &s, nullptr, msg, sizeof msg)) << msg;
  EXPECT_FALSE(c.untouched());
  ggml_backend_buffer_free(buf);
}

TEST(GgmlRunStep, MalformedTensorsAreRefusedByName) {
  CpuStep c;
  ggml_context* g = c.ctx.get();
  ggml_tensor* f32_anchors = ggml_new_tensor_1d(g, GGML_TYPE_F32, kBlocks);
  ggml_set_name(f32_anchors, "float_anchors");
  ggml_tensor* wide_path = ggml_new_tensor_2d(g, GGML_TYPE_I32, kB, kBlocks);
  ggml_set_name(wide_path, "wide_path");
  ggml_tensor* few_counts = ggml_new_tensor_1d(g, GGML_TYPE_I32, kBlocks - 1);
  ggml_set_name(few_counts, "few_counts");
  ggml_tensor* narrow = ggml_new_tensor_2d(g, GGML_TYPE_F32, kE - 1, kB * kBlocks);
  ggml_set_name(narrow, "narrow_packed");
  ggml_tensor* half = ggml_new_tensor_2d(g, GGML_TYPE_F16, kE, kB * kBlocks);
  ggml_set_name(half, "half_packed");
  ggml_tensor* short_logits = ggml_view_2d(g, c.z, kV - 1, kB * kBlocks, c.z->nb[1], 0);
  ggml_set_name(short_logits, "short_logits");
  ggml_tensor* unplaced = ggml_new_tensor_2d(g, GGML_TYPE_F32, kE, kB * kBlocks);
  ggml_set_name(unplaced, "unplaced");
  unplaced->data = nullptr;
  ggml_tensor* many = ggml_new_tensor_1d(g, GGML_TYPE_I32, kBlocks + 1);
  ggml_set_name(many, "many_anchors");
  struct Bad {
    const char* name;
    dfsel_ggml_step s;
  };
  std::vector<Bad> bad;
  auto with = [&](const char* name, auto edit) {
    dfsel_ggml_step s = c.step();
    edit(s);
    bad.push_back(Bad{name, s});
  };
  with("'float_anchors'", [&](dfsel_ggml_step& s) { s.anchors = f32_anchors; });
  with("'many_anchors'", [&](dfsel_ggml_step& s) { s.anchors = many; });
  with("'wide_path'", [&](dfsel_ggml_step& s) { s.path = wide_path; });
  with("'few_counts'", [&](dfsel_ggml_step& s) { s.n_emitted = few_counts; });
  with("'narrow_packed'", [&](dfsel_ggml_step& s) { s.packed = narrow; });
  with("'half_packed'", [&](dfsel_ggml_step& s) { s.packed = half; });
  with("short_logits", [&](dfsel_ggml_step& s) { s.logits = short_logits; });
  with("'unplaced'", [&](dfsel_ggml_step& s) { s.hidden = unplaced; });
  with("steps[0].path is NULL", [&](dfsel_ggml_step& s) { s.path = nullptr; });
  with("steps[0].logits is NULL", [&](dfsel_ggml_step& s) { s.logits = nullptr; });
  for (const Bad& b : bad) {
    c.poison();
    char msg[512] = "";
    EXPECT_NE(DFSEL_SUCCESS, dfsel_ggml_run(c.plan, &b.s, nullptr, msg, sizeof msg)) << b.name;
    EXPECT_NE(std::string::npos, std::string(msg).find(b.name)) << b.name << ": " << msg;
    EXPECT_TRUE(c.untouched()) << b.name;
  }
  // The group call's own arguments.
  char msg[256] = "";
  const dfsel_ggml_step s = c.step();
  void* streams[1] = {nullptr};
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_run_group(0, &c.plan, &s, streams, msg, sizeof msg));
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_run_group(1, nullptr, &s, streams, msg, sizeof msg));
  dfsel_plan* none = nullptr;
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_run_group(1, &none, &s, streams, msg, sizeof msg));
  EXPECT_NE(std::string::npos, std::string(msg).find("plans[0] is NULL")) << msg;
}

}  // namespace
}  // namespace dfsel::test
