// dfsel between graph computes on ggml-cuda, one device (docs/ggml.md, "On ggml-cuda"): a
// ggml-cuda graph computes the draft's t_embd and t_logits (output norm, lm_head, logit scale),
// then dfsel_ggml_run reads those tensors in place and writes llama.cpp's packed lattice rows
// (what llama.cpp reads as t_h_nextn) and dfsel's own walk into tensors of a ggml-cuda buffer.
// No logits leave the GPU: after the run the host reads the path (n_blocks x 15 ints).
//
//   ggml_cuda_step [--vocab V] [--embd E] [--blocks N] [--steps S]
//
// The weights are synthetic (the selector's as ggml would hold them after loading a draft).
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dfsel/ggml.h"

namespace {

float value(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  z ^= z >> 29;
  return float(double(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// Fills a BF16 or F32 tensor of a backend buffer with scale * value(seed, i).
void fill(ggml_tensor* t, uint64_t seed, float scale) {
  const int64_t n = ggml_nelements(t);
  if (t->type == GGML_TYPE_F32) {
    std::vector<float> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = scale * value(seed, uint64_t(i));
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
  } else {
    std::vector<ggml_bf16_t> v(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) v[size_t(i)] = ggml_fp32_to_bf16(scale * value(seed, uint64_t(i)));
    ggml_backend_tensor_set(t, v.data(), 0, ggml_nbytes(t));
  }
}

ggml_tensor* named(ggml_tensor* t, const char* name) {
  ggml_set_name(t, name);
  return t;
}

int run(int64_t V, int64_t E, int32_t n_blocks, int steps) {
  const int32_t R = 256, K = 16, B = 16, L = B - 1;
  const int64_t T = int64_t(n_blocks) * B;
  ggml_backend_dev_t dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
  if (!dev) {
    std::fprintf(stderr, "ggml_cuda_step: ggml has no GPU device\n");
    return 1;
  }
  ggml_backend_t backend = ggml_backend_dev_init(dev, nullptr);
  ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);

  // The model's tensors, as ggml holds them once a draft is loaded, in one ggml-cuda buffer.
  ggml_init_params mp{16 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* model = ggml_init(mp);
  ggml_tensor* out_norm = named(ggml_new_tensor_1d(model, GGML_TYPE_F32, E), "output_norm.weight");
  ggml_tensor* lm_head = named(ggml_new_tensor_2d(model, GGML_TYPE_BF16, E, V), "output.weight");
  ggml_tensor* e_prev = named(ggml_new_tensor_2d(model, GGML_TYPE_BF16, R, V), "selector_predecessor.weight");
  ggml_tensor* e_next = named(ggml_new_tensor_2d(model, GGML_TYPE_BF16, R, V), "selector_successor.weight");
  ggml_tensor* w_h = named(ggml_new_tensor_2d(model, GGML_TYPE_BF16, E, R), "selector_hidden.weight");
  // The engine's per-step tensors: the anchors it fills, and what dfsel writes.
  ggml_tensor* anchors = named(ggml_new_tensor_1d(model, GGML_TYPE_I32, n_blocks), "anchors");
  ggml_tensor* lattice = named(ggml_new_tensor_2d(model, GGML_TYPE_F32, E, T), "dflash2_lattice");
  ggml_tensor* path = named(ggml_new_tensor_2d(model, GGML_TYPE_I32, L, n_blocks), "dfsel_path");
  ggml_tensor* n_emitted = named(ggml_new_tensor_1d(model, GGML_TYPE_I32, n_blocks), "dfsel_n_emitted");
  ggml_backend_buffer_t mbuf = ggml_backend_alloc_ctx_tensors_from_buft(model, buft);
  if (!mbuf) {
    std::fprintf(stderr, "ggml_cuda_step: cannot allocate the model's buffer\n");
    return 1;
  }
  fill(out_norm, 1, 1.0f);
  fill(lm_head, 2, 0.17f);
  fill(e_prev, 3, 0.2f);
  fill(e_next, 4, 0.2f);
  fill(w_h, 5, 0.05f);

  // The draft's last ops: t_embd = output_norm(x), t_logits = logit_scale * lm_head(t_embd).
  ggml_init_params gp{64 * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  ggml_context* gctx = ggml_init(gp);
  ggml_tensor* x = named(ggml_new_tensor_2d(gctx, GGML_TYPE_F32, E, T), "x");
  ggml_set_input(x);
  ggml_tensor* t_embd = named(ggml_mul(gctx, ggml_rms_norm(gctx, x, 1e-6f), out_norm), "result_norm");
  ggml_tensor* t_logits = named(ggml_scale(gctx, ggml_mul_mat(gctx, lm_head, t_embd), 0.5f), "result_output");
  ggml_set_output(t_embd);
  ggml_set_output(t_logits);
  ggml_cgraph* gf = ggml_new_graph(gctx);
  ggml_build_forward_expand(gf, t_logits);
  ggml_gallocr_t galloc = ggml_gallocr_new(buft);
  if (!ggml_gallocr_alloc_graph(galloc, gf)) return 1;

  // docs/ggml.md: cuda-plan
  // Once, when the draft is loaded: the plan reads the selector weights in place. t_logits
  // already holds the logit scale, so the plan's is 1.
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{V, E, R, K, B, 1.0f, 0.0f, n_blocks};
  desc.shard = dfsel_shard{0, 1, 0, V};
  desc.backend = DFSEL_BACKEND_CUDA;
  char msg[1024];
  if (dfsel_ggml_tensor(e_prev, &desc.e_prev, msg, sizeof msg) != DFSEL_SUCCESS ||
      dfsel_ggml_tensor(e_next, &desc.e_next, msg, sizeof msg) != DFSEL_SUCCESS ||
      dfsel_ggml_tensor(w_h, &desc.w_h, msg, sizeof msg) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "%s\n", msg);
    return 1;
  }
  dfsel_plan* plan = nullptr;
  if (dfsel_plan_create(&desc, &plan, msg, sizeof msg) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "dfsel_plan_create: %s\n", msg);
    return 1;
  }
  cudaStream_t stream = nullptr;  // the engine's own: ggml-cuda's stream is private to its backend
  cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  // end docs/ggml.md: cuda-plan

  const size_t nb = static_cast<size_t>(n_blocks);
  std::vector<int32_t> h_anchors(nb), h_path(nb * L), h_n(nb);
  std::vector<float> h_x(static_cast<size_t>(E * T));
  for (int s = 0; s < steps; ++s) {
    // docs/ggml.md: cuda-step
    // Every step: the draft graph (here: new hidden states), then the selector on its tensors.
    for (size_t i = 0; i < h_x.size(); ++i) h_x[i] = value(100 + uint64_t(s), i);
    for (int32_t b = 0; b < n_blocks; ++b) h_anchors[size_t(b)] = int32_t((b * 7919 + s * 31 + 17) % V);
    ggml_backend_tensor_set(x, h_x.data(), 0, ggml_nbytes(x));
    ggml_backend_tensor_set(anchors, h_anchors.data(), 0, ggml_nbytes(anchors));
    if (ggml_backend_graph_compute(backend, gf) != GGML_STATUS_SUCCESS) return 1;  // returns when done

    dfsel_ggml_step step{};
    step.logits = t_logits;      // {V, T}: the graph's output, read in place
    step.hidden = t_embd;        // {E, T}
    step.anchors = anchors;      // I32 {n_blocks}, filled by the engine
    step.packed = lattice;       // F32 {E, T}: what llama.cpp reads as t_h_nextn
    step.path = path;            // I32 {B - 1, n_blocks}
    step.n_emitted = n_emitted;  // I32 {n_blocks}
    if (dfsel_ggml_run(plan, &step, stream, msg, sizeof msg) != DFSEL_SUCCESS) {
      std::fprintf(stderr, "dfsel_ggml_run: %s\n", msg);
      return 1;
    }
    // The one wait: before the host reads the path and before the next graph overwrites t_logits.
    if (dfsel_plan_check(plan, stream) != DFSEL_SUCCESS) {
      std::fprintf(stderr, "dfsel: %s\n", dfsel_plan_last_error(plan));
      return 1;
    }
    ggml_backend_tensor_get(path, h_path.data(), 0, ggml_nbytes(path));
    ggml_backend_tensor_get(n_emitted, h_n.data(), 0, ggml_nbytes(n_emitted));
    // end docs/ggml.md: cuda-step
    for (int32_t b = 0; b < n_blocks; ++b) {
      std::printf("step %d block %d: anchor %d, emitted %d:", s, b, h_anchors[size_t(b)], h_n[size_t(b)]);
      for (int32_t p = 0; p < h_n[size_t(b)]; ++p) std::printf(" %d", h_path[size_t(b) * L + size_t(p)]);
      std::printf("\n");
    }
  }
  dfsel_plan_destroy(plan);
  cudaStreamDestroy(stream);
  ggml_gallocr_free(galloc);
  ggml_free(gctx);
  ggml_backend_buffer_free(mbuf);
  ggml_free(model);
  ggml_backend_free(backend);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 248320, E = 1024;  // n_embd: a model's 5120 makes the synthetic lm_head slow to fill
  int32_t blocks = 2;
  int steps = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--vocab") V = std::atoll(argv[i + 1]);
    else if (a == "--embd") E = std::atoll(argv[i + 1]);
    else if (a == "--blocks") blocks = std::atoi(argv[i + 1]);
    else if (a == "--steps") steps = std::atoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "usage: ggml_cuda_step [--vocab V] [--embd E] [--blocks N] [--steps S]\n");
      return 2;
    }
  }
  return run(V, E, blocks, steps);
}
