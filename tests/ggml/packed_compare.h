// Two sets of llama.cpp's packed lattice rows compared as a walker would read them: llama.cpp's
// in-graph selector's (llama_selector.h) and dfsel's. Per drafted row: the same candidate set
// (ids at the K-th logit may differ: a peer breaks ties its own way), every score matched by
// predecessor and candidate id within a tolerance, padding zero; then the greedy walks of both,
// equal except past a near-tie.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace dfsel::test {

struct PackedLayout {
  int64_t E = 0;  // floats a row
  int K = 0, block = 0, blocks = 0;
};

struct PackedStats {
  long scores = 0, compared = 0;  // scores in the lattice, and those matched by id in both
  long tie_swaps = 0;             // candidates at the K-th value that the two chose differently
  double worst_rel = 0;           // largest |a - b| / the row's largest |score|
  double largest_row = 0;         // the largest |score| of any row
  long walk_steps = 0;            // greedy steps compared
  long near_ties = 0;             // blocks whose walks parted at a near-tie (not compared further)
};

// A score's allowed difference: (block, p, candidate id, predecessor id or -1 at p = 1, the row's
// largest |score|) -> tolerance.
using ScoreTolerance = std::function<double(int b, int p, int32_t cand, int32_t pred, double row_max)>;

// peer and mine: blocks * block rows of E floats. logits: the values the candidates were ranked
// by (row t at t * V), to tell a tie at the K-th value. Returns "" or the first disagreement.
std::string compare_packed(const PackedLayout& s, const float* peer, const float* mine,
                           const std::vector<float>& logits, int64_t V, const ScoreTolerance& tol,
                           PackedStats* st);

// How far llama.cpp's in-graph selector computed by ggml-cuda may be from dfsel: 2^-8 of the
// row's largest |score|. ggml-cuda multiplies on tensor cores at these sizes (TF32 operands in
// the lattice's F32 product, the gate's hidden states rounded to BF16 or TF32), and dfsel reads
// the block types other than Q8_0 widened to BF16: each a relative rounding of 2^-9 to 2^-11 on
// the terms. Measured on one H200: at most 6.7e-4 of the row (tests/ggml_cuda/in_graph_test.cpp).
constexpr double kPeerRelative = 1.0 / 256;
inline double peer_tolerance(int, int, int32_t, int32_t, double row_max) { return kPeerRelative * row_max + 1e-6; }

// The greedy walk over packed rows (the walker of llama.cpp): tokens of each block, L each.
std::vector<int32_t> walk_packed(const PackedLayout& s, const float* rows);

// The walks of peer and mine: equal, or parted where mine's two best scores of that step lie
// within tol of each other (counted; the rest of that block not compared).
std::string compare_walks(const PackedLayout& s, const float* peer, const float* mine, double tol,
                          PackedStats* st);

}  // namespace dfsel::test
