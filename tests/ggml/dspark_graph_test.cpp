// The DSpark chain against llama.cpp's in-graph Markov head, rebuilt from ggml's own ops and
// computed by ggml's CPU backend (src/models/dflash.cpp, build_dspark_markov_head): per step
// ggml_get_rows(W1, prev), ggml_mul_mat(W2, .), ggml_mul by markov_w2.scale, ggml_add to the
// step's base logits, ggml_argmax; with dflash.sample_from_anchor false row 0 passes unbiased
// and the chain starts at row 1 from the anchor. No transform of the base logits (llama.cpp
// applies none to DSpark drafts). dfsel's greedy tokens must be ggml's, except after a step
// whose two best biased logits lie within rounding of each other.
#include <gtest/gtest.h>
#include <ggml-cpu.h>

#include <cmath>
#include <string>
#include <vector>

#include "dfsel/dspark.h"
#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct Shape {
  int64_t V;
  int R, N, blocks;
  bool from_anchor, scale;
};

class LlamaCppGraph : public ::testing::TestWithParam<Shape> {};

dfsel_tensor view(const ggml_tensor* t) {
  dfsel_tensor v{};
  char msg[256];
  EXPECT_EQ(dfsel_ggml_tensor(t, &v, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  return v;
}

TEST_P(LlamaCppGraph, GreedyTokensAreGgmls) {
  const Shape s = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int rows = s.from_anchor ? s.N : s.N + 1, n_tok = rows * s.blocks;
  GgmlContext ctx(256u << 20);
  ggml_context* c = ctx.get();
  const float amp = 1.0f / std::sqrt(std::sqrt((float)s.R)) * 1.7f;
  const std::vector<float> w1 = uniform(rng, (size_t)(s.V * s.R), amp), w2 = uniform(rng, (size_t)(s.V * s.R), amp);
  const std::vector<float> z = uniform(rng, (size_t)(s.V * n_tok), 1.7f);
  ggml_tensor* t_w1 = new_filled(c, GGML_TYPE_F32, s.R, s.V, w1.data(), "markov_w1.weight");
  ggml_tensor* t_w2 = new_filled(c, GGML_TYPE_F32, s.R, s.V, w2.data(), "markov_w2.weight");
  ggml_tensor* base = new_filled(c, GGML_TYPE_F32, s.V, n_tok, z.data(), "logits");
  ggml_tensor* scale = ggml_new_tensor_1d(c, GGML_TYPE_F32, 1);
  *static_cast<float*>(scale->data) = 0.8f;
  ggml_tensor* anchors = ggml_new_tensor_1d(c, GGML_TYPE_I32, s.blocks);
  for (int b = 0; b < s.blocks; ++b) static_cast<int32_t*>(anchors->data)[b] = (int32_t)(rng() % (uint64_t)s.V);

  // llama.cpp's chain: the anchor first, then the argmax of each step's biased logits.
  ggml_cgraph* gf = ggml_new_graph(c);
  std::vector<ggml_tensor*> cols, picks;
  ggml_tensor* prev = anchors;
  for (int i = s.from_anchor ? 0 : 1; i < rows; ++i) {
    ggml_tensor* bias = ggml_mul_mat(c, t_w2, ggml_get_rows(c, t_w1, prev));
    if (s.scale) bias = ggml_mul(c, bias, scale);
    ggml_tensor* base_i = ggml_view_2d(c, base, s.V, s.blocks, (size_t)rows * base->nb[1], (size_t)i * base->nb[1]);
    ggml_tensor* col = ggml_add(c, base_i, bias);
    prev = ggml_argmax(c, col);
    cols.push_back(col);
    picks.push_back(prev);
    ggml_build_forward_expand(gf, prev);
  }
  ASSERT_EQ(ggml_graph_compute_with_ctx(c, gf, 2), GGML_STATUS_SUCCESS);

  dfsel_dspark_plan_desc d{};
  d.config = dfsel_dspark_config{s.V, s.V, 0, s.R, s.N, s.from_anchor ? 1 : 0, 0.0f, 0.0f, s.blocks};
  d.shard = dfsel_shard{0, 1, 0, s.V};
  d.backend = DFSEL_BACKEND_CPU;
  d.w1 = view(t_w1);
  d.w2 = view(t_w2);
  if (s.scale) d.w2_scale = dfsel_tensor_2d(scale->data, DFSEL_TYPE_F32, 1, 1, 4);
  dfsel_dspark_plan* plan = nullptr;
  char msg[512] = "";
  ASSERT_EQ(dfsel_dspark_plan_create(&d, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  std::vector<int32_t> tokens((size_t)s.blocks * s.N, -7), n(s.blocks, -7);
  dfsel_dspark_inputs in{};
  in.logits = view(base);
  in.anchors = static_cast<const int32_t*>(anchors->data);
  in.n_blocks = s.blocks;
  const dfsel_dspark_outputs out{s.blocks, tokens.data(), n.data(), nullptr, nullptr, nullptr, nullptr, nullptr};
  ASSERT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plan);
  dfsel_dspark_plan_destroy(plan);

  int compared = 0;
  for (int b = 0; b < s.blocks; ++b) {
    EXPECT_EQ(n[b], s.N);
    for (int k = 0; k < s.N; ++k) {
      const float* col = static_cast<const float*>(cols[k]->data) + (size_t)b * s.V;
      const int32_t want = static_cast<const int32_t*>(picks[k]->data)[b];
      float first = -INFINITY, second = -INFINITY;
      for (int64_t v = 0; v < s.V; ++v) {
        if (col[v] > first) second = first, first = col[v];
        else if (col[v] > second) second = col[v];
      }
      if (first - second <= 1e-4f * (1.0f + std::fabs(first))) break;  // a near-tie: either way
      ASSERT_EQ(tokens[(size_t)b * s.N + k], want) << "block " << b << " step " << k + 1;
      ++compared;
    }
  }
  EXPECT_GT(compared, 0);
}

INSTANTIATE_TEST_SUITE_P(Shapes, LlamaCppGraph,
                         ::testing::Values(Shape{2000, 64, 4, 3, true, false}, Shape{2000, 64, 4, 3, false, true},
                                           Shape{5000, 256, 7, 4, true, true}, Shape{777, 40, 6, 2, false, false}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "V" + std::to_string(i.param.V) + "_R" + std::to_string(i.param.R) + "_N" +
                                  std::to_string(i.param.N) + (i.param.from_anchor ? "_from_anchor" : "_anchor_row") +
                                  (i.param.scale ? "_scaled" : "");
                         });

}  // namespace
}  // namespace dfsel::test
