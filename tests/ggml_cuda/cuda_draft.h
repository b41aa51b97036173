// What the ggml-cuda tests share: ggml-cuda's devices through ggml's registry, a DFlash2
// draft's selector weights written by ggml's GGUF writer and loaded into a ggml-cuda buffer
// the way llama.cpp's loader does (tensor descriptions from the file, data read into the
// device buffer), and the draft's last graph: t_embd = rms_norm(x), the lm_head product, the
// logit scale (and softcap), with llama.cpp's in-graph selector on top.
#pragma once

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace dfsel::test {

// ggml's GPU devices (ggml-cuda's, as ggml's registry lists them; GGML_CUDA_DEVICES=N shows N
// of them on one GPU).
std::vector<ggml_backend_dev_t> ggml_gpu_devices();

struct DraftShape {
  int64_t V = 0, E = 0;
  int R = 256, K = 16, block = 16, blocks = 1;
  ggml_type cb_t = GGML_TYPE_BF16, wh_t = GGML_TYPE_BF16;
  float scale = 1.0f, softcap = 0.0f;  // applied by the graph: t_logits = T(lm_head . t_embd)
  int64_t v_begin = 0, v_end = -1;     // the graph's vocabulary slice of the lm_head (-1: to V)
  int64_t tokens() const { return (int64_t)block * blocks; }
  int64_t slice_end() const { return v_end < 0 ? V : v_end; }
};

// The selector weights of a draft on one ggml-cuda device, loaded from a GGUF written by ggml,
// with host copies (ggml tensors in host memory) of what was written.
struct DraftWeights {
  ggml_context* host = nullptr;  // e_prev_h, e_next_h, w_h_h: the values as written
  ggml_context* meta = nullptr;  // the loaded tensors' descriptions
  ggml_backend_buffer_t buf = nullptr;
  ggml_tensor *e_prev_h = nullptr, *e_next_h = nullptr, *w_h_h = nullptr;
  ggml_tensor *e_prev = nullptr, *e_next = nullptr, *w_h = nullptr;  // in the device buffer
  ~DraftWeights();
  // "" or why it failed.
  std::string make(const DraftShape& s, ggml_backend_buffer_type_t buft, std::mt19937_64& rng,
                   const std::string& gguf_path);
};

// The draft's last graph on one device: inputs x {E, T} and tokens I32 {T}, lm_head {E, V}
// BF16 (or rows [v_begin, v_end) of it), t_embd, z = lm_head . t_embd, t_logits = T(z), and
// llama.cpp's packed rows over them. Values are hashed from (seed, index): every device given
// the same seed holds the same x, tokens and lm_head rows.
struct DraftGraph {
  ggml_context* wctx = nullptr;  // lm_head and the inputs
  ggml_backend_buffer_t wbuf = nullptr;
  ggml_context* gctx = nullptr;
  ggml_gallocr_t galloc = nullptr;
  ggml_cgraph* graph = nullptr;
  ggml_tensor *x = nullptr, *tokens = nullptr, *lm_head = nullptr;
  ggml_tensor *embd = nullptr, *z = nullptr, *logits = nullptr, *peer = nullptr;
  std::vector<int32_t> anchors;  // token b * block of each block
  ~DraftGraph();
  std::string make(const DraftShape& s, const DraftWeights& w, ggml_backend_buffer_type_t buft, uint64_t seed,
                   bool with_peer);
};

// The tensors dfsel writes, in a buffer of buft: packed F32 {E, T}, path I32 {block - 1,
// blocks}, n_emitted I32 {blocks}, and the anchors I32 {blocks} it reads.
struct DfselOutputs {
  ggml_context* ctx = nullptr;
  ggml_backend_buffer_t buf = nullptr;
  ggml_tensor *anchors = nullptr, *packed = nullptr, *path = nullptr, *n_emitted = nullptr;
  ~DfselOutputs();
  std::string make(const DraftShape& s, const std::vector<int32_t>& anchors, ggml_backend_buffer_type_t buft);
  void poison();  // 0xff bytes in every output
};

// A tensor's data as floats (F32 only) or ints, read back with ggml_backend_tensor_get.
std::vector<float> get_f32(const ggml_tensor* t);
std::vector<int32_t> get_i32(const ggml_tensor* t);

}  // namespace dfsel::test
