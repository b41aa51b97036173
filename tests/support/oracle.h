// A brute-force oracle written straight from SPEC sections 2, 3 and 5, in double precision, sharing
// no code with the reference: every full row sorted, every score summed from the definition.
#pragma once

#include <vector>

#include "problem.h"

namespace dfsel::test {

struct Oracle {
  std::vector<int32_t> cand_ids;  // [nd][K]
  std::vector<double> unary;      // [nd][K]
  std::vector<double> scores;     // [nd][K][K]
};

Oracle oracle_lattice(const Case& c, const Data& d);

// Candidate ids exactly, unary and scores within tol of the largest magnitude of their row.
std::string compare_lattice(const Case& c, const Oracle& o, const Result& r, double tol);

// Compares a run with the oracle: ids exactly, unary and scores within tol (relative to the
// largest magnitude of the row), and the greedy path by the oracle's scores; a step whose two
// best oracle scores lie within tol is a near-tie: either choice is accepted and the rest of
// that block is not compared. Returns "" or the first mismatch.
std::string compare_with_oracle(const Case& c, const Oracle& o, const Result& r, float p_min, double tol);

}  // namespace dfsel::test
