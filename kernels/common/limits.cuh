// The sizes the kernels are built for: one constant each, read by validation and kernels.
#pragma once

namespace dfsel {

constexpr int kMaxTopK = 64;            // K: the largest template bucket (kernels/dispatch.cuh, kernels/topk/)
constexpr int kMaxCodebookRank = 1024;  // R: the lattice stages one R chunk of every row
constexpr int kMaxMarkovRank = 1024;    // DSpark's R: e_k lives in a per-block scratch of R floats
constexpr int kMaxDraftSteps = 1024;    // DSpark's N: steps are counted in the record's 32-bit keys

}  // namespace dfsel
