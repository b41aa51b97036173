// A brute-force DSpark oracle written from the definition (docs/dspark.md) in double
// precision, sharing none of the library's arithmetic: every l of every step summed term by
// term, the normaliser from exp and log, the confidence from its sigmoid. Only the Gumbel
// noise, which the contract keys by (seed, block, step, token id), comes from the library.
#pragma once

#include <string>

#include "dspark_problem.h"

namespace dfsel::test {

// Compares a run with the oracle along the run's own chain: tokens and draft ids exactly, the
// chosen l, probs, log_norm and confidence within tol (relative to 1 + their magnitude). A
// step whose two best keys lie within tol of each other (not equal), or whose confidence lies
// within tol of p_min, may go either way: the rest of that block is not compared. "" or the
// first mismatch.
std::string compare_dspark_with_oracle(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                                       const DSparkResult& got, double tol);

}  // namespace dfsel::test
