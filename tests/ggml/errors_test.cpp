// What dfsel::ggml refuses, each with a status and a message that names the tensor: ggml
// types dfsel does not read, views that are not contiguous along ne[0], tensors of more than
// two dimensions, shapes that disagree with the plan, and failures inside a computed node.
#include <gtest/gtest.h>

#include <ggml-cpu.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>

#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "plan_run.h"

namespace dfsel::test {
namespace {

std::string convert(const ggml_tensor* t, dfsel_status* status) {
  dfsel_tensor v{};
  char msg[512] = "";
  *status = dfsel_ggml_tensor(t, &v, msg, sizeof msg);
  return msg;
}

ggml_tensor* named(ggml_tensor* t, const char* name) {
  ggml_set_name(t, name);
  return t;
}

TEST(GgmlTensorView, RefusesWhatDfselCannotRead) {
  GgmlContext ctx(8u << 20);
  ggml_context* c = ctx.get();
  dfsel_status s;
  // The types ggml has and dfsel does not read: named, with the types dfsel reads.
  std::string msg;
  for (ggml_type t : kRefusedTypes) {
    const std::string name = std::string("blk.") + ggml_type_name(t);
    msg = convert(named(ggml_new_tensor_2d(c, t, 256, 4), name.c_str()), &s);
    EXPECT_EQ(DFSEL_UNSUPPORTED, s) << msg;
    EXPECT_NE(std::string::npos, msg.find("'" + name + "': ggml type " + ggml_type_name(t))) << msg;
    EXPECT_NE(std::string::npos, msg.find("q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K")) << msg;
  }
  msg = convert(named(ggml_new_tensor_2d(c, GGML_TYPE_I32, 8, 4), "positions"), &s);
  EXPECT_EQ(DFSEL_UNSUPPORTED, s);
  EXPECT_NE(std::string::npos, msg.find("'positions'")) << msg;

  ggml_tensor* m = named(ggml_new_tensor_2d(c, GGML_TYPE_F32, 8, 4), "codebook");
  msg = convert(named(ggml_transpose(c, m), "codebook_t"), &s);
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);
  EXPECT_NE(std::string::npos, msg.find("'codebook_t' is not contiguous")) << msg;
  msg = convert(named(ggml_view_2d(c, m, 8, 2, 16, 0), "overlapping"), &s);  // rows 16 bytes apart, 32 long
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);
  EXPECT_NE(std::string::npos, msg.find("'overlapping'")) << msg;
  msg = convert(named(ggml_view_2d(c, m, 7, 2, 30, 2), "odd_rows"), &s);  // nb[1] not a multiple of 4
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);
  EXPECT_NE(std::string::npos, msg.find("'odd_rows'")) << msg;

  msg = convert(named(ggml_new_tensor_3d(c, GGML_TYPE_F16, 8, 4, 2), "hidden3d"), &s);
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);
  EXPECT_NE(std::string::npos, msg.find("'hidden3d' is {8, 4, 2, 1}")) << msg;

  msg = convert(named(ggml_new_tensor_2d(c, GGML_TYPE_Q8_0, 48, 2), "ragged"), &s);
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);  // 48 is not a whole number of Q8_0 blocks
  EXPECT_NE(std::string::npos, msg.find("'ragged'")) << msg;

  GgmlContext meta(1u << 20, /*no_alloc=*/true);
  msg = convert(named(ggml_new_tensor_2d(meta.get(), GGML_TYPE_F32, 8, 4), "unallocated"), &s);
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, s);
  EXPECT_NE(std::string::npos, msg.find("'unallocated' has no data")) << msg;

  // and what it takes: every type dfsel reads, padded rows included.
  for (ggml_type t : kDfselTypes) {
    ggml_tensor* wide = ggml_new_tensor_2d(c, t, 512, 3);
    msg = convert(ggml_view_2d(c, wide, 256, 3, wide->nb[1], 0), &s);
    EXPECT_EQ(DFSEL_SUCCESS, s) << ggml_type_name(t) << ": " << msg;
  }
}

