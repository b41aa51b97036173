// llama.cpp's in-graph DFlash2 selector (src/models/dflash.cpp, build_dflash2_selector), the
// peer dfsel replaces: the same ggml ops in the same order, so that a backend computes what
// llama.cpp's draft graph computes. Candidates by ggml_top_k of the logits as the graph holds
// them (the logit scale and softcap already applied), unary scores gathered from them, the
// gate as one ggml_mul_mat of selector_hidden, and per run of positions the two codebooks'
// rows gathered, the predecessors multiplied by the gate and one batched ggml_mul_mat against
// the successors; position 1 alone (its predecessor is the anchor, repeated over the K rows),
// positions 2 .. block - 1 in one run. The result is llama.cpp's packed lattice: one row of
// n_embd floats a token, row 0 of each block zero, row p = [K ids as float | K x K scores |
// zeros].
#pragma once

#include <ggml.h>

namespace dfsel::test {

struct LlamaSelectorInputs {
  ggml_tensor* logits;  // F32 {V, n_tokens}: t_logits, transformed as the draft's graph left them
  ggml_tensor* embd;    // F32 {n_embd, n_tokens}: t_embd, the hidden state after the output norm
  ggml_tensor* tokens;  // I32 {n_tokens}: the batch's tokens; token b * block is block b's anchor
  ggml_tensor* e_prev;  // {R, V} selector_predecessor.weight, any type ggml_get_rows reads
  ggml_tensor* e_next;  // {R, V} selector_successor.weight
  ggml_tensor* w_h;     // {n_embd, R} selector_hidden.weight
};

// The packed rows F32 {n_embd, n_tokens} of n_blocks blocks of `block` tokens, K candidates.
ggml_tensor* build_llama_selector(ggml_context* ctx, const LlamaSelectorInputs& in, int K, int block,
                                  int n_blocks);

}  // namespace dfsel::test
