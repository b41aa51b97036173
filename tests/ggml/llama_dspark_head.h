// llama.cpp's in-graph DSpark head (src/models/dflash.cpp, build_dspark_markov_head), the peer of
// dfsel's DSpark chain, with the same ggml ops in the same order. Position i of every block (a
// strided view of the logits) gets markov_w2 times markov_w1's row of the previous token (the
// block's anchor, its token 0, at i = 0) added to its logits, and their argmax is the previous
// token of position i + 1; position i's confidence is sigmoid(conf_proj . [t_embd's row ; that
// markov_w1 row] + conf_proj.bias). The biased logits come back block-major as the logits were,
// the confidences repeated along rows of n_embd (what llama.cpp reads as t_h_nextn).
#pragma once

#include <ggml.h>

#include <vector>

namespace dfsel::test {

struct LlamaDSparkInputs {
  ggml_tensor* logits;  // F32 {V, n_tokens}: t_logits, n_tokens / n_blocks positions a block
  ggml_tensor* embd;    // F32 {n_embd, n_tokens}: t_embd
  ggml_tensor* tokens;  // I32 {n_tokens}: the batch's tokens; token 0 of each block is its anchor
  ggml_tensor* w1;      // {R, V} markov_w1.weight
  ggml_tensor* w2;      // {R, V} markov_w2.weight
  ggml_tensor* conf_w;  // {n_embd + R, 1} conf_proj.weight
  ggml_tensor* conf_b;  // {1} conf_proj.bias, or nullptr
};

struct LlamaDSparkHead {
  ggml_tensor* logits = nullptr;    // F32 {V, n_tokens}: the biased logits
  ggml_tensor* conf = nullptr;      // F32 {n_embd, n_tokens}: each position's confidence along its row
  std::vector<ggml_tensor*> chain;  // I32 {n_blocks}: the argmax of every position but the last
};

LlamaDSparkHead build_llama_dspark_head(ggml_context* ctx, const LlamaDSparkInputs& in, int n_blocks);

}  // namespace dfsel::test
