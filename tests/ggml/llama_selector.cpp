#include "llama_selector.h"

namespace dfsel::test {

namespace {

struct Blocked {
  ggml_context* ctx;
  ggml_tensor* ids;    // I32 {K, block, n_blocks}
  ggml_tensor* unary;  // F32 {K, block, n_blocks}
  ggml_tensor* gate;   // F32 {R, block, n_blocks}
  ggml_tensor* e_prev;
  ggml_tensor* e_next;
  int64_t K, R, E, n_blocks;

  // Positions [first, first + n_pos) of every block, contiguous: {ne0, n_pos, n_blocks}.
  ggml_tensor* positions(ggml_tensor* t, int64_t first, int64_t n_pos) const {
    return ggml_cont(ctx, ggml_view_3d(ctx, t, t->ne[0], n_pos, n_blocks, t->nb[1], t->nb[2], first * t->nb[1]));
  }

  // The packed rows of positions [first, first + n_pos): predecessor ids pred (I32, n_pred per
  // position) against each position's candidates. {E, n_pos, n_blocks}.
  ggml_tensor* score_run(int64_t first, int64_t n_pos, ggml_tensor* pred) const {
    ggml_tensor* ids = positions(this->ids, first, n_pos);
    ggml_tensor* u = positions(unary, first, n_pos);
    ggml_tensor* g = positions(gate, first, n_pos);
    const int64_t n_pred = pred->ne[0] / (n_pos * n_blocks);
    ggml_tensor* succ = ggml_reshape_4d(ctx, ggml_get_rows(ctx, e_next, ggml_reshape_1d(ctx, ids, K * n_pos * n_blocks)),
                                        R, K, n_pos, n_blocks);
    ggml_tensor* prev = ggml_reshape_4d(ctx, ggml_get_rows(ctx, e_prev, pred), R, n_pred, n_pos, n_blocks);
    ggml_tensor* g4 = ggml_reshape_4d(ctx, g, R, 1, n_pos, n_blocks);
    ggml_tensor* cond = ggml_mul(ctx, prev, ggml_repeat(ctx, g4, prev));
    ggml_tensor* score = ggml_mul_mat(ctx, succ, cond);  // {K, n_pred, n_pos, n_blocks}
    if (n_pred == 1) score = ggml_repeat_4d(ctx, score, K, K, n_pos, n_blocks);
    ggml_tensor* u4 = ggml_reshape_4d(ctx, u, K, 1, n_pos, n_blocks);
    score = ggml_add(ctx, score, ggml_repeat(ctx, u4, score));
    ggml_tensor* row = ggml_concat(ctx, ggml_cast(ctx, ids, GGML_TYPE_F32),
                                   ggml_reshape_3d(ctx, score, K * K, n_pos, n_blocks), 0);
    return ggml_pad(ctx, row, (int)(E - K - K * K), 0, 0, 0);
  }
};

}  // namespace

ggml_tensor* build_llama_selector(ggml_context* ctx, const LlamaSelectorInputs& in, int K, int block,
                                  int n_blocks) {
  const int64_t V = in.logits->ne[0], T = (int64_t)block * n_blocks, E = in.embd->ne[0], R = in.e_next->ne[0];
  ggml_tensor* ids = ggml_top_k(ctx, in.logits, K);  // I32 {K, T}
  ggml_tensor* unary = ggml_reshape_2d(ctx, ggml_get_rows(ctx, ggml_reshape_3d(ctx, in.logits, 1, V, T), ids), K, T);
  ggml_tensor* gate = ggml_mul_mat(ctx, in.w_h, in.embd);  // {R, T}

  Blocked b{ctx,
            ggml_reshape_3d(ctx, ids, K, block, n_blocks),
            ggml_reshape_3d(ctx, unary, K, block, n_blocks),
            ggml_reshape_3d(ctx, gate, R, block, n_blocks),
            in.e_prev,
            in.e_next,
            K,
            R,
            E,
            n_blocks};

  ggml_tensor* packed = ggml_fill(ctx, ggml_new_tensor_3d(ctx, GGML_TYPE_F32, E, 1, n_blocks), 0.0f);
  if (block > 1) {
    // Position 1: the anchor (token 0 of each block) is the one predecessor.
    ggml_tensor* anchors = ggml_cont_1d(ctx, ggml_view_2d(ctx, in.tokens, 1, n_blocks, block * in.tokens->nb[0], 0),
                                        n_blocks);
    packed = ggml_concat(ctx, packed, b.score_run(1, 1, anchors), 1);
  }
  if (block > 2) {
    // Positions 2 .. block - 1: the previous position's candidates.
    ggml_tensor* pred = ggml_reshape_1d(ctx, b.positions(b.ids, 1, block - 2), (int64_t)K * (block - 2) * n_blocks);
    packed = ggml_concat(ctx, packed, b.score_run(2, block - 2, pred), 1);
  }
  return ggml_reshape_2d(ctx, packed, E, (int64_t)block * n_blocks);
}

}  // namespace dfsel::test
