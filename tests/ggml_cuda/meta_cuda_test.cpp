// The failure dfsel answers, pinned on ggml-cuda: ggml's meta backend (llama.cpp's split-mode
// tensor) over two ggml-cuda devices with the lm_head split along the vocabulary computes the
// logits, and aborts on ggml_top_k over them (the split rules' GGML_ASSERT in
// ggml-backend-meta.cpp). With one GPU the two devices are GGML_CUDA_DEVICES=2's virtual ones.
// The death case runs in a new process (the threadsafe style re-executes this binary): CUDA does
// not survive fork in a process that used it. When ggml learns a top-K over split logits this
// test fails, and docs/ggml.md must be revisited.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "ggml/ggml_support.h"
#include "ggml_cuda/cuda_draft.h"
#include "support/gpu.cuh"

namespace dfsel::test {
namespace {

constexpr int64_t kVocab = 4096, kEmbd = 256, kTokens = 16, kRows0 = 1536;

constexpr int64_t kRows[2] = {kRows0, kVocab - kRows0};  // output.weight's rows a device

// The draft's last product under the meta backend over ggml's first two GPU devices, then
// ggml_top_k of its logits when top_k: allocation and compute (the abort comes from there).
void meta_lm_head(bool top_k) {
  const std::vector<ggml_backend_dev_t> gpus = ggml_gpu_devices();
  if (gpus.size() < 2) {
    std::fprintf(stderr, "only %zu ggml GPU device(s)\n", gpus.size());
    std::exit(3);
  }
  ggml_backend_dev_t devs[2] = {gpus[0], gpus[1]};
  ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 2, split_output_weight, const_cast<int64_t*>(kRows));
  ggml_backend_t backend = ggml_backend_dev_init(meta, nullptr);
  ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(meta);
  ggml_init_params wp{4 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* wctx = ggml_init(wp);
  ggml_tensor* w = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, kEmbd, kVocab);
  ggml_set_name(w, "output.weight");
  ggml_backend_buffer_t wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
  std::vector<float> wf((size_t)(kEmbd * kVocab));
  for (size_t i = 0; i < wf.size(); ++i) wf[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
  ggml_backend_tensor_set(w, wf.data(), 0, ggml_nbytes(w));
  ggml_init_params gp{64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* gctx = ggml_init(gp);
  ggml_tensor* h = ggml_new_tensor_2d(gctx, GGML_TYPE_F32, kEmbd, kTokens);
  ggml_set_input(h);
  ggml_tensor* logits = ggml_mul_mat(gctx, w, h);
  ggml_set_output(logits);
  ggml_cgraph* graph = ggml_new_graph(gctx);
  ggml_build_forward_expand(graph, logits);
  if (top_k) ggml_build_forward_expand(graph, ggml_top_k(gctx, logits, 16));
  ggml_gallocr_t galloc = ggml_gallocr_new(buft);
  if (!ggml_gallocr_alloc_graph(galloc, graph)) std::exit(4);
  std::vector<float> hf((size_t)(kEmbd * kTokens), 0.25f);
  ggml_backend_tensor_set(h, hf.data(), 0, ggml_nbytes(h));
  if (ggml_backend_graph_compute(backend, graph) != GGML_STATUS_SUCCESS) std::exit(5);
  if (!top_k) {
    // The gathered logits are the whole product: one value checked per vocabulary half.
    std::vector<float> out((size_t)(kVocab * kTokens));
    ggml_backend_tensor_get(logits, out.data(), 0, ggml_nbytes(logits));
    for (int64_t v : {int64_t(7), kVocab - 9}) {
      double want = 0;
      for (int64_t e = 0; e < kEmbd; ++e) want += (double)wf[(size_t)(v * kEmbd + e)] * 0.25;
      if (std::fabs(out[(size_t)v] - want) > 1e-3) std::exit(6);
    }
  }
  ggml_gallocr_free(galloc);
  ggml_free(gctx);
  ggml_backend_buffer_free(wbuf);
  ggml_free(wctx);
  ggml_backend_free(backend);
  std::exit(0);
}

class GgmlCudaMeta : public ::testing::Test {
 protected:
  void SetUp() override {
    // Each case is a new process; there ggml-cuda shows two devices, virtual ones on one GPU.
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (!std::getenv("GGML_CUDA_DEVICES")) {
      setenv("GGML_CUDA_DEVICES", "2", 1);
      set_here_ = true;
    }
  }
  void TearDown() override {
    if (set_here_) unsetenv("GGML_CUDA_DEVICES");
  }
  bool set_here_ = false;
};

TEST_F(GgmlCudaMeta, VocabularySplitLmHeadComputes) {
  DFSEL_REQUIRE_GPUS(1);
  EXPECT_EXIT(meta_lm_head(false), ::testing::ExitedWithCode(0), "");
}

TEST_F(GgmlCudaMeta, TopKOverVocabularySplitLogitsAborts) {
  DFSEL_REQUIRE_GPUS(1);
  EXPECT_DEATH(meta_lm_head(true), "src_ss\\[0\\]\\.axis != GGML_BACKEND_SPLIT_AXIS_0");
}

}  // namespace
}  // namespace dfsel::test