// docs/ggml.md's refusal, as the doc shows it and with the whole message it quotes.
TEST(GgmlTensorView, RefusalNamesTheTensorAndTheType) {
  GgmlContext ctx(1u << 20);
  // docs/ggml.md: refusal
  ggml_tensor* e_next = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_IQ4_NL, 256, 4);
  ggml_set_name(e_next, "selector_successor.weight");
  dfsel_plan_desc desc{};
  char msg[256];
  const dfsel_status s = dfsel_ggml_tensor(e_next, &desc.e_next, msg, sizeof msg);
  if (s != DFSEL_SUCCESS) std::fprintf(stderr, "%s\n", msg);
  // end docs/ggml.md: refusal
  EXPECT_EQ(DFSEL_UNSUPPORTED, s);
  EXPECT_STREQ(
      "tensor 'selector_successor.weight': ggml type iq4_nl (20) is not read by dfsel (f32, f16, bf16, q8_0, "
      "q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K)",
      msg);
}

// A small op and its graph inputs, for the refusals of dfsel_ggml_select and of the node.
struct SmallOp {
  static constexpr int64_t V = 1000, E = 288, R = 32;
  static constexpr int K = 16, block = 8, blocks = 2;
  GgmlContext ctx{64u << 20};
  ggml_tensor *ep, *en, *wh;
  dfsel_ggml_op* op = nullptr;
  SmallOp() {
    std::mt19937_64 rng(7);
    const std::vector<float> a = uniform(rng, V * R, 1), b = uniform(rng, E * R, 1);
    ep = new_filled(ctx.get(), GGML_TYPE_F16, R, V, a.data(), "ep");
    en = new_filled(ctx.get(), GGML_TYPE_F16, R, V, a.data(), "en");
    wh = new_filled(ctx.get(), GGML_TYPE_F16, E, R, b.data(), "wh");
  }
  ~SmallOp() { dfsel_ggml_op_destroy(op); }
  dfsel_plan_desc desc() const {
    dfsel_plan_desc d{};
    d.config = make_config(V, E, (int)R, K, block, blocks, 1.0f, 0.0f);
    d.shard = dfsel_shard{0, 1, 0, V};
    char msg[256];
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(ep, &d.e_prev, msg, sizeof msg)) << msg;
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(en, &d.e_next, msg, sizeof msg)) << msg;
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(wh, &d.w_h, msg, sizeof msg)) << msg;
    d.n_threads = 2;
    return d;
  }
  ggml_tensor* input(ggml_type t, int64_t ne0, int64_t ne1, const char* name) {
    std::mt19937_64 rng(ne0 * 31 + ne1);
    const std::vector<float> x = uniform(rng, (size_t)(ne0 * ne1), 4);
    return new_filled(ctx.get(), t, ne0, ne1, x.data(), name);
  }
  ggml_tensor* anchors(int64_t n, int32_t id) {
    ggml_tensor* a = named(ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, n), "anchors");
    for (int64_t i = 0; i < n; ++i) static_cast<int32_t*>(a->data)[i] = id;
    return a;
  }
};

TEST(GgmlOp, CreateRefusesWhatAGraphNodeCannotRun) {
  SmallOp s;
  dfsel_plan_desc d = s.desc();
  char msg[512] = "";
  dfsel_ggml_op* op = reinterpret_cast<dfsel_ggml_op*>(0x1);
  d.backend = DFSEL_BACKEND_CUDA;
  EXPECT_EQ(DFSEL_UNSUPPORTED, dfsel_ggml_op_create(&d, &op, msg, sizeof msg));
  EXPECT_EQ(nullptr, op);
  EXPECT_NE(std::string::npos, std::string(msg).find("desc.backend")) << msg;
  d = s.desc();
  d.shard = dfsel_shard{0, 2, 0, SmallOp::V / 2};
  EXPECT_EQ(DFSEL_UNSUPPORTED, dfsel_ggml_op_create(&d, &op, msg, sizeof msg));
  EXPECT_NE(std::string::npos, std::string(msg).find("n_ranks = 2")) << msg;
  d = s.desc();
  d.e_next.ne[1] = SmallOp::V - 1;  // validated as dfsel_plan_create does
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_op_create(&d, &op, msg, sizeof msg));
  EXPECT_NE(std::string::npos, std::string(msg).find("e_next")) << msg;
}

// A created op and inputs that agree with its plan.
class GgmlOpSelect : public testing::Test {
 protected:
  void SetUp() override {
    const dfsel_plan_desc d = s.desc();
    char msg[512] = "";
    ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_create(&d, &s.op, msg, sizeof msg)) << msg;
    z = s.input(GGML_TYPE_F32, SmallOp::V, T, "logits");
    h = s.input(GGML_TYPE_F32, SmallOp::E, T, "hidden");
    a = s.anchors(SmallOp::blocks, 3);
  }
  static constexpr int64_t T = (int64_t)SmallOp::blocks * SmallOp::block;
  SmallOp s;
  ggml_tensor *z = nullptr, *h = nullptr, *a = nullptr;
};

