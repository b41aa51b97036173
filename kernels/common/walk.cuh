// The walk of SPEC section 5, shared by the CPU reference and the lattice kernel: the step
// taken from one lattice row (argmax or a draw, then the p_min test), and the path that
// follows those steps from the anchor.
#pragma once

#include <stdint.h>

#include "hd.cuh"
#include "limits.cuh"
#include "philox.cuh"
#include "selector_math.cuh"

namespace dfsel {

struct WalkParams {
  float temperature;  // <= 0: greedy
  float p_min;        // 0 disables the cut
  uint64_t seed;      // sampling: one draw per (seed, block, position)
};

constexpr int kWalkStop = 0x100;  // flag on a choice: p_min stops the walk before this step

// The choice at position p of block b from lattice row s (K scores): the candidate index j,
// or'ed with kWalkStop when p_min stops before emitting it. It depends on the row alone, so
// a kernel may decide every row of a block before the path is known.
DFSEL_HD int walk_choice(const float* s, int k, WalkParams w, uint32_t block, uint32_t p) {
  int j;
  if (w.temperature > 0.0f) {
    float q[kMaxTopK];
    softmax_row(s, k, w.temperature, q);
    j = sample_row(q, k, philox_uniform(w.seed, block, p));
  } else {
    j = argmax_row(s, k);
  }
  return w.p_min > 0.0f && softmax_at(s, k, 1.0f, j) < w.p_min ? j | kWalkStop : j;
}

// Where a walk stands between positions: the lattice row it follows next, the count emitted,
// and whether it still goes.
struct WalkState {
  int prev;
  int n;
  bool go;
};

// Follows the choices for 0-based positions [p0, p1) from state st: choice(p, i) is the choice
// of lattice row i at position p + 1. step(p, row, j) is told each position: the lattice row it
// used (-1 once stopped) and the emitted candidate (-1 when it emitted none).
template <class Choice, class Step>
DFSEL_HD void walk_steps(WalkState& st, int p0, int p1, Choice choice, Step step) {
  for (int p = p0; p < p1; ++p) {
    const int row = st.go ? st.prev : -1;
    const int c = st.go ? choice(p, st.prev) : kWalkStop;
    st.go = st.go && !(c & kWalkStop);
    step(p, row, st.go ? c : -1);
    if (st.go) st.prev = c, ++st.n;
  }
}

// The whole walk of L positions from the anchor; returns the count emitted. A block whose
// anchor is invalid (ok false) emits nothing.
template <class Choice, class Step>
DFSEL_HD int walk_path(int L, bool ok, Choice choice, Step step) {
  WalkState st{0, 0, ok};
  walk_steps(st, 0, L, choice, step);
  return st.n;
}

}  // namespace dfsel
