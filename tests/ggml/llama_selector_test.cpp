// llama.cpp's in-graph selector (llama_selector.h), the peer of the ggml-cuda benchmark and
// tests, computed by ggml's CPU backend: its packed rows equal dfsel's CPU plan on the same
// tensors (candidates as sets, scores by id within float rounding, the greedy walks). So the
// peer that dfsel is timed and compared against on ggml-cuda is checked where CI runs.
#include <gtest/gtest.h>

#include <ggml-cpu.h>

#include <cstring>

#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "llama_selector.h"
#include "packed_compare.h"
#include "plan_run.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct PeerCase {
  const char* name;
  int64_t V, E;
  int blocks;
  ggml_type cb_t, wh_t;
};

void PrintTo(const PeerCase& c, std::ostream* os) { *os << c.name; }

class LlamaSelectorCpu : public ::testing::TestWithParam<PeerCase> {};

dfsel_tensor view(const ggml_tensor* t) {
  dfsel_tensor v{};
  char msg[256];
  EXPECT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(t, &v, msg, sizeof msg)) << msg;
  return v;
}

TEST_P(LlamaSelectorCpu, PackedRowsEqualDfsel) {
  const PeerCase& c = GetParam();
  constexpr int R = 256, K = 16, B = 16;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(c.name) + ", seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t V = c.V, E = c.E, T = (int64_t)c.blocks * B;
  GgmlContext ctx((size_t)(V * R * 8 + V * T * 8 + E * (T + R) * 8) + (512u << 20));
  ggml_context* g = ctx.get();
  const std::vector<float> ep = uniform(rng, (size_t)(V * R), 0.2f), en = uniform(rng, (size_t)(V * R), 0.2f);
  const std::vector<float> wh = uniform(rng, (size_t)(E * R), 0.05f), h = uniform(rng, (size_t)(E * T), 1.0f);
  const std::vector<float> z = uniform(rng, (size_t)(V * T), 8.0f);
  ggml_tensor* t_ep = new_filled(g, c.cb_t, R, V, ep.data(), "selector_predecessor.weight");
  ggml_tensor* t_en = new_filled(g, c.cb_t, R, V, en.data(), "selector_successor.weight");
  ggml_tensor* t_wh = new_filled(g, c.wh_t, E, R, wh.data(), "selector_hidden.weight");
  ggml_tensor* t_z = new_filled(g, GGML_TYPE_F32, V, T, z.data(), "t_logits");
  ggml_tensor* t_h = new_filled(g, GGML_TYPE_F32, E, T, h.data(), "t_embd");
  ggml_tensor* tokens = ggml_new_tensor_1d(g, GGML_TYPE_I32, T);
  std::vector<int32_t> anchors((size_t)c.blocks);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t tok = (int32_t)(rng() % (uint64_t)V);
    static_cast<int32_t*>(tokens->data)[t] = tok;
    if (t % B == 0) anchors[(size_t)(t / B)] = tok;
  }
  const LlamaSelectorInputs in{t_z, t_h, tokens, t_ep, t_en, t_wh};
  ggml_tensor* peer = build_llama_selector(g, in, K, B, c.blocks);
  ASSERT_EQ(E, peer->ne[0]);
  ASSERT_EQ(T, peer->ne[1]);
  ggml_cgraph* gf = ggml_new_graph_custom(g, 4096, false);
  ggml_build_forward_expand(gf, peer);
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_graph_compute_with_ctx(g, gf, 2));

  PlanIo io;
  io.cfg = make_config(V, E, R, K, B, c.blocks, 1.0f, 0.0f);
  io.e_prev = view(t_ep), io.e_next = view(t_en), io.w_h = view(t_wh);
  io.logits = view(t_z), io.hidden = view(t_h);
  io.anchors = anchors.data();
  io.n_blocks = c.blocks;
  const PlanOut mine = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, mine.status) << mine.error;

  // ggml's CPU mul_mat rounds the gate's hidden states to W_h's dot type (BF16 for a BF16
  // W_h) and the widened codebooks stay exact in ggml_get_rows: allow those roundings, and
  // float rounding (2e-5 of the row) otherwise.
  const bool bf16_gate = c.wh_t != GGML_TYPE_F32;
  const bool widened = widened_by_dfsel(c.cb_t);
  const double eps = (bf16_gate ? 1.0 / 128 : 0.0) + (widened ? 1.0 / 128 : 0.0);
  const PackedLayout s{E, K, B, c.blocks};
  PackedStats st;
  const float* pr = static_cast<const float*>(peer->data);
  EXPECT_EQ("", compare_packed(s, pr, mine.packed.data(), z, V,
                               [&](int, int, int32_t, int32_t, double row_max) { return (2e-5 + eps) * (1 + row_max); },
                               &st));
  if (st.tie_swaps == 0) {
    EXPECT_EQ(st.scores, st.compared) << "only a tie at the K-th logit leaves scores out";
  }
  EXPECT_EQ("", compare_walks(s, pr, mine.packed.data(), (2e-5 + eps) * 16, &st));
  std::printf("%s: %ld scores compared, worst %.2e of the row, %ld walk steps, %ld near-ties\n", c.name, st.compared,
              st.worst_rel, st.walk_steps, st.near_ties);
}

const PeerCase kPeerCases[] = {
    {"vocab20011_f32", 20011, 512, 3, GGML_TYPE_F32, GGML_TYPE_F32},
    {"vocab12000_bf16", 12000, 288, 2, GGML_TYPE_BF16, GGML_TYPE_BF16},
    {"vocab9000_q4_k_one_block", 9000, 272, 1, GGML_TYPE_Q4_K, GGML_TYPE_F32},
};

INSTANTIATE_TEST_SUITE_P(Shapes, LlamaSelectorCpu, ::testing::ValuesIn(kPeerCases),
                         [](const ::testing::TestParamInfo<PeerCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace dfsel::test
