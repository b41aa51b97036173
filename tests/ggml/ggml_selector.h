// The selector of SPEC sections 2 and 3 composed from ggml's own ops, the independent reference
// of the graph tests: ggml_top_k for the candidates, ggml_get_rows for their logits and
// codebook rows, ggml_scale / ggml_tanh for the transform, ggml_mul_mat for the gate and the
// lattice, ggml_mul and ggml_add for the rest. Nothing of dfsel is used.
#pragma once

#include <ggml.h>

namespace dfsel::test {

struct GgmlSelectorNodes {
  ggml_tensor* ids;     // I32 {K, T}: each row's top-K ids, in no particular order
  ggml_tensor* rest;    // F32 {K, K, T - 1}: slice s is token s + 1 with predecessors the
                        // candidates of token s: element (j, i) = S(i, j) (p >= 2 rows)
  ggml_tensor* first;   // F32 {K, 1, n_blocks}: S(anchor, j) of each block's row p = 1
};

// logits {V, T}, hidden {E, T} (any type ggml casts to F32, padded rows allowed), anchors I32
// {n_blocks}, e_prev / e_next {R, V}, w_h {E, R} (types ggml_get_rows reads).
GgmlSelectorNodes build_ggml_selector(ggml_context* ctx, ggml_tensor* logits, ggml_tensor* hidden,
                                      ggml_tensor* anchors, ggml_tensor* e_prev, ggml_tensor* e_next,
                                      ggml_tensor* w_h, int K, int block, float scale, float softcap);

}  // namespace dfsel::test