TEST_F(GgmlOpSelect, RefusesTensorsThatDisagreeWithThePlan) {
  ggml_context* c = s.ctx.get();
  ggml_tensor* out = reinterpret_cast<ggml_tensor*>(0x1);
  struct Refusal {
    ggml_tensor *z, *h, *a;
    dfsel_status status;
    const char* says;
  };
  const Refusal cases[] = {
      {s.input(GGML_TYPE_Q8_0, SmallOp::V - 8, T, "q8_logits"), h, a, DFSEL_UNSUPPORTED, "'q8_logits': type q8_0"},
      {named(ggml_transpose(c, s.input(GGML_TYPE_F32, T, SmallOp::V, "lt")), "logits_t"), h, a, DFSEL_INVALID_ARGUMENT,
       "'logits_t' is not contiguous"},
      {named(ggml_new_tensor_3d(c, GGML_TYPE_F32, SmallOp::V, T, 2), "logits3d"), h, a, DFSEL_INVALID_ARGUMENT,
       "'logits3d' is {1000, 16, 2, 1}"},
      {s.input(GGML_TYPE_F32, SmallOp::V - 1, T, "short_logits"), h, a, DFSEL_INVALID_ARGUMENT,
       "'short_logits': ne[0] = 999, the plan's vocabulary is 1000"},
      {s.input(GGML_TYPE_F32, SmallOp::V, T - 1, "ragged_logits"), h, a, DFSEL_INVALID_ARGUMENT, "'ragged_logits': ne[1] = 15"},
      {s.input(GGML_TYPE_F32, SmallOp::V, 3 * SmallOp::block, "many_logits"), h, a, DFSEL_INVALID_ARGUMENT,
       "'many_logits': ne[1] = 24"},
      {z, s.input(GGML_TYPE_F16, SmallOp::E + 1, T, "wide_hidden"), a, DFSEL_INVALID_ARGUMENT,
       "'wide_hidden': ne[0] = 289, the plan's n_embd is 288"},
      {z, s.input(GGML_TYPE_BF16, SmallOp::E, T - SmallOp::block, "few_hidden"), a, DFSEL_INVALID_ARGUMENT,
       "'few_hidden': ne[1] = 8, logits 'logits' has 16"},
      {z, h, s.anchors(3, 1), DFSEL_INVALID_ARGUMENT, "'anchors': {3, 1, 1, 1}"},
      {z, h, s.input(GGML_TYPE_F32, 2, 1, "float_anchors"), DFSEL_UNSUPPORTED, "'float_anchors': type f32"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.says);
    EXPECT_EQ(r.status, dfsel_ggml_select(c, s.op, r.z, r.h, r.a, &out));
    EXPECT_EQ(nullptr, out);
    EXPECT_NE(std::string::npos, std::string(dfsel_ggml_op_last_error(s.op)).find(r.says))
        << dfsel_ggml_op_last_error(s.op);
  }
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_check(s.op)) << "refusals are returned, not left for the check";
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_select(c, s.op, z, h, a, &out)) << dfsel_ggml_op_last_error(s.op);
  EXPECT_NE(nullptr, out);
}

TEST_F(GgmlOpSelect, AFailureInsideTheNodeIsKeptAndItsRowsAreNaN) {
  static_cast<int32_t*>(a->data)[1] = (int32_t)SmallOp::V;  // block 1's anchor is out of range
  ggml_tensor* out = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_select(s.ctx.get(), s.op, z, h, a, &out));
  ggml_cgraph* gf = ggml_new_graph(s.ctx.get());
  ggml_build_forward_expand(gf, out);
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_graph_compute_with_ctx(s.ctx.get(), gf, 2));
  EXPECT_NE(DFSEL_SUCCESS, dfsel_ggml_op_check(s.op));
  const std::string err = dfsel_ggml_op_last_error(s.op);
  EXPECT_NE(std::string::npos, err.find("node 'dfsel_select' (logits 'logits')")) << err;
  EXPECT_NE(std::string::npos, err.find("1000")) << err;
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_check(s.op)) << "the check forgets what it reported";
  const float* rows = static_cast<const float*>(out->data);
  for (int64_t e = 0; e < SmallOp::E; ++e) {  // block 1 (thread 1's share) is NaN, block 0 is not
    ASSERT_TRUE(std::isnan(rows[SmallOp::block * SmallOp::E + e])) << e;
    ASSERT_FALSE(std::isnan(rows[e])) << e;
  }
}

