// The DSpark chain in its plainest form (docs/dspark.md): one rank that holds the whole draft
// vocabulary, every block, every step, every token id in turn, composed of the rules in
// kernels/common/dspark_math.cuh. It is the specification the CPU backend (any shard count)
// must match bit for bit.
#pragma once

#include "dfsel/dspark.h"

namespace dfsel::ref {

// desc describes one rank that holds [0, n_vocab) with weights of the types the kernels read
// (F32, F16, BF16, Q8_0: K-quants widened first) and a valid description; in holds valid
// inputs (anchors in range). Writes every output that out names.
void dspark_chain(const dfsel_dspark_plan_desc& desc, const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out);

}  // namespace dfsel::ref
