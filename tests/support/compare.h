// GPU-against-CPU comparisons: candidates bitwise, scores to float rounding, paths exactly
// except at near-ties (SPEC section 5.6: a step whose two best scores lie within rounding
// may go either way).
#pragma once

#include <string>

#include "oracle.h"
#include "problem.h"

namespace dfsel::test {

// The CPU result as an oracle (ids, unary, scores), for compare_with_oracle.
Oracle as_oracle(const Result& cpu);

// Greedy: compare_with_oracle against the CPU result.
std::string compare_greedy(const Case& c, const Result& cpu, const Result& gpu, float p_min, double tol);

// Sampling: ids and scores as above, q rows within tol, and the drawn tokens equal unless the
// draw lies within tol of a boundary of the CPU's cumulative q (then the block is not compared
// further).
std::string compare_sampled(const Case& c, const Result& cpu, const Result& gpu, float p_min, uint64_t seed, double tol);

}  // namespace dfsel::test
