/* Runs one selector step on the CPU backend for a tiny synthetic problem through the C API
 * and prints the drafted path. Exits non-zero on any failure. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <dfsel/dfsel.h>

enum { V = 64, E = 32, R = 8, K = 4, BLOCK = 4, BLOCKS = 2, L = BLOCK - 1, TOKENS = BLOCKS * BLOCK };

static uint32_t rng = 12345u;

/* A deterministic value in [-1, 1). */
static float next_value(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)(rng >> 8) / (float)(1u << 23) - 1.0f;
}

static dfsel_tensor matrix_f32(const float* data, int64_t ne0, int64_t ne1) {
  return dfsel_tensor_2d(data, DFSEL_TYPE_F32, ne0, ne1, (size_t)ne0 * sizeof(float));
}

int main(void) {
  static float e_prev[V * R], e_next[V * R], w_h[R * E], logits[TOKENS * V], hidden[TOKENS * E];
  static float packed[TOKENS * E];
  int32_t anchors[BLOCKS] = {3, 17};
  int32_t cand_ids[BLOCKS * L * K], path[BLOCKS * L], n_emitted[BLOCKS];
  size_t i;
  for (i = 0; i < sizeof e_prev / sizeof e_prev[0]; ++i) e_prev[i] = next_value();
  for (i = 0; i < sizeof e_next / sizeof e_next[0]; ++i) e_next[i] = next_value();
  for (i = 0; i < sizeof w_h / sizeof w_h[0]; ++i) w_h[i] = next_value();
  for (i = 0; i < sizeof logits / sizeof logits[0]; ++i) logits[i] = 4.0f * next_value();
  for (i = 0; i < sizeof hidden / sizeof hidden[0]; ++i) hidden[i] = next_value();

  printf("dfsel %d (%s)\n", dfsel_version(), dfsel_status_string(DFSEL_SUCCESS));
  if (dfsel_version() != DFSEL_VERSION) {
    fprintf(stderr, "header version %d, library version %d\n", DFSEL_VERSION, dfsel_version());
    return 1;
  }

  dfsel_plan_desc desc = {0};
  desc.config.n_vocab = V;
  desc.config.n_embd = E;
  desc.config.codebook_rank = R;
  desc.config.top_k = K;
  desc.config.block_size = BLOCK;
  desc.config.logit_scale = 1.0f;
  desc.config.max_blocks = BLOCKS;
  desc.shard.rank = 0;
  desc.shard.n_ranks = 1;
  desc.shard.v_begin = 0;
  desc.shard.v_end = V;
  desc.backend = DFSEL_BACKEND_CPU;
  desc.placement = DFSEL_CODEBOOKS_REPLICATED;
  desc.e_prev = matrix_f32(e_prev, R, V);
  desc.e_next = matrix_f32(e_next, R, V);
  desc.w_h = matrix_f32(w_h, E, R);

  char msg[256];
  dfsel_plan* plan = NULL;
  dfsel_status s = dfsel_plan_create(&desc, &plan, msg, sizeof msg);
  if (s != DFSEL_SUCCESS) {
    fprintf(stderr, "dfsel_plan_create: %s: %s\n", dfsel_status_string(s), msg);
    return 1;
  }
  if (dfsel_plan_backend(plan) != DFSEL_BACKEND_CPU) {
    fprintf(stderr, "the plan does not run on the CPU backend\n");
    dfsel_plan_destroy(plan);
    return 1;
  }

  dfsel_inputs in = {0};
  in.logits = matrix_f32(logits, V, TOKENS);
  in.hidden = matrix_f32(hidden, E, TOKENS);
  in.anchors = anchors;
  in.n_blocks = BLOCKS;
  dfsel_outputs out = {0};
  out.cand_ids = cand_ids;
  out.path = path;
  out.n_emitted = n_emitted;
  out.packed = packed;

  s = dfsel_plan_run(plan, &in, &out, NULL);
  if (s == DFSEL_SUCCESS) s = dfsel_plan_check(plan, NULL);
  if (s != DFSEL_SUCCESS) {
    fprintf(stderr, "dfsel_plan_run: %s: %s\n", dfsel_status_string(s), dfsel_plan_last_error(plan));
    dfsel_plan_destroy(plan);
    return 1;
  }

  int bad = 0;
  for (int b = 0; b < BLOCKS; ++b) {
    printf("block %d: anchor %d, %d emitted:", b, anchors[b], n_emitted[b]);
    if (n_emitted[b] < 0 || n_emitted[b] > L) bad = 1;
    for (int p = 0; p < L; ++p) {
      const int32_t t = path[b * L + p];
      printf(" %d", t);
      if (p < n_emitted[b] ? (t < 0 || t >= V) : t != -1) bad = 1;
      /* Every drafted token is one of its position's candidates. */
      if (p < n_emitted[b]) {
        int found = 0;
        for (int j = 0; j < K; ++j) found |= cand_ids[(b * L + p) * K + j] == t;
        if (!found) bad = 1;
      }
    }
    printf("\n");
  }
  dfsel_plan_destroy(plan);
  if (bad) {
    fprintf(stderr, "the drafted path is not consistent with the candidates\n");
    return 1;
  }
  return 0;
}
