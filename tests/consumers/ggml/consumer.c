/* Links dfsel::ggml next to ggml and computes one selector node in a ggml CPU graph; exits
 * non-zero unless every packed row has K distinct candidate ids inside the vocabulary. */
#include <dfsel/ggml.h>
#include <ggml-cpu.h>
#include <ggml.h>
#include <stdio.h>
#include <string.h>

enum { V = 500, E = 64, R = 32, K = 4, B = 4, N_BLOCKS = 2, T = N_BLOCKS * B };

static void fill_uniform(struct ggml_tensor* t, unsigned seed) {
  float* d = (float*)t->data;
  int64_t i, n = t->ne[0] * t->ne[1];
  for (i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    d[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
  }
}

int main(void) {
  struct ggml_init_params params = {64u << 20, NULL, false};
  struct ggml_context* ctx = ggml_init(params);
  struct ggml_tensor *ep, *en, *wh, *logits, *hidden, *anchors, *packed = NULL;
  struct ggml_cgraph* gf;
  dfsel_plan_desc desc;
  dfsel_ggml_op* op = NULL;
  char msg[512];
  int b, p, j, i, bad = 0;
  if (!ctx) return 1;
  ep = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, R, V);
  en = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, R, V);
  wh = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, E, R);
  logits = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, V, T);
  hidden = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, E, T);
  anchors = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, N_BLOCKS);
  fill_uniform(ep, 1);
  fill_uniform(en, 2);
  fill_uniform(wh, 3);
  fill_uniform(logits, 4);
  fill_uniform(hidden, 5);
  ((int32_t*)anchors->data)[0] = 7;
  ((int32_t*)anchors->data)[1] = 400;

  memset(&desc, 0, sizeof desc);
  desc.config.n_vocab = V;
  desc.config.n_embd = E;
  desc.config.codebook_rank = R;
  desc.config.top_k = K;
  desc.config.block_size = B;
  desc.config.logit_scale = 1.0f;
  desc.config.max_blocks = N_BLOCKS;
  desc.shard.n_ranks = 1;
  desc.shard.v_end = V;
  desc.backend = DFSEL_BACKEND_CPU;
  desc.n_threads = 2;
  if (dfsel_ggml_tensor(ep, &desc.e_prev, msg, sizeof msg) || dfsel_ggml_tensor(en, &desc.e_next, msg, sizeof msg) ||
      dfsel_ggml_tensor(wh, &desc.w_h, msg, sizeof msg) || dfsel_ggml_op_create(&desc, &op, msg, sizeof msg)) {
    fprintf(stderr, "consumer: %s\n", msg);
    return 1;
  }
  if (dfsel_ggml_select(ctx, op, logits, hidden, anchors, &packed) != DFSEL_SUCCESS) {
    fprintf(stderr, "consumer: %s\n", dfsel_ggml_op_last_error(op));
    return 1;
  }
  gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, packed);
  if (ggml_graph_compute_with_ctx(ctx, gf, 2) != GGML_STATUS_SUCCESS || dfsel_ggml_op_check(op) != DFSEL_SUCCESS) {
    fprintf(stderr, "consumer: compute failed: %s\n", dfsel_ggml_op_last_error(op));
    return 1;
  }
  for (b = 0; b < N_BLOCKS; ++b) {
    for (p = 1; p < B; ++p) {
      const float* row = (const float*)((const char*)packed->data + (size_t)(b * B + p) * packed->nb[1]);
      for (j = 0; j < K; ++j) {
        if (!(row[j] >= 0 && row[j] < V)) bad = 1;
        for (i = 0; i < j; ++i) bad |= row[i] == row[j];
      }
    }
  }
  printf("consumer: dfsel::ggml %d.%d with ggml, packed rows %s\n", DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR,
         bad ? "WRONG" : "ok");
  dfsel_ggml_op_destroy(op);
  ggml_free(ctx);
  return bad;
}
