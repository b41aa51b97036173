// Phases 6 and 7 of the lattice CTA: the outputs of one drafted row and the walk step of each
// of its K lattice rows (a step depends on its row alone, walk.cuh), pushed into the shared
// memory of the block's walker (cluster rank 0) when its tables fit, else written to the
// workspace; then, in the walker, the walk that follows those steps from the anchor.
#pragma once

#include <cooperative_groups.h>

#include "kernels/block/lattice_choice.cuh"
#include "kernels/block/lattice_cta.cuh"
#include "kernels/block/lattice_score.cuh"
#include "kernels/common/error_flag.cuh"
#include "kernels/common/packed_row.cuh"
#include "kernels/common/row_source.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::cuda {

// Row d's scores (at p = 1 every predecessor row repeats the anchor's row 0), packed row and
// walk steps, from S in s.red. Every CTA of the cluster has started (the caller waited).
template <int KP>
__device__ void write_row(const LatticeArgs& a, const LatticeSmem& sm, const LatticeShared<KP>& s, int d, int b,
                          int p) {
  using C = ChoiceLanes<KP>;
  constexpr int P = LatticeWarps<KP>::kRedPitch;
  const int K = a.k, tid = threadIdx.x;
  const float* S = s.red;
  const bool want_q = a.walk.temperature > 0.0f && a.q;
  const float u = a.walk.temperature > 0.0f ? philox_uniform(a.walk.seed, (uint32_t)b, (uint32_t)p) : 0.0f;
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const int rows = p == 1 ? 1 : K;  // at p = 1 the walk reads row 0
  for (int base = 0; base < rows; base += C::kRows) {  // every lane takes part in the shuffles
    const int i = base + tid / C::kG;
    const bool active = i < rows;
    RowLanes<KP> r;
    r.lane = tid % C::kG;
#pragma unroll
    for (int e = 0; e < C::kE; ++e) r.v[e] = S[(active ? i : 0) * P + r.lane + e * C::kG];
    float q[C::kE];
    const int c = row_choice<KP>(r, K, a.walk, u, q);
    if (!active) continue;
    if (r.lane == 0) {
      const int2 step = make_int2(c, s.cand[c & ~kWalkStop].id);
      if (sm.push_choices) cluster.map_shared_rank(s.table, 0)[(p - 1) * KP + i] = step;
      else a.choices[(size_t)d * K + i] = step;
    }
    if (want_q && sm.push_q) {
      float* dst = cluster.map_shared_rank(s.qtab, 0) + ((size_t)(p - 1) * KP + i) * KP;
#pragma unroll
      for (int e = 0; e < C::kE; ++e)
        if (r.lane + e * C::kG < K) dst[r.lane + e * C::kG] = q[e];
    }
  }
  const size_t base = (size_t)d * K * K;
  const bool keep = want_q && !sm.push_q;  // the walker reads the lattice rows back
  for (int o = tid; o < K * K; o += kLatticeThreads) {
    const float v = S[scored_row(p, o / K) * P + o % K];
    if (keep) a.lattice[base + o] = v;
    if (a.scores) a.scores[base + o] = v;
  }
  if (!a.packed) return;
  float* row = packed_row(a.packed, a.packed_row_stride, b, a.block_size, p);
  for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads)
    row[e] = packed_value(e, K, [&](int j) { return s.cand[j].id; },
                          [&](int i, int j) { return S[scored_row(p, i) * P + j]; });
  if (p == 1) {
    float* row0 = packed_row(a.packed, a.packed_row_stride, b, a.block_size, 0);
    for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads) row0[e] = 0.0f;
  }
}

// write_row for the fast instance (score_lattice.cu), from the partial products: the lanes
// that choose a row's step sum its scores themselves (summed_score, so the bits are
// score_rows'), push the step and q row to the walker, which the carve holds (push_choices,
// and push_q when q is written), and write the scores; the packed row then reads S from s.fin.
// Every CTA of the cluster has started (the caller waited).
template <int KP, Choose kHow>
__device__ void finish_row(const LatticeArgs& a, const LatticeShared<KP>& s, int d, int b, int p) {
  using C = ChoiceLanes<KP>;
  constexpr int P = LatticeWarps<KP>::kRedPitch;
  const int K = a.k, tid = threadIdx.x;
  const bool want_q = kHow == Choose::kSample && a.q;
  const float u = kHow == Choose::kSample ? philox_uniform(a.walk.seed, (uint32_t)b, (uint32_t)p) : 0.0f;
  cooperative_groups::cluster_group cluster = cooperative_groups::this_cluster();
  const size_t base = (size_t)d * K * K;
  const int rows = p == 1 ? 1 : K;  // at p = 1 the walk reads row 0, and every scores row is row 0
  for (int r0 = 0; r0 < rows; r0 += C::kRows) {  // every lane takes part in the shuffles
    const int i = r0 + tid / C::kG;
    const bool active = i < rows;
    RowLanes<KP> r;
    r.lane = tid % C::kG;
#pragma unroll
    for (int e = 0; e < C::kE; ++e) r.v[e] = summed_score<KP>(s, active ? i : 0, r.lane + e * C::kG);
    float q[C::kE];
    const int c = row_choice<KP, kHow>(r, K, a.walk, u, q);
    if (!active) continue;
    if (r.lane == 0) cluster.map_shared_rank(s.table, 0)[(p - 1) * KP + i] = make_int2(c, s.cand[c & ~kWalkStop].id);
    if (want_q) {
      float* dst = cluster.map_shared_rank(s.qtab, 0) + ((size_t)(p - 1) * KP + i) * KP;
#pragma unroll
      for (int e = 0; e < C::kE; ++e)
        if (r.lane + e * C::kG < K) dst[r.lane + e * C::kG] = q[e];
    }
#pragma unroll
    for (int e = 0; e < C::kE; ++e) {
      const int j = r.lane + e * C::kG;
      if (j >= K) continue;
      if (a.scores) {
        if (p == 1)
          for (int x = 0; x < K; ++x) a.scores[base + (size_t)x * K + j] = r.v[e];
        else
          a.scores[base + (size_t)i * K + j] = r.v[e];
      }
      if (a.packed) s.fin[i * P + j] = r.v[e];
    }
  }
  if (!a.packed) return;
  __syncthreads();
  float* row = packed_row(a.packed, a.packed_row_stride, b, a.block_size, p);
  for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads)
    row[e] = packed_value(e, K, [&](int j) { return s.cand[j].id; },
                          [&](int i, int j) { return s.fin[scored_row(p, i) * P + j]; });
  if (p == 1) {
    float* row0 = packed_row(a.packed, a.packed_row_stride, b, a.block_size, 0);
    for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads) row0[e] = 0.0f;
  }
}

