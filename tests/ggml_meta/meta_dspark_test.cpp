// llama.cpp's in-graph DSpark head (llama_dspark_head.h) under ggml's meta backend itself, with
// output.weight split along the vocabulary and markov_w1, markov_w2 and conf_proj mirrored, as
// llama.cpp loads them (ggml patched with integrations/ggml/0004 and 0005: the mirrored bias added
// to the split logits, and the argmax over them chaining each position to the next). Checked
// against the same graph on one device with the head mirrored: the chain's tokens, the biased
// logits and the confidences bit for bit (on CPU devices every value is computed the same way on
// both sides), every device's copy of the tokens the same, and each device holding its part of
// the head only.
#include <gtest/gtest.h>

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "ggml/ggml_support.h"
#include "ggml/llama_dspark_head.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr int64_t kV = 20011, kE = 256, kR = 64;

using ContextPtr = std::unique_ptr<ggml_context, void (*)(ggml_context*)>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)>;
using BackendPtr = std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)>;

ContextPtr no_alloc_context(size_t n_tensors, bool graph = false) {
  ggml_init_params p{n_tensors * ggml_tensor_overhead() + (graph ? ggml_graph_overhead() : 0), nullptr, true};
  return ContextPtr(ggml_init(p), ggml_free);
}

struct Shape {
  int64_t rows0;  // output.weight's rows on device 0
  int blocks, L;  // blocks, and positions a block
};

struct Weights {
  std::vector<float> lm_head, w1, w2, conf_w, conf_b, x;
  std::vector<int32_t> tokens;
  Weights(uint64_t seed, int64_t n_tok) {
    std::mt19937_64 rng(seed);
    lm_head = uniform(rng, (size_t)(kE * kV), 0.2f);
    w1 = uniform(rng, (size_t)(kR * kV), 0.5f);
    w2 = uniform(rng, (size_t)(kR * kV), 0.5f);
    conf_w = uniform(rng, (size_t)(kE + kR), 0.1f);
    conf_b = {-0.25f};
    x = uniform(rng, (size_t)(kE * n_tok), 1.0f);
    for (int64_t t = 0; t < n_tok; ++t) tokens.push_back((int32_t)(rng() % kV));
  }
};

// The draft's last graph on one device or a meta device: t_embd = rms_norm(x), t_logits =
// output.weight . t_embd, then the DSpark head.
struct Head {
  ContextPtr wctx = no_alloc_context(8);
  BufferPtr wbuf{nullptr, ggml_backend_buffer_free};
  ContextPtr gctx = no_alloc_context(1024, true);
  std::unique_ptr<ggml_gallocr, void (*)(ggml_gallocr_t)> galloc{nullptr, ggml_gallocr_free};
  ggml_tensor* lm_head = nullptr;
  LlamaDSparkHead out;
  ggml_cgraph* graph = nullptr;

