// Hand-built selector problems with special values (suites Numerics and GpuNumerics): logits
// that are all -inf, all NaN, all equal, huge, subnormal; Q8_0 codebooks with extreme scales;
// softcap and logit_scale on huge inputs. The gate is g = 0 or g = e_kGateR (a one-hot vector),
// so every score is u[j] plus one rounded product and the expected outcome follows from
// SPEC sections 2 and 3 by hand (expected_outcome); kOnes (g = 1 for every r) is for overflow checks
// against the oracle.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "problem.h"

namespace dfsel::test {

enum class Gate { kZero, kOneHot, kOnes };
constexpr int kGateR = 5;

struct SpecialProblem {
  std::string name;
  Case c;
  Data d;
  Gate gate = Gate::kOneHot;
  std::string str() const;  // name and shape, for traces
};

// Sizes: the special values of a row sit at ids V - 40 + perm(k, row), after a background.
//   kNarrow  V = 40, 2 blocks: everything is special;
//   kWide    V = 50000, 2 blocks: on the GPU each row is split over several CTAs whose
//            lists are merged by the last one;
//   kTall    V = 50000, 48 blocks: few splits, so a CTA folds several tiles and the specials
//            arrive in its last tile, against a warm list.
enum class Size { kNarrow, kWide, kTall };

// K = 8, R = 32, block 4 (L = 3). Types are those of the logits unless named.
SpecialProblem all_neg_inf(dfsel_type logits_t, float softcap, Size size = Size::kNarrow);
SpecialProblem all_nan(dfsel_type logits_t, Size size = Size::kNarrow);
// NaN everywhere but three -inf, one 2.5 and one large negative logit per row.
SpecialProblem nan_below_neg_inf(dfsel_type logits_t, Size size = Size::kNarrow);
SpecialProblem all_equal(dfsel_type logits_t, float value, float scale, Gate gate, Size size = Size::kNarrow);
// +0 and -0 alternating: every logit of the row is the same value.
SpecialProblem signed_zeros(dfsel_type logits_t, Size size = Size::kNarrow);
// ±1e30 .. ±max-finite of the type, +inf twice, -inf, over a background of small negatives.
SpecialProblem huge_logits(dfsel_type logits_t, float scale, float softcap, Size size = Size::kNarrow);
// Subnormals of the type (both signs), ±0 and the smallest normal, over a background <= -1.
// The gate is zero, so scores are the unary values themselves.
SpecialProblem subnormal_logits(dfsel_type logits_t, float scale, Size size = Size::kNarrow);
// Q8_0 codebooks (R = 32: one block per row) whose f16 block scales are prev_scale (E_prev)
// and next_scale (E_next), quants in {-128, -127, -1, 0, 1, 64, 127}; F32 logits.
SpecialProblem q8_scales(uint16_t prev_scale, uint16_t next_scale, Gate gate, Size size = Size::kNarrow);
// F32 logits 1e30, 3e38, max-finite, ±inf, ±0, ±3, 1e-30, a subnormal, under softcap c and
// logit_scale m.
SpecialProblem softcap_extremes(float softcap, float scale, Size size = Size::kNarrow);

// Every problem above in the variants both suites run, as builders (a wide or tall problem
// holds tens of MB, so they are made one at a time). kTall lists only the per-type logits
// families (the first 36), which are what a tall problem adds to.
std::vector<std::function<SpecialProblem()>> special_problems(Size size);

// Vocabulary bounds of S equal-ish shards, each at least K wide.
std::vector<int64_t> even_bounds(int64_t V, int S);

// The outcome SPEC sections 2 and 3 prescribe (gates kZero and kOneHot), computed from the stored
// inputs without the library's code: candidates by (logit descending, NaN last, -0 == +0, id
// ascending); unary m * z, or c * tanh(m * z / c) (exact when it saturates to ±c or is ±0,
// else approximate: see check_expected); the product sum of a score is +0 for g = 0 and the single
// product E_prev[P_i][kGateR] * E_next[C_j][kGateR], rounded once (+0 when it is zero), for
// g = e_kGateR.
struct Expected {
  std::vector<int32_t> cand_ids;  // [nd][K]
  std::vector<float> unary;       // [nd][K]
  std::vector<uint8_t> unary_exact;
  std::vector<float> dot;         // [nd][K][K]
};
Expected expected_outcome(const SpecialProblem& p);

// Checks a greedy run against e: ids exactly; unary bitwise where exact (NaN matches any
// NaN), else within 4e-6 relative plus (1 + c) * 2^-149 (float tanhf, and the rounding of a
// subnormal m * z / c or a subnormal result); every score bitwise equal to unary[j] + dot[i][j] (float addition); the path and
// n_emitted those of the greedy walk over those scores (lowest j on ties, NaN never above a
// number). Returns "" or the first mismatch.
std::string check_expected(const SpecialProblem& p, const Expected& e, const Result& r);

// The first NaN among unary, scores, q and packed that no NaN input explains: unary j may be
// NaN only if its logit is; score (i, j) only if that logit, a value of E_prev[P_i] or
// E_next[C_j], or the gate is NaN; q never; packed must hold the ids and the scores bitwise.
// Returns "" when there is none.
std::string unexplained_nan(const SpecialProblem& p, const Result& r);

// Whether some input of the problem (logits, codebooks, hidden, W_h) holds a NaN.
bool has_nan_input(const SpecialProblem& p);

}  // namespace dfsel::test