// A view whose data cannot be read where it lies (an F32 row two bytes off its element, an
// F16 one a byte off, I32 anchors two bytes off) is refused when the node is made: its address
// is known there (allocated), or its offset into a tensor a graph allocator will place is,
// and no buffer's alignment makes it readable. Found only at compute, it was a NaN share.
TEST_F(GgmlOpSelect, RefusesAMisalignedViewWhenTheNodeIsMade) {
  ggml_context* c = s.ctx.get();
  ggml_tensor* wide = s.input(GGML_TYPE_F32, SmallOp::V + 1, T, "wide_logits");
  ggml_tensor* z_off = named(ggml_view_2d(c, wide, SmallOp::V, T, wide->nb[1], 2), "logits_off");
  ggml_tensor* wide_h = s.input(GGML_TYPE_F16, SmallOp::E + 1, T, "wide_hidden");
  ggml_tensor* h_off = named(ggml_view_2d(c, wide_h, SmallOp::E, T, wide_h->nb[1], 1), "hidden_off");
  ggml_tensor* a_wide = s.anchors(SmallOp::blocks + 1, 3);
  ggml_tensor* a_off = named(ggml_view_1d(c, a_wide, SmallOp::blocks, 2), "anchors_off");
  GgmlContext later(1u << 20, /*no_alloc=*/true);  // placed by a graph allocator afterwards
  ggml_tensor* unplaced = ggml_new_tensor_2d(later.get(), GGML_TYPE_F32, SmallOp::V + 1, T);
  ggml_tensor* z_later = named(ggml_view_2d(later.get(), unplaced, SmallOp::V, T, unplaced->nb[1], 6), "logits_later");
  struct Refusal {
    ggml_tensor *z, *h, *a;
    const char* says;
  };
  const Refusal cases[] = {
      {z_off, h, a, "'logits_off'"},
      {z, h_off, a, "'hidden_off'"},
      {z, h, a_off, "'anchors_off'"},
      {z_later, h, a, "'logits_later'"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.says);
    ggml_tensor* out = reinterpret_cast<ggml_tensor*>(0x1);
    EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_select(c, s.op, r.z, r.h, r.a, &out));
    EXPECT_EQ(nullptr, out);
    const std::string err = dfsel_ggml_op_last_error(s.op);
    EXPECT_NE(std::string::npos, err.find(r.says)) << err;
    EXPECT_NE(std::string::npos, err.find("aligned")) << err;
  }
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_check(s.op));
}

// With more than one graph thread, each thread's plan sees its own slice of the anchors; the
// refusal names the index the engine wrote, not the index inside the slice.
TEST(GgmlOp, AnAnchorOutOfRangeIsNamedByItsIndexInTheTensor) {
  SmallOp s;
  constexpr int blocks = 4;
  dfsel_plan_desc d = s.desc();
  d.config.max_blocks = blocks;
  d.n_threads = 2;
  char msg[512] = "";
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_create(&d, &s.op, msg, sizeof msg)) << msg;
  const int64_t T = (int64_t)blocks * SmallOp::block;
  ggml_tensor* z = s.input(GGML_TYPE_F32, SmallOp::V, T, "logits");
  ggml_tensor* h = s.input(GGML_TYPE_F32, SmallOp::E, T, "hidden");
  ggml_tensor* a = s.anchors(blocks, 3);
  static_cast<int32_t*>(a->data)[3] = -5;  // thread 1's second block
  ggml_tensor* out = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_select(s.ctx.get(), s.op, z, h, a, &out)) << dfsel_ggml_op_last_error(s.op);
  ggml_cgraph* gf = ggml_new_graph(s.ctx.get());
  ggml_build_forward_expand(gf, out);
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_graph_compute_with_ctx(s.ctx.get(), gf, 2));
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, dfsel_ggml_op_check(s.op));
  const std::string err = dfsel_ggml_op_last_error(s.op);
  EXPECT_NE(std::string::npos, err.find("anchors[3] = -5")) << err;
  EXPECT_NE(std::string::npos, err.find("'anchors'")) << err;
  EXPECT_EQ(std::string::npos, err.find("anchors[1]")) << err;
}

}  // namespace
}  // namespace dfsel::test
