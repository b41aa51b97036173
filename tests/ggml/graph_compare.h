// The packed lattice rows of a ggml graph against the selector composed from ggml's own ops
// (ggml_selector.h): element for element, candidate order aside, ties recognised.
#pragma once

#include <string>
#include <vector>

#include "ggml_selector.h"

namespace dfsel::test {

struct PackedShape {
  int64_t E = 0;
  int K = 0, block = 0, blocks = 0;
};

struct CompareStats {
  long scores = 0, compared = 0;  // scores in the lattice, and those with both ids in ggml's top-K
  long tie_swaps = 0;             // candidates at the K-th value that ggml and dfsel chose differently
  double worst = 0;               // largest |difference| / (1 + largest |score| of its row)
};

// logits_f: the logits as stored, as floats, row t at t * V. packed: the node's rows, E floats
// each. Returns "" or the first disagreement; tol is relative to 1 + the row's largest score.
std::string compare_with_ggml_ops(const PackedShape& s, const std::vector<float>& logits_f, int64_t V,
                                  const float* packed,
                                  const GgmlSelectorNodes& ref, double tol, CompareStats* stats);

}  // namespace dfsel::test
