// A brute-force DSpark oracle written from the definition (docs/dspark.md) in double
// precision, sharing none of the library's arithmetic: every l of every step summed term by
// term, the normaliser from exp and log, the confidence from its sigmoid. Only the Gumbel
// noise, which the contract keys by (seed, block, step, token id), comes from the library.
#pragma once

#include <string>

#include "dspark_problem.h"

namespace dfsel::test {

// Steps of compared runs: those the runs reached (a block's drafted steps and the step that
// stopped it), and of those the ones the oracle judged. A caller adds them up over its runs to
// see that near-ties did not leave most steps unjudged.
struct OracleTally {
  int64_t steps = 0, judged = 0;
};

// Compares a run with the oracle along the run's own chain: tokens and draft ids exactly, the
// chosen l, probs, log_norm and confidence within tol (relative to 1 + their magnitude;
// log_norm may be infinite where it lies beyond float's range). A step may go either way, and
// the rest of that block is not compared, when its confidence lies within tol of p_min, or when
// a key other than the best lies within tol of it (relative to 1 + its magnitude) and is not
// tied with it for a reason no rounding changes: both infinite, or the same base logit, W2 row
// and scale (a backend computes a token's l from those alone; the lowest id wins). An exact tie
// of other keys (one that only double rounding made) may go either way too. "" or the first
// mismatch, in block order; the blocks are compared on several threads.
std::string compare_dspark_with_oracle(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                                       const DSparkResult& got, double tol, OracleTally* tally = nullptr);

}  // namespace dfsel::test
