// The selector as a node of a ggml graph on ggml's CPU backend (include/dfsel/ggml.h): the
// graph goes from the draft's hidden states through an lm_head to the logits and on to
// llama.cpp's packed lattice rows, in one ggml_graph_compute.
//
//   ggml_graph [--vocab V] [--embd E] [--blocks N] [--threads T]
//
// The weights and hidden states are synthetic; the program prints, per block, the tokens a
// greedy walk over the packed rows drafts (what llama.cpp's DFlash2 walker reads).
#include <ggml-cpu.h>
#include <ggml.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "dfsel/ggml.h"

namespace {

// Seeded values in [-1, 1).
float value(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  z ^= z >> 29;
  return float(double(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// A named F32 tensor {ne0, ne1} of ctx filled with scale * value(seed, i).
ggml_tensor* filled(ggml_context* ctx, const char* name, int64_t ne0, int64_t ne1, uint64_t seed, float scale) {
  ggml_tensor* t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
  ggml_set_name(t, name);
  float* d = static_cast<float*>(t->data);
  for (int64_t i = 0; i < ne0 * ne1; ++i) d[i] = scale * value(seed, uint64_t(i));
  return t;
}

int run(int64_t V, int64_t E, int32_t n_blocks, int n_threads) {
  const int32_t R = 256, K = 16, B = 16;
  const int64_t T = int64_t(n_blocks) * B;
  ggml_init_params params{};
  params.mem_size = size_t(2 * V * R + E * R + E * V + 2 * V * T + 2 * E * T) * 4 + (64u << 20);
  ggml_context* ctx = ggml_init(params);
  if (!ctx) return 1;
  ggml_tensor* e_prev = filled(ctx, "selector_predecessor.weight", R, V, 1, 0.1f);
  ggml_tensor* e_next = filled(ctx, "selector_successor.weight", R, V, 2, 0.1f);
  ggml_tensor* w_h = filled(ctx, "selector_hidden.weight", E, R, 3, 0.03f);
  ggml_tensor* lm_head = filled(ctx, "output.weight", E, V, 4, 0.1f);
  ggml_tensor* hidden = filled(ctx, "result_norm", E, T, 5, 1.0f);
  ggml_tensor* anchors = ggml_new_tensor_1d(ctx, GGML_TYPE_I32, n_blocks);
  ggml_set_name(anchors, "anchors");
  for (int32_t b = 0; b < n_blocks; ++b) static_cast<int32_t*>(anchors->data)[b] = int32_t((b * 7919 + 17) % V);

  // docs/ggml.md: graph
  // Once, when the draft is loaded: the op holds one plan per thread it may use.
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{V, E, R, K, B, 1.0f, 0.0f, n_blocks};
  desc.shard = dfsel_shard{0, 1, 0, V};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.n_threads = n_threads;  // the most graph threads the node uses
  char msg[512];
  if (dfsel_ggml_tensor(e_prev, &desc.e_prev, msg, sizeof msg) != DFSEL_SUCCESS ||
      dfsel_ggml_tensor(e_next, &desc.e_next, msg, sizeof msg) != DFSEL_SUCCESS ||
      dfsel_ggml_tensor(w_h, &desc.w_h, msg, sizeof msg) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "ggml_graph: %s\n", msg);
    return 1;
  }
  dfsel_ggml_op* op = nullptr;
  if (dfsel_ggml_op_create(&desc, &op, msg, sizeof msg) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "ggml_graph: dfsel_ggml_op_create: %s\n", msg);
    return 1;
  }

  // Every step: the draft graph, hidden -> logits -> packed lattice.
  ggml_tensor* logits = ggml_mul_mat(ctx, lm_head, hidden);  // {V, T}
  ggml_set_name(logits, "result_output");
  ggml_tensor* packed = nullptr;  // F32 {E, T}: llama.cpp's packed lattice rows
  if (dfsel_ggml_select(ctx, op, logits, hidden, anchors, &packed) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "ggml_graph: dfsel_ggml_select: %s\n", dfsel_ggml_op_last_error(op));
    return 1;
  }
  ggml_cgraph* gf = ggml_new_graph(ctx);
  ggml_build_forward_expand(gf, packed);
  if (ggml_graph_compute_with_ctx(ctx, gf, n_threads) != GGML_STATUS_SUCCESS || dfsel_ggml_op_check(op) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "ggml_graph: the graph failed: %s\n", dfsel_ggml_op_last_error(op));
    return 1;
  }
  // end docs/ggml.md: graph

  // Read the rows as llama.cpp's walker does: row p holds K candidate ids as floats, then the
  // K x K scores, predecessor i and candidate j at K + i * K + j.
  for (int32_t b = 0; b < n_blocks; ++b) {
    std::printf("block %d, anchor %d, greedy over the packed rows:", b, static_cast<int32_t*>(anchors->data)[b]);
    int prev = 0;
    for (int32_t p = 1; p < B; ++p) {
      const float* row = reinterpret_cast<const float*>(static_cast<const char*>(packed->data) + (b * B + p) * packed->nb[1]);
      int best = 0;
      for (int j = 1; j < K; ++j)
        if (row[K + prev * K + j] > row[K + prev * K + best]) best = j;
      std::printf(" %d", int(row[best]));
      prev = best;
    }
    std::printf("\n");
  }
  dfsel_ggml_op_destroy(op);
  ggml_free(ctx);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 32000, E = 512;
  int32_t blocks = 2;
  int threads = 2;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--vocab") V = std::atoll(argv[i + 1]);
    else if (a == "--embd") E = std::atoll(argv[i + 1]);
    else if (a == "--blocks") blocks = std::atoi(argv[i + 1]);
    else if (a == "--threads") threads = std::atoi(argv[i + 1]);
  }
  if (V < 16 || E < 272 || blocks < 1 || threads < 1) {
    std::fprintf(stderr, "ggml_graph: need --vocab >= 16, --embd >= 272 (K + K*K), --blocks >= 1, --threads >= 1\n");
    return 2;
  }
  return run(V, E, blocks, threads);
}