// The q rows of block b recomputed from the lattice rows its steps used, read back from the
// workspace, a position a thread.
template <int KP>
__device__ void q_from_lattice(const LatticeArgs& a, const LatticeShared<KP>& s, int b) {
  const int K = a.k, L = a.block_size - 1;
  for (int p = threadIdx.x; p < L; p += kLatticeThreads) {
    const size_t d = (size_t)b * L + p;
    const int used = s.used[p];
    float row[kMaxTopK], w[kMaxTopK];
    if (used >= 0) {
      for (int j = 0; j < K; ++j) row[j] = __ldcg(a.lattice + (d * K + used) * K + j);
      softmax_row(row, K, a.walk.temperature, w);
    }
    for (int j = 0; j < K; ++j) a.q[d * K + j] = used >= 0 ? w[j] : 0.0f;
  }
}

// The walk of block b in its walker, once every CTA of the cluster has released its steps:
// one thread follows them (L dependent shared loads; from the workspace, a chunk of positions
// staged at a time), then the path, the emitted ids and the q rows are written in parallel.
// A block whose ranks were given different inputs (some thread's `differs`) walks nothing.
// kPushed: the instance knows every CTA pushed its steps (and, when q is written, its q rows)
// into the walker's tables, so the workspace paths are not in its code.
template <int KP, bool kPushed = false>
__device__ void walk_block(const LatticeArgs& a, const LatticeSmem& sm, const LatticeShared<KP>& s, int b,
                           bool anchor_ok, bool differs) {
  const int K = a.k, L = a.block_size - 1, tid = threadIdx.x;
  const bool agree = a.rows.layout.agree_off == 0 || !__syncthreads_or(differs);
  const int2* table = s.table;
  auto step = [&](int p, int row, int j) {
    s.used[p] = row;
    s.pick[p] = j;
  };
  // The emitted ids of positions [p0, p1), from the table rows of p0 on.
  auto emit = [&](int p0, int p1) {
    for (int p = p0 + tid; p < p1; p += kLatticeThreads)
      a.path[(size_t)b * L + p] = s.pick[p] >= 0 ? table[(p - p0) * KP + s.used[p]].y : -1;
  };
  WalkState st{0, 0, anchor_ok && agree};
  if (kPushed || sm.push_choices) {
    if (tid == 0) walk_steps(st, 0, L, [&](int p, int i) { return table[p * KP + i].x; }, step);
    __syncthreads();
    emit(0, L);
  } else {
    const int2* choices = a.choices + (size_t)b * L * K;
    for (int p0 = 0; p0 < L; p0 += sm.walk_chunk) {
      const int p1 = min(L, p0 + sm.walk_chunk);
      for (int e = tid; e < (p1 - p0) * K; e += kLatticeThreads)
        s.table[(e / K) * KP + e % K] = __ldcg(choices + (size_t)p0 * K + e);
      __syncthreads();
      if (tid == 0) walk_steps(st, p0, p1, [&](int p, int i) { return table[(p - p0) * KP + i].x; }, step);
      __syncthreads();
      emit(p0, p1);
      __syncthreads();
    }
  }
  if (tid == 0) {
    a.n_emitted[b] = st.n;
    if (!anchor_ok && a.error) atomicCAS(a.error, 0, 1 + b);
    if (!agree && a.error) flag_lowest_block(a.error + 1, b);
    if ((!anchor_ok || !agree) && a.host_flag) *reinterpret_cast<volatile int32_t*>(a.host_flag) = 1;
  }
  if (!(a.walk.temperature > 0.0f && a.q)) return;
  if (kPushed || sm.push_q) {  // q rows from the pushed ones, an element a thread
    for (int x = tid; x < L * K; x += kLatticeThreads) {
      const int p = x / K, j = x % K, used = s.used[p];
      a.q[((size_t)b * L + p) * K + j] = used >= 0 ? s.qtab[((size_t)p * KP + used) * KP + j] : 0.0f;
    }
  } else {
    q_from_lattice<KP>(a, s, b);
  }
}

}  // namespace dfsel::cuda