  std::string make(ggml_backend_buffer_type_t buft, const Weights& v, const Shape& s) {
    const int64_t n_tok = (int64_t)s.blocks * s.L;
    ggml_context* w = wctx.get();
    lm_head = ggml_new_tensor_2d(w, GGML_TYPE_F32, kE, kV);
    ggml_set_name(lm_head, "output.weight");
    ggml_tensor* w1 = ggml_new_tensor_2d(w, GGML_TYPE_F32, kR, kV);
    ggml_set_name(w1, "markov_w1.weight");
    ggml_tensor* w2 = ggml_new_tensor_2d(w, GGML_TYPE_F32, kR, kV);
    ggml_set_name(w2, "markov_w2.weight");
    ggml_tensor* conf_w = ggml_new_tensor_2d(w, GGML_TYPE_F32, kE + kR, 1);
    ggml_set_name(conf_w, "conf_proj.weight");
    ggml_tensor* conf_b = ggml_new_tensor_1d(w, GGML_TYPE_F32, 1);
    ggml_set_name(conf_b, "conf_proj.bias");
    wbuf.reset(ggml_backend_alloc_ctx_tensors_from_buft(w, buft));
    if (!wbuf) return "allocating the weights";
    ggml_backend_tensor_set(lm_head, v.lm_head.data(), 0, ggml_nbytes(lm_head));
    ggml_backend_tensor_set(w1, v.w1.data(), 0, ggml_nbytes(w1));
    ggml_backend_tensor_set(w2, v.w2.data(), 0, ggml_nbytes(w2));
    ggml_backend_tensor_set(conf_w, v.conf_w.data(), 0, ggml_nbytes(conf_w));
    ggml_backend_tensor_set(conf_b, v.conf_b.data(), 0, ggml_nbytes(conf_b));

    ggml_context* g = gctx.get();
    ggml_tensor* x = ggml_new_tensor_2d(g, GGML_TYPE_F32, kE, n_tok);
    ggml_set_input(x);
    ggml_tensor* tokens = ggml_new_tensor_1d(g, GGML_TYPE_I32, n_tok);
    ggml_set_input(tokens);
    ggml_tensor* embd = ggml_rms_norm(g, x, 1e-6f);
    ggml_tensor* logits = ggml_mul_mat(g, lm_head, embd);
    out = build_llama_dspark_head(g, LlamaDSparkInputs{logits, embd, tokens, w1, w2, conf_w, conf_b}, s.blocks);
    graph = ggml_new_graph(g);
    for (ggml_tensor* t : out.chain) {
      ggml_set_output(t);
      ggml_build_forward_expand(graph, t);
    }
    ggml_set_output(out.logits);
    ggml_set_output(out.conf);
    ggml_build_forward_expand(graph, out.logits);
    ggml_build_forward_expand(graph, out.conf);
    galloc.reset(ggml_gallocr_new(buft));
    if (!ggml_gallocr_alloc_graph(galloc.get(), graph)) return "allocating the graph";
    ggml_backend_tensor_set(x, v.x.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(tokens, v.tokens.data(), 0, ggml_nbytes(tokens));
    return "";
  }
};

template <typename T>
std::vector<T> get(const ggml_tensor* t) {
  std::vector<T> v(ggml_nbytes(t) / sizeof(T));
  ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
  return v;
}

// exact: the tokens, biased logits and confidences bit for bit. Otherwise (ggml-cuda, whose
// products may round the split head's rows otherwise than the whole head's) the tokens of each
// block up to the first step whose two best biased logits lie within 1e-3 of each other.
void dspark_head(ggml_backend_dev_t d0, ggml_backend_dev_t d1, const Shape& s, bool exact) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Weights v(seed, (int64_t)s.blocks * s.L);
  static int64_t rows[2];  // the meta device keeps a pointer to them
  rows[0] = s.rows0;
  rows[1] = kV - s.rows0;
  ggml_backend_dev_t devs[2] = {d0, d1};
  ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 2, split_output_weight, rows);
  BackendPtr backend(ggml_backend_dev_init(meta, nullptr), ggml_backend_free);
  ASSERT_NE(nullptr, backend);
  Head h;
  ASSERT_EQ("", h.make(ggml_backend_dev_buffer_type(meta), v, s));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(backend.get(), h.graph));

  BackendPtr one(ggml_backend_dev_init(d0, nullptr), ggml_backend_free);
  Head m;
  ASSERT_EQ("", m.make(ggml_backend_dev_buffer_type(d0), v, s));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(one.get(), m.graph));

  ASSERT_EQ(m.out.chain.size(), h.out.chain.size());
  const std::vector<float> logits = get<float>(h.out.logits), conf = get<float>(h.out.conf);
  const std::vector<float> want_logits = get<float>(m.out.logits), want_conf = get<float>(m.out.conf);
  std::vector<bool> parted((size_t)s.blocks, false);  // at a near-tie, when not exact
  for (size_t i = 0; i < h.out.chain.size(); ++i) {
    const std::vector<int32_t> want = get<int32_t>(m.out.chain[i]);
    std::vector<int32_t> tokens[2];
    for (size_t j = 0; j < 2; ++j) {
      const ggml_tensor* t = ggml_backend_meta_simple_tensor(h.out.chain[i], j);
      ASSERT_NE(nullptr, t);
      tokens[j] = get<int32_t>(t);
    }
    EXPECT_EQ(tokens[0], tokens[1]) << "position " << i << ": the devices' tokens differ";
    for (int b = 0; b < s.blocks; ++b) {
      if (parted[(size_t)b] || tokens[0][(size_t)b] == want[(size_t)b]) continue;
      const float* col = want_logits.data() + ((size_t)b * s.L + i) * kV;
      float first = -INFINITY, second = -INFINITY;
      for (int64_t v = 0; v < kV; ++v) {
        if (col[v] > first) second = first, first = col[v];
        else if (col[v] > second) second = col[v];
      }
      parted[(size_t)b] = !exact && first - second <= 1e-3f * (1.0f + std::fabs(first));
      EXPECT_TRUE(parted[(size_t)b]) << "position " << i << ", block " << b << ": token " << tokens[0][(size_t)b]
                                     << ", one device's " << want[(size_t)b];
    }
  }
  if (exact) {
    EXPECT_EQ(-1, first_bit_diff(want_logits.data(), logits.data(), logits.size())) << "the biased logits";
    EXPECT_EQ(-1, first_bit_diff(want_conf.data(), conf.data(), conf.size())) << "the confidences";
  }
  const std::vector<float> conf1 = get<float>(ggml_backend_meta_simple_tensor(h.out.conf, 1));
  EXPECT_EQ(-1, first_bit_diff(conf.data(), conf1.data(), conf.size())) << "device 1's confidences";

  const size_t mirrored = (size_t)kE * kV * 4;
  size_t head_bytes[2];
  for (size_t j = 0; j < 2; ++j) head_bytes[j] = ggml_nbytes(ggml_backend_meta_simple_tensor(h.lm_head, j));
  EXPECT_EQ(mirrored, head_bytes[0] + head_bytes[1]);
  std::printf("DSpark head under the meta backend (%s, %d blocks of %d): lm_head bytes a device %zu and %zu of %zu\n",
              ggml_backend_dev_name(d0), s.blocks, s.L, head_bytes[0], head_bytes[1], mirrored);
}

