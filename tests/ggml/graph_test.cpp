// dfsel_ggml_select inside a real ggml graph on ggml's CPU backend: on random inputs of the
// model's shape, its packed rows equal the selector composed from ggml's own ops (candidate
// order aside, ties recognised) and, bit for bit, dfsel's own plan on the same tensors.
#include <gtest/gtest.h>

#include <ggml-cpu.h>

#include <cstring>

#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "graph_compare.h"
#include "plan_run.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct GraphCase {
  const char* name;
  int64_t V, E;
  int blocks, max_blocks;
  ggml_type logits_t, hidden_t, cb_t, wh_t;
  int64_t logits_pad, hidden_pad;  // extra elements per row: views with padded nb[1]
  int64_t weight_pad;              // the same for e_prev, e_next and w_h (whole blocks)
  float scale, softcap;
  int op_threads, graph_threads;
};

constexpr int kR = 256, kK = 16, kBlock = 16;

void PrintTo(const GraphCase& c, std::ostream* os) { *os << c.name; }

class GgmlGraph : public ::testing::TestWithParam<GraphCase> {};

dfsel_tensor view(const ggml_tensor* t) {
  dfsel_tensor v{};
  char msg[256];
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(t, &v, msg, sizeof msg)) << msg;
  return v;
}

TEST_P(GgmlGraph, NodeEqualsGgmlOpsAndThePlan) {
  const GraphCase& c = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(c.name) + ", seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t V = c.V, E = c.E, T = (int64_t)c.blocks * kBlock;
  const size_t cb_bytes = 2 * ggml_row_size(c.cb_t, kR + c.weight_pad) * V, z_bytes = (size_t)(V + c.logits_pad) * T * 4;
  GgmlContext ctx(cb_bytes + 4 * z_bytes + (size_t)E * (T + kR) * 16 + (256u << 20));
  ggml_context* g = ctx.get();

  const std::vector<float> ep = uniform(rng, (size_t)(V * kR), 1.0f), en = uniform(rng, (size_t)(V * kR), 1.0f);
  const std::vector<float> wh = uniform(rng, (size_t)(E * kR), 1.0f / 16);
  // Logits like a model's: a flat bulk and, per row, a few dozen peaks spread over [12, 30),
  // so the top-K are mostly distinct and ties (by rounding to F16 / BF16) fall at the boundary.
  std::vector<float> z = uniform(rng, (size_t)(V * T), 12.0f);
  const std::vector<float> h = uniform(rng, (size_t)(E * T), 1.0f);
  std::uniform_real_distribution<float> peak(12.0f, 30.0f);
  for (int64_t t = 0; t < T; ++t) {
    for (int i = 0; i < 24; ++i) z[(size_t)(t * V) + rng() % (uint64_t)V] = peak(rng);
  }
  ggml_tensor* t_ep = new_padded(g, c.cb_t, kR, V, c.weight_pad, ep.data(), "selector_predecessor.weight");
  ggml_tensor* t_en = new_padded(g, c.cb_t, kR, V, c.weight_pad, en.data(), "selector_successor.weight");
  ggml_tensor* t_wh = new_padded(g, c.wh_t, E, kR, c.weight_pad, wh.data(), "selector_hidden.weight");
  ggml_tensor* t_z = new_padded(g, c.logits_t, V, T, c.logits_pad, z.data(), "logits");
  ggml_tensor* t_h = new_padded(g, c.hidden_t, E, T, c.hidden_pad, h.data(), "hidden");
  ggml_tensor* t_a = ggml_new_tensor_1d(g, GGML_TYPE_I32, c.blocks);
  ggml_set_name(t_a, "anchors");
  std::vector<int32_t> anchors((size_t)c.blocks);
  for (int32_t& a : anchors) a = (int32_t)(rng() % (uint64_t)V);
  std::memcpy(t_a->data, anchors.data(), anchors.size() * 4);

  dfsel_plan_desc desc{};
  desc.config = make_config(V, E, kR, kK, kBlock, c.max_blocks, c.scale, c.softcap);
  desc.shard = dfsel_shard{0, 1, 0, V};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.e_prev = view(t_ep);
  desc.e_next = view(t_en);
  desc.w_h = view(t_wh);
  desc.n_threads = c.op_threads;
  char msg[512] = "";
  dfsel_ggml_op* op = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_create(&desc, &op, msg, sizeof msg)) << msg;
  std::unique_ptr<dfsel_ggml_op, dfsel_status (*)(dfsel_ggml_op*)> keep(op, dfsel_ggml_op_destroy);

  ggml_tensor* packed = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_select(g, op, t_z, t_h, t_a, &packed)) << dfsel_ggml_op_last_error(op);
  ASSERT_EQ(GGML_TYPE_F32, packed->type);
  ASSERT_EQ(E, packed->ne[0]);
  ASSERT_EQ(T, packed->ne[1]);
  // ggml's ops compute with what dfsel computes with: weights of the widened types are widened
  // to BF16 (ggml's decoder, ggml's converter), the others are read as stored.
  auto as_computed = [&](ggml_tensor* t) {
    if (!widened_by_dfsel(t->type)) return t;
    std::vector<float> f;
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      const std::vector<float> row = ggml_row_to_float(t, r);
      f.insert(f.end(), row.begin(), row.end());
    }
    return new_filled(g, GGML_TYPE_BF16, t->ne[0], t->ne[1], f.data(), "widened");
  };
  const GgmlSelectorNodes ref = build_ggml_selector(g, t_z, t_h, t_a, as_computed(t_ep), as_computed(t_en),
                                                    as_computed(t_wh), kK, kBlock, c.scale, c.softcap);
  ggml_cgraph* gf = ggml_new_graph(g);
  ggml_build_forward_expand(gf, packed);
  ggml_build_forward_expand(gf, ref.ids);
  ggml_build_forward_expand(gf, ref.rest);
  ggml_build_forward_expand(gf, ref.first);
  std::memset(packed->data, 0xff, ggml_nbytes(packed));  // poisoned: unwritten rows show as NaN
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_graph_compute_with_ctx(g, gf, c.graph_threads));
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_check(op)) << dfsel_ggml_op_last_error(op);
  const float* rows = static_cast<const float*>(packed->data);

  // Bit for bit dfsel's own plan on the same views (one plan, every block, its own threads).
  PlanIo io;
  io.cfg = desc.config;
  io.e_prev = desc.e_prev, io.e_next = desc.e_next, io.w_h = desc.w_h;
  io.logits = view(t_z), io.hidden = view(t_h);
  io.anchors = anchors.data();
  io.n_blocks = c.blocks;
  const PlanOut plan = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, plan.status) << plan.error;
  const long diff = first_bit_diff(plan.packed.data(), rows, plan.packed.size());
  ASSERT_EQ(-1, diff) << "row " << diff / E << " element " << diff % E;

  // Against ggml's own ops: the logits as ggml stored them, decoded by ggml.
  std::vector<float> zf;
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float> row = ggml_row_to_float(t_z, t);
    zf.insert(zf.end(), row.begin(), row.end());
  }
  CompareStats st;
  const PackedShape shape{E, kK, kBlock, c.blocks};
  EXPECT_EQ("", compare_with_ggml_ops(shape, zf, V, rows, ref, 2e-5, &st));
  std::printf("%s: %ld of %ld scores compared with ggml's ops (%ld candidates swapped at ties), worst %.2e\n",
              c.name, st.compared, st.scores, st.tie_swaps, st.worst);
  // A score is left out only when ggml and dfsel chose different ids at a tie of the K-th
  // logit (compare_with_ggml_ops checked each such tie): without swaps every score counts.
  // F16 / BF16 logits tie often (rounding), F32 ones seldom.
  if (st.tie_swaps == 0) EXPECT_EQ(st.scores, st.compared);
  else EXPECT_GT(st.compared, st.scores / 4) << "ties left too little to compare";
}

