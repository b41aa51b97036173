// walk.cuh's walk_choice for every lattice row of a drafted row at once, a group of G lanes a
// row: the lanes hold the row's scores and weigh them in parallel; the maximum is found by a
// shuffle reduction (exact, so its order does not matter), and each sum runs in j order in
// every lane on values gathered by shuffles. The choice, the q row and the p_min test are
// therefore bitwise walk_choice's, which stays the definition (and the CPU reference's).
#pragma once

#include <limits.h>
#include <math.h>

#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/philox.cuh"
#include "kernels/common/selector_math.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::cuda {

template <int KP>
struct ChoiceLanes {
  static constexpr int kG = KP < 32 ? KP : 32;       // lanes per row
  static constexpr int kE = KP / kG;                  // scores per lane: j = lane + e * kG
  static constexpr int kRows = kLatticeThreads / kG;  // rows per pass of the CTA
};

// A score and its index; an absent one (j >= K) is NaN with index INT_MAX.
struct Scored {
  float v;
  int j;
};

// argmax_row's order (score_beats), with the lower index winning where neither score beats
// the other: the reduction then ends on argmax_row's answer whatever order it combines in.
__device__ __forceinline__ Scored better(Scored a, Scored b) {
  if (score_beats(a.v, b.v)) return a;
  if (score_beats(b.v, a.v)) return b;
  return a.j < b.j ? a : b;
}

// The lanes' part of one row: its scores, or rather what walk_choice computes from them.
template <int KP>
struct RowLanes {
  using C = ChoiceLanes<KP>;
  float v[C::kE];  // the scores this lane holds
  int lane;        // lane within the group

  __device__ __forceinline__ float shfl(float x, int src) const {
    return __shfl_sync(0xffffffffu, x, src, C::kG);
  }
  // Score (or any per-j value held as w) of index j, from the lane that holds it.
  __device__ __forceinline__ float at(const float (&w)[C::kE], int j) const {
    float x = shfl(w[0], j % C::kG);
#pragma unroll
    for (int e = 1; e < C::kE; ++e) {
      const float y = shfl(w[e], j % C::kG);
      if (j / C::kG == e) x = y;
    }
    return x;
  }

  __device__ __forceinline__ int argmax(int k) const {
    Scored best{NAN, INT_MAX};
#pragma unroll
    for (int e = 0; e < C::kE; ++e) {
      const int j = lane + e * C::kG;
      if (j < k) best = better(best, Scored{v[e], j});
    }
#pragma unroll
    for (int o = C::kG / 2; o > 0; o /= 2) {
      const Scored other{shfl(best.v, lane ^ o), __shfl_xor_sync(0xffffffffu, best.j, o, C::kG)};
      best = better(best, other);
    }
    return best.j == INT_MAX ? 0 : best.j;
  }

  // row_max: the largest number, -inf when there is none.
  __device__ __forceinline__ float max(int k) const {
    float m = -INFINITY;
#pragma unroll
    for (int e = 0; e < C::kE; ++e)
      if (lane + e * C::kG < k && v[e] > m) m = v[e];
#pragma unroll
    for (int o = C::kG / 2; o > 0; o /= 2) {
      const float x = __shfl_xor_sync(0xffffffffu, m, o, C::kG);
      if (x > m) m = x;
    }
    return m;
  }

  // The row's per-j values w, every one in every lane (KP <= 32: one shuffle each, all in
  // flight at once), for the sums in j order to run on registers.
  __device__ __forceinline__ void gather(const float (&w)[C::kE], float (&all)[KP]) const {
#pragma unroll
    for (int j = 0; j < KP; ++j) all[j] = at(w, j);
  }

  // sum_in_order of the held values w over j < k.
  __device__ __forceinline__ float sum(int k, const float (&w)[C::kE]) const {
    if constexpr (KP <= 32) {
      float all[KP];
      gather(w, all);
      return sum_in_order<KP>(k, [&](int j) { return all[j]; });
    } else {
      return sum_in_order(k, [&](int j) { return at(w, j); });
    }
  }

  // sample_from over the held values q.
  __device__ __forceinline__ int sample(int k, float u, const float (&q)[C::kE]) const {
    if constexpr (KP <= 32) {
      float all[KP];
      gather(q, all);
      return sample_from<KP>(k, u, [&](int j) { return all[j]; });
    } else {
      return sample_from(k, u, [&](int j) { return at(q, j); });
    }
  }

  // softmax_weight of every held score against m, and their sum in j order.
  __device__ __forceinline__ float weights(int k, float m, float temp, float (&w)[C::kE]) const {
#pragma unroll
    for (int e = 0; e < C::kE; ++e) w[e] = softmax_weight(v[e], m, temp);
    return sum(k, w);
  }
};

// How a kernel instance chooses: by the walk's temperature at run time, or knowing it is
// greedy (temperature <= 0) or sampling, so that the other branch is not in its code.
enum class Choose { kRuntime, kGreedy, kSample };

// The step taken from row i (walk_choice(S row, K, w, block, p)) in every lane of its group,
// and, when sampling, the held part of its q row in q. An instance that knows how it chooses
// must be given a w that agrees.
template <int KP, Choose kHow = Choose::kRuntime>
__device__ __forceinline__ int row_choice(const RowLanes<KP>& r, int k, const WalkParams& w, float u,
                                          float (&q)[ChoiceLanes<KP>::kE]) {
  using C = ChoiceLanes<KP>;
  int j;
  float m = 0.0f;
  bool have_m = false;
  const bool sample = kHow == Choose::kRuntime ? w.temperature > 0.0f : kHow == Choose::kSample;
  if (sample) {
    m = r.max(k);
    have_m = true;
    if (m == -INFINITY) {
#pragma unroll
      for (int e = 0; e < C::kE; ++e) q[e] = 1.0f / (float)k;
    } else {
      const float inv = 1.0f / r.weights(k, m, w.temperature, q);
#pragma unroll
      for (int e = 0; e < C::kE; ++e) q[e] *= inv;
    }
    j = r.sample(k, u, q);
  } else {
    j = r.argmax(k);
  }
  if (w.p_min > 0.0f) {
    if (!have_m) m = r.max(k);
    float pj;
    if (m == -INFINITY) {
      pj = 1.0f / (float)k;
    } else {
      float t[C::kE];
      const float sum = r.weights(k, m, 1.0f, t);
      pj = r.at(t, j) / sum;
    }
    if (pj < w.p_min) j |= kWalkStop;
  }
  return j;
}

}  // namespace dfsel::cuda