void PrintTo(const Shape& s, std::ostream* os) { *os << s.rows0 << " rows on device 0, " << s.blocks << " blocks of " << s.L; }

class GgmlMetaDSpark : public ::testing::TestWithParam<Shape> {};

TEST_P(GgmlMetaDSpark, HeadOnTwoCpuDevicesIsOneDevices) {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  ASSERT_NE(nullptr, cpu);
  dspark_head(cpu, cpu, GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Shapes, GgmlMetaDSpark,
                         ::testing::Values(Shape{kV / 2, 1, 7}, Shape{kV / 5, 3, 4}, Shape{1, 2, 3}),
                         [](const ::testing::TestParamInfo<Shape>& i) {
                           return "rows0_" + std::to_string(i.param.rows0) + "_blocks" + std::to_string(i.param.blocks) +
                                  "_L" + std::to_string(i.param.L);
                         });

#if defined(DFSEL_META_TEST_CUDA)
TEST(GgmlMetaDSparkCuda, HeadOnTwoCudaDevicesIsOneDevices) {
  std::vector<ggml_backend_dev_t> gpus;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
    if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) gpus.push_back(ggml_backend_dev_get(i));
  if (gpus.size() < 2) GTEST_SKIP() << "needs two ggml GPU devices (GGML_CUDA_DEVICES=2 on one GPU)";
  dspark_head(gpus[0], gpus[1], Shape{kV / 2, 3, 4}, false);
}
#endif

}  // namespace
}  // namespace dfsel::test
