#include "ggml_selector.h"

namespace dfsel::test {

namespace {

ggml_tensor* as_f32(ggml_context* ctx, ggml_tensor* t) {
  return t->type == GGML_TYPE_F32 ? t : ggml_cast(ctx, t, GGML_TYPE_F32);
}

}  // namespace

GgmlSelectorNodes build_ggml_selector(ggml_context* ctx, ggml_tensor* logits, ggml_tensor* hidden,
                                      ggml_tensor* anchors, ggml_tensor* e_prev, ggml_tensor* e_next,
                                      ggml_tensor* w_h, int K, int block, float scale, float softcap) {
  const int64_t V = logits->ne[0], T = logits->ne[1], R = e_next->ne[0];
  const int64_t n_blocks = T / block;
  ggml_tensor* z = as_f32(ctx, logits);
  GgmlSelectorNodes out{};
  out.ids = ggml_top_k(ctx, z, K);

  // Unary: each candidate's logit picked from its row ({1, V, T} view: one value per "row"),
  // then transformed: c * tanh(m * z / c), or m * z.
  ggml_tensor* z3 = ggml_view_3d(ctx, z, 1, V, T, z->nb[0], z->nb[1], 0);
  ggml_tensor* u = ggml_get_rows(ctx, z3, out.ids);  // {1, K, T}
  if (softcap > 0) u = ggml_scale(ctx, ggml_tanh(ctx, ggml_scale(ctx, u, scale / softcap)), softcap);
  else u = ggml_scale(ctx, u, scale);
  u = ggml_reshape_3d(ctx, u, K, 1, T);

  // Gate g = W_h . h, in F32 (a quantised or half W_h would make ggml round h to its dot type).
  ggml_tensor* g = ggml_mul_mat(ctx, as_f32(ctx, w_h), as_f32(ctx, hidden));  // {R, T}

  ggml_tensor* flat = ggml_reshape_1d(ctx, out.ids, (int64_t)K * T);
  ggml_tensor* en = ggml_reshape_3d(ctx, ggml_get_rows(ctx, e_next, flat), R, K, T);
  ggml_tensor* ep = ggml_reshape_3d(ctx, ggml_get_rows(ctx, e_prev, flat), R, K, T);

  // Rows with a drafted predecessor: token t = s + 1 against the candidates of token s.
  const int64_t S = T - 1;
  ggml_tensor* ep_prev = ggml_view_3d(ctx, ep, R, K, S, ep->nb[1], ep->nb[2], 0);
  ggml_tensor* en_next = ggml_view_3d(ctx, en, R, K, S, en->nb[1], en->nb[2], en->nb[2]);
  ggml_tensor* g_next = ggml_cont(ctx, ggml_view_3d(ctx, g, R, 1, S, g->nb[1], g->nb[1], g->nb[1]));
  ggml_tensor* u_next = ggml_cont(ctx, ggml_view_3d(ctx, u, K, 1, S, u->nb[1], u->nb[2], u->nb[2]));
  ggml_tensor* a = ggml_mul(ctx, ggml_cont(ctx, ep_prev), g_next);          // Ep[i] * g: {R, K_i, S}
  out.rest = ggml_add(ctx, ggml_mul_mat(ctx, ggml_cont(ctx, en_next), a), u_next);  // {K_j, K_i, S}

  // Row p = 1 of each block: the anchor's E_prev row is the only predecessor.
  ggml_tensor* ep_anchor = ggml_get_rows(ctx, e_prev, anchors);  // {R, n_blocks}
  ggml_tensor* g1 = ggml_cont(ctx, ggml_view_2d(ctx, g, R, n_blocks, g->nb[1] * block, g->nb[1]));
  ggml_tensor* a1 = ggml_reshape_3d(ctx, ggml_mul(ctx, ep_anchor, g1), R, 1, n_blocks);
  ggml_tensor* en1 = ggml_cont(ctx, ggml_view_3d(ctx, en, R, K, n_blocks, en->nb[1], en->nb[2] * block, en->nb[2]));
  ggml_tensor* u1 = ggml_cont(ctx, ggml_view_3d(ctx, u, K, 1, n_blocks, u->nb[1], u->nb[2] * block, u->nb[2]));
  out.first = ggml_add(ctx, ggml_mul_mat(ctx, en1, a1), u1);  // {K, 1, n_blocks}
  return out;
}

}  // namespace dfsel::test
