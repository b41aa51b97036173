#include "cuda_draft.h"

#include <gguf.h>

#include <cstdio>
#include <memory>

#include "ggml/ggml_support.h"
#include "ggml/llama_selector.h"

namespace dfsel::test {

std::vector<ggml_backend_dev_t> ggml_gpu_devices() {
  std::vector<ggml_backend_dev_t> out;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i) {
    ggml_backend_dev_t d = ggml_backend_dev_get(i);
    if (ggml_backend_dev_type(d) == GGML_BACKEND_DEVICE_TYPE_GPU) out.push_back(d);
  }
  return out;
}

DraftWeights::~DraftWeights() {
  if (buf) ggml_backend_buffer_free(buf);
  if (meta) ggml_free(meta);
  if (host) ggml_free(host);
}

std::string DraftWeights::make(const DraftShape& s, ggml_backend_buffer_type_t buft, std::mt19937_64& rng,
                               const std::string& path) {
  const size_t bytes = 2 * ggml_row_size(s.cb_t, s.R) * (size_t)s.V + ggml_row_size(s.wh_t, s.E) * s.R;
  ggml_init_params hp{bytes + 8 * ggml_tensor_overhead() + 4096, nullptr, false};
  host = ggml_init(hp);
  if (!host) return "host context";
  const std::vector<float> ep = uniform(rng, (size_t)(s.V * s.R), 0.2f), en = uniform(rng, (size_t)(s.V * s.R), 0.2f);
  const std::vector<float> wh = uniform(rng, (size_t)(s.E * s.R), 0.05f);
  e_prev_h = new_filled(host, s.cb_t, s.R, s.V, ep.data(), "selector_predecessor.weight");
  e_next_h = new_filled(host, s.cb_t, s.R, s.V, en.data(), "selector_successor.weight");
  w_h_h = new_filled(host, s.wh_t, s.E, s.R, wh.data(), "selector_hidden.weight");

  // Written by ggml's writer, as a converted draft is.
  gguf_context* w = gguf_init_empty();
  gguf_set_val_str(w, "general.architecture", "dflash");
  gguf_set_val_u32(w, "dflash.selector_rank", (uint32_t)s.R);
  gguf_set_val_u32(w, "dflash.selector_top_k", (uint32_t)s.K);
  gguf_set_val_u32(w, "dflash.block_size", (uint32_t)s.block);
  gguf_set_val_u32(w, "dflash.embedding_length", (uint32_t)s.E);
  gguf_add_tensor(w, e_prev_h);
  gguf_add_tensor(w, e_next_h);
  gguf_add_tensor(w, w_h_h);
  const bool written = gguf_write_to_file(w, path.c_str(), false);
  gguf_free(w);
  if (!written) return "gguf_write_to_file " + path;

  // Loaded as llama.cpp's loader does: descriptions from the file, one device buffer for the
  // tensors, each tensor's bytes read from the file into it.
  gguf_init_params p{};
  p.no_alloc = true;
  p.ctx = &meta;
  gguf_context* g = gguf_init_from_file(path.c_str(), p);
  if (!g) return "gguf_init_from_file " + path;
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> keep(g, gguf_free);
  buf = ggml_backend_alloc_ctx_tensors_from_buft(meta, buft);
  if (!buf) return "allocating the weights' device buffer";
  ggml_backend_buffer_set_usage(buf, GGML_BACKEND_BUFFER_USAGE_WEIGHTS);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return "reopening " + path;
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> fk(f, std::fclose);
  std::vector<uint8_t> bytes_read;
  for (int64_t i = 0; i < gguf_get_n_tensors(g); ++i) {
    ggml_tensor* t = ggml_get_tensor(meta, gguf_get_tensor_name(g, i));
    bytes_read.resize(ggml_nbytes(t));
    if (std::fseek(f, (long)(gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i)), SEEK_SET) != 0 ||
        std::fread(bytes_read.data(), 1, bytes_read.size(), f) != bytes_read.size())
      return std::string("reading ") + t->name;
    ggml_backend_tensor_set(t, bytes_read.data(), 0, bytes_read.size());
  }
  e_prev = ggml_get_tensor(meta, "selector_predecessor.weight");
  e_next = ggml_get_tensor(meta, "selector_successor.weight");
  w_h = ggml_get_tensor(meta, "selector_hidden.weight");
  std::remove(path.c_str());
  return e_prev && e_next && w_h ? "" : "a selector tensor is missing after loading";
}

DraftGraph::~DraftGraph() {
  if (galloc) ggml_gallocr_free(galloc);
  if (gctx) ggml_free(gctx);
  if (wbuf) ggml_backend_buffer_free(wbuf);
  if (wctx) ggml_free(wctx);
}

namespace {

// Uniform in [-amp, amp) from (seed, i).
float hashed(uint64_t seed, uint64_t i, float amp) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + i * 0xBF58476D1CE4E5B9ull + 0x94D049BB133111EBull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return ((float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f) * amp;
}

}  // namespace

