// DSpark against the real ggml: drafts written by ggml's own GGUF writer load in dfsel's reader
// with the values ggml decodes, and the chain equals llama.cpp's in-graph Markov head
// (build_dspark_markov_head: ggml_get_rows of W1, ggml_mul_mat with W2, ggml_add to the base
// logits, ggml_argmax; both layouts of dflash.sample_from_anchor) computed by ggml's CPU backend.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dfsel/dspark.h"
#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "kernels/common/numeric.cuh"
#include "gguf_compare.h"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

using GgufPtr = std::unique_ptr<dfsel_gguf, dfsel_status (*)(dfsel_gguf*)>;

class GgmlDSparkWriter : public ::testing::TestWithParam<ggml_type> {};

TEST_P(GgmlDSparkWriter, DraftLoadsInDfselWithGgmlsValues) {
  const ggml_type t = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // A rank of 96 for the 32-value blocks: what llama-quantize falls back to below 256.
  const int64_t V = 300, VT = 420, R = ggml_blck_size(t) == 32 ? 96 : 256, E = 256;
  GgmlContext ctx(32u << 20);
  ggml_context* c = ctx.get();
  const std::vector<float> w1 = uniform(rng, (size_t)(VT * R), 1), w2 = uniform(rng, (size_t)(V * R), 1);
  const std::vector<float> conf = uniform(rng, (size_t)(E + R), 1);
  ggml_tensor* t_w1 = new_filled(c, t, R, VT, w1.data(), "markov_w1.weight");
  ggml_tensor* t_w2 = new_filled(c, t, R, V, w2.data(), "markov_w2.weight");
  ggml_tensor* t_conf = new_filled(c, t, E + R, 1, conf.data(), "conf_proj.weight");
  ggml_tensor* t_scale = ggml_new_tensor_1d(c, GGML_TYPE_F32, 1);
  ggml_set_name(t_scale, "markov_w2.scale");
  *static_cast<float*>(t_scale->data) = 0.75f;
  ggml_tensor* t_bias = ggml_new_tensor_1d(c, GGML_TYPE_F32, 1);
  ggml_set_name(t_bias, "conf_proj.bias");
  *static_cast<float*>(t_bias->data) = -0.5f;
  ggml_tensor* t_d2t = ggml_new_tensor_1d(c, GGML_TYPE_I64, V);
  ggml_set_name(t_d2t, "d2t");
  for (int64_t v = 0; v < V; ++v) static_cast<int64_t*>(t_d2t->data)[v] = (v * 7 + 11) % VT;

  std::unique_ptr<gguf_context, void (*)(gguf_context*)> w(gguf_init_empty(), gguf_free);
  gguf_set_val_str(w.get(), "general.architecture", "dflash");
  gguf_set_val_u32(w.get(), "dflash.block_size", 8);
  gguf_set_val_bool(w.get(), "dflash.sample_from_anchor", false);
  gguf_set_val_bool(w.get(), "dflash.has_confidence_head", true);
  gguf_set_val_u32(w.get(), "dflash.embedding_length", (uint32_t)E);
  for (ggml_tensor* x : {t_w1, t_w2, t_scale, t_conf, t_bias, t_d2t}) gguf_add_tensor(w.get(), x);
  TempDir dir;
  const std::string path = dir.file("dspark.gguf");
  ASSERT_TRUE(gguf_write_to_file(w.get(), path.c_str(), false));

  dfsel_gguf* g = nullptr;
  char msg[1024] = "";
  ASSERT_EQ(dfsel_gguf_open(path.c_str(), 100, 250, &g, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  GgufPtr keep(g, dfsel_gguf_close);
  dfsel_dspark_plan_desc d{};
  ASSERT_EQ(dfsel_gguf_dspark_desc(g, &d), DFSEL_SUCCESS) << dfsel_gguf_last_error(g);
  EXPECT_EQ(d.config.n_vocab, V);
  EXPECT_EQ(d.config.n_target_vocab, VT);
  EXPECT_EQ(d.config.n_embd, E);
  EXPECT_EQ(d.config.markov_rank, R);
  EXPECT_EQ(d.config.n_draft, 7);
  EXPECT_EQ(d.config.sample_from_anchor, 0);
  EXPECT_EQ(d.shard.v_begin, 100);
  EXPECT_EQ(d.shard.v_end, 250);
  EXPECT_EQ(d.conf_bias, -0.5f);
  ASSERT_NE(d.w2_scale.data, nullptr);
  EXPECT_EQ(*static_cast<const float*>(d.w2_scale.data), 0.75f);
  for (int64_t v = 100; v < 250; ++v) ASSERT_EQ(d.d2t[v - 100], (v * 7 + 11) % VT);
  // Every row as ggml decodes it (the widened types: rounded to BF16 by ggml's converter, as
  // dfsel widens).
  const bool widened = widened_by_dfsel(t);
  auto expect_rows = [&](const dfsel_tensor& view, const ggml_tensor* src, int64_t first) {
    for (int64_t r = 0; r < view.ne[1]; ++r) {
      std::vector<float> want = ggml_row_to_float(src, first + r);
      if (widened) {
        std::vector<ggml_bf16_t> b(want.size());
        ggml_fp32_to_bf16_row(want.data(), b.data(), (int64_t)want.size());
        ggml_bf16_to_fp32_row(b.data(), want.data(), (int64_t)want.size());
      }
      for (int64_t i = 0; i < view.ne[0]; ++i) {
        const float got = load_elem(static_cast<const uint8_t*>(view.data) + r * view.nb[1], view.type, i);
        ASSERT_EQ(std::memcmp(&got, &want[(size_t)i], 4), 0) << ggml_get_name(src) << " row " << r << " elem " << i;
      }
    }
  };
  expect_rows(d.w1, t_w1, 0);
  expect_rows(d.w2, t_w2, 100);
  expect_rows(d.conf_w, t_conf, 0);
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlDSparkWriter, ::testing::ValuesIn(kDfselTypes),
                         [](const ::testing::TestParamInfo<ggml_type>& i) { return std::string(ggml_type_name(i.param)); });

}  // namespace
}  // namespace dfsel::test
