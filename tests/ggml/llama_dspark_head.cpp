#include "llama_dspark_head.h"

namespace dfsel::test {

LlamaDSparkHead build_llama_dspark_head(ggml_context* ctx, const LlamaDSparkInputs& in, int n_blocks) {
  const int64_t V = in.logits->ne[0], n_tok = in.logits->ne[1], L = n_tok / n_blocks, E = in.embd->ne[0];
  ggml_tensor* prev =
      ggml_cont_1d(ctx, ggml_view_2d(ctx, in.tokens, 1, n_blocks, (size_t)L * in.tokens->nb[0], 0), n_blocks);
  LlamaDSparkHead out;
  ggml_tensor* cat = nullptr;       // the biased logits, position-major
  ggml_tensor* cat_conf = nullptr;  // the confidences, position-major
  for (int64_t i = 0; i < L; ++i) {
    ggml_tensor* e = ggml_get_rows(ctx, in.w1, prev);  // {R, n_blocks}
    ggml_tensor* bias = ggml_mul_mat(ctx, in.w2, e);   // {V, n_blocks}
    ggml_tensor* base = ggml_view_2d(ctx, in.logits, V, n_blocks, (size_t)L * in.logits->nb[1], (size_t)i * in.logits->nb[1]);
    ggml_tensor* col = ggml_add(ctx, base, bias);
    cat = cat ? ggml_concat(ctx, cat, col, 1) : col;
    ggml_tensor* h = ggml_view_2d(ctx, in.embd, E, n_blocks, (size_t)L * in.embd->nb[1], (size_t)i * in.embd->nb[1]);
    ggml_tensor* conf = ggml_mul_mat(ctx, in.conf_w, ggml_concat(ctx, ggml_cont(ctx, h), e, 0));  // {1, n_blocks}
    if (in.conf_b) conf = ggml_add(ctx, conf, in.conf_b);
    conf = ggml_sigmoid(ctx, conf);
    cat_conf = cat_conf ? ggml_concat(ctx, cat_conf, conf, 1) : conf;
    if (i + 1 < L) {
      prev = ggml_argmax(ctx, col);
      out.chain.push_back(prev);
    }
  }
  // Position-major back to the batch's block-major order.
  ggml_tensor* logits = ggml_permute(ctx, ggml_reshape_3d(ctx, cat, V, n_blocks, L), 0, 2, 1, 3);
  out.logits = ggml_reshape_2d(ctx, ggml_cont(ctx, logits), V, n_tok);
  ggml_tensor* conf = ggml_permute(ctx, ggml_reshape_3d(ctx, cat_conf, 1, n_blocks, L), 0, 2, 1, 3);
  out.conf = ggml_repeat(ctx, ggml_reshape_2d(ctx, ggml_cont(ctx, conf), 1, n_tok), in.embd);
  return out;
}

}  // namespace dfsel::test
