// The DSpark chain in its plainest form (docs/dspark.md): one rank that holds the whole draft
// vocabulary, every block, every step, every token id in turn, composed of the rules in
// kernels/common/dspark_math.cuh. It is the specification the CPU backend (any shard count)
// must match bit for bit.
#pragma once

#include "dfsel/dspark.h"

namespace dfsel::ref {

// An id the chain would have indexed W1 by that lies outside [0, n_target_vocab): an anchor,
// or the d2t entry of a chosen draft id (a map changed after it was checked). block < 0: none.
struct ChainFault {
  int32_t block = -1, step = 0;  // step 0: the anchor
  int32_t draft_id = -1, id = 0;  // the chosen draft id (step > 0) and the id it maps to
};

// desc describes one rank that holds [0, n_vocab) with weights of the types the kernels read
// (F32, F16, BF16, Q8_0: the other block types widened first) and a valid description. Writes every output
// that out names. Every id it indexes W1 by is checked first: the first out of range stops
// the run there (no row read) and is returned.
ChainFault dspark_chain(const dfsel_dspark_plan_desc& desc, const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out);

}  // namespace dfsel::ref