std::string DraftGraph::make(const DraftShape& s, const DraftWeights& w, ggml_backend_buffer_type_t buft,
                             uint64_t seed, bool with_peer) {
  const int64_t T = s.tokens(), vb = s.v_begin, nv = s.slice_end() - s.v_begin;
  ggml_init_params wp{8 * ggml_tensor_overhead(), nullptr, true};
  wctx = ggml_init(wp);
  lm_head = ggml_new_tensor_2d(wctx, GGML_TYPE_BF16, s.E, nv);
  ggml_set_name(lm_head, "output.weight");
  x = ggml_new_tensor_2d(wctx, GGML_TYPE_F32, s.E, T);
  ggml_set_name(x, "x");
  tokens = ggml_new_tensor_1d(wctx, GGML_TYPE_I32, T);
  ggml_set_name(tokens, "inp_tokens");
  wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
  if (!wbuf) return "allocating lm_head and the inputs";
  {
    // lm_head: logits spread like a model's (sd about 3), written 4096 rows at a time.
    std::vector<ggml_bf16_t> rows((size_t)(4096 * s.E));
    for (int64_t v0 = 0; v0 < nv; v0 += 4096) {
      const int64_t n = std::min<int64_t>(4096, nv - v0);
      for (int64_t r = 0; r < n; ++r)
        for (int64_t e = 0; e < s.E; ++e)
          rows[(size_t)(r * s.E + e)] = ggml_fp32_to_bf16(hashed(seed, (uint64_t)((vb + v0 + r) * s.E + e), 0.17f));
      ggml_backend_tensor_set(lm_head, rows.data(), (size_t)v0 * lm_head->nb[1], (size_t)n * lm_head->nb[1]);
    }
  }
  std::vector<float> xf((size_t)(s.E * T));
  for (size_t i = 0; i < xf.size(); ++i) xf[i] = hashed(seed + 1, i, 1.0f);
  ggml_backend_tensor_set(x, xf.data(), 0, ggml_nbytes(x));
  std::vector<int32_t> tok((size_t)T);
  for (size_t i = 0; i < tok.size(); ++i) tok[i] = (int32_t)((hashed(seed + 2, i, 0.5f) + 0.5f) * (float)s.V) % (int32_t)s.V;
  ggml_backend_tensor_set(tokens, tok.data(), 0, ggml_nbytes(tokens));
  anchors.resize((size_t)s.blocks);
  for (int b = 0; b < s.blocks; ++b) anchors[(size_t)b] = tok[(size_t)b * s.block];

  ggml_init_params gp{4096 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), nullptr, true};
  gctx = ggml_init(gp);
  embd = ggml_rms_norm(gctx, x, 1e-6f);
  ggml_set_name(embd, "result_norm");
  z = ggml_mul_mat(gctx, lm_head, embd);
  ggml_set_name(z, "result_output_raw");
  if (s.softcap > 0) logits = ggml_scale(gctx, ggml_tanh(gctx, ggml_scale(gctx, z, s.scale / s.softcap)), s.softcap);
  else logits = ggml_scale(gctx, z, s.scale);
  ggml_set_name(logits, "result_output");
  for (ggml_tensor* t : {embd, z, logits}) ggml_set_output(t);
  graph = ggml_new_graph_custom(gctx, 8192, false);
  ggml_build_forward_expand(graph, logits);
  if (with_peer) {
    const LlamaSelectorInputs in{logits, embd, tokens, w.e_prev, w.e_next, w.w_h};
    peer = build_llama_selector(gctx, in, s.K, s.block, s.blocks);
    ggml_set_name(peer, "dflash2_lattice");
    ggml_set_output(peer);
    ggml_build_forward_expand(graph, peer);
  }
  galloc = ggml_gallocr_new(buft);
  if (!ggml_gallocr_alloc_graph(galloc, graph)) return "allocating the graph";
  return "";
}

DfselOutputs::~DfselOutputs() {
  if (buf) ggml_backend_buffer_free(buf);
  if (ctx) ggml_free(ctx);
}

std::string DfselOutputs::make(const DraftShape& s, const std::vector<int32_t>& a, ggml_backend_buffer_type_t buft) {
  ggml_init_params p{8 * ggml_tensor_overhead(), nullptr, true};
  ctx = ggml_init(p);
  anchors = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, s.blocks);
  ggml_set_name(anchors, "anchors");
  packed = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, s.E, s.tokens());
  ggml_set_name(packed, "dfsel_packed");
  path = ggml_new_tensor_2d(ctx, GGML_TYPE_I32, s.block - 1, s.blocks);
  ggml_set_name(path, "dfsel_path");
  n_emitted = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, s.blocks);
  ggml_set_name(n_emitted, "dfsel_n_emitted");
  buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft);
  if (!buf) return "allocating dfsel's outputs";
  ggml_backend_tensor_set(anchors, a.data(), 0, ggml_nbytes(anchors));
  return "";
}

void DfselOutputs::poison() {
  for (ggml_tensor* t : {packed, path, n_emitted}) ggml_backend_tensor_memset(t, 0xff, 0, ggml_nbytes(t));
}

std::vector<float> get_f32(const ggml_tensor* t) {
  std::vector<float> v((size_t)ggml_nelements(t));
  ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
  return v;
}

std::vector<int32_t> get_i32(const ggml_tensor* t) {
  std::vector<int32_t> v((size_t)ggml_nelements(t));
  ggml_backend_tensor_get(t, v.data(), 0, ggml_nbytes(t));
  return v;
}

}  // namespace dfsel::test