const GraphCase kCases[] = {
    {"vocab248320_bf16_logits_f16_hidden", 248320, 512, 3, 3, GGML_TYPE_BF16, GGML_TYPE_F16, GGML_TYPE_BF16,
     GGML_TYPE_F16, 64, 32, 8, 1.0f, 30.0f, 2, 2},
    {"vocab50000_f32_q8_weights", 50000, 384, 4, 4, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0,
     5, 3, 32, 0.7f, 0.0f, 3, 2},
    {"vocab65553_f16_logits_one_thread", 65553, 272, 2, 2, GGML_TYPE_F16, GGML_TYPE_BF16, GGML_TYPE_F16,
     GGML_TYPE_BF16, 1, 8, 0, 1.3f, 15.0f, 1, 2},
    {"vocab20000_idle_threads", 20000, 320, 3, 8, GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_F32, GGML_TYPE_F32, 16,
     0, 3, 1.0f, 0.0f, 4, 4},
    {"vocab30000_kquant_weights", 30000, 512, 2, 2, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, 0,
     0, 256, 1.0f, 25.0f, 2, 2},
    {"vocab20000_q4_1_q5_0_weights", 20000, 288, 2, 2, GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
     0, 0, 32, 1.0f, 0.0f, 2, 2},
};

INSTANTIATE_TEST_SUITE_P(Shapes, GgmlGraph, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<GraphCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace dfsel::test
