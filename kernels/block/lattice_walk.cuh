// Phases 6 and 7 of the lattice CTA: the outputs of one drafted row and the walk step of each
// of its K lattice rows (a step depends on its row alone, walk.cuh), then, in the last CTA of
// a block to finish, the walk that follows those steps from the anchor.
#pragma once

#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/packed_row.cuh"
#include "kernels/common/row_source.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::cuda {

// Row d's scores (at p = 1 every predecessor row repeats the anchor's row 0), packed row and
// walk choices, from S staged as [KP][KP] in s.region.
template <int KP>
__device__ void write_row(const LatticeArgs& a, const LatticeShared<KP>& s, int d, int b, int p) {
  const int K = a.k, tid = threadIdx.x;
  const float* S = s.region;
  for (int i = tid; i < K; i += kLatticeThreads) {
    const int c = walk_choice(S + scored_row(p, i) * KP, K, a.walk, (uint32_t)b, (uint32_t)p);
    a.choices[(size_t)d * K + i] = make_int2(c, s.cand[c & ~kWalkStop].id);
  }
  const size_t base = (size_t)d * K * K;
  for (int o = tid; o < K * K; o += kLatticeThreads) {
    const float v = S[scored_row(p, o / K) * KP + o % K];
    a.lattice[base + o] = v;
    if (a.scores) a.scores[base + o] = v;
  }
  if (!a.packed) return;
  float* row = packed_row(a.packed, a.packed_row_stride, b, a.block_size, p);
  for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads)
    row[e] = packed_value(e, K, [&](int j) { return s.cand[j].id; },
                          [&](int i, int j) { return S[scored_row(p, i) * KP + j]; });
  if (p == 1) {
    float* row0 = packed_row(a.packed, a.packed_row_stride, b, a.block_size, 0);
    for (int64_t e = tid; e < a.n_embd; e += kLatticeThreads) row0[e] = 0.0f;
  }
}

// True in the last CTA of block b to finish. The fence publishes this CTA's choices and
// lattice rows before its ticket; the last resets the counter for the next launch or replay.
__device__ __forceinline__ bool last_of_block(const LatticeArgs& a, int* flag, int b) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    const int L = a.block_size - 1;
    const unsigned ticket = atomicAdd(&a.block_counters[b], 1u);
    *flag = ticket == (unsigned)(L - 1);
    if (*flag) atomicExch(&a.block_counters[b], 0u);
  }
  __syncthreads();
  if (!*flag) return false;
  __threadfence();
  return true;
}

// The walk of block b by the whole CTA: the choices of all L x K rows are read in one pass,
// one thread follows them (walk_path: L dependent shared loads), then the path and q rows are
// written in parallel; q of a step is recomputed from the row it used, as walk_choice did.
__device__ void walk_block(const LatticeArgs& a, float* region, int b, bool anchor_ok) {
  const int K = a.k, L = a.block_size - 1, tid = threadIdx.x;
  const size_t kk = (size_t)K * K;
  int2* table = (int2*)region;        // [L][K] {choice, id of the chosen candidate}
  int* used = (int*)(table + L * K);  // [L] lattice row of step p + 1, -1 once stopped
  int* pick_id = used + L;            // [L] the emitted token id, -1 if none
  const float* lat = a.lattice + (size_t)b * L * kk;
  const int2* choices = a.choices + (size_t)b * L * K;
  for (int r = tid; r < L * K; r += kLatticeThreads) table[r] = __ldcg(choices + r);
  __syncthreads();
  if (tid == 0) {
    a.n_emitted[b] = walk_path(
        L, anchor_ok, [&](int p, int i) { return table[p * K + i].x; },
        [&](int p, int row, int j) {
          used[p] = row;
          pick_id[p] = j >= 0 ? table[p * K + row].y : -1;
        });
    if (!anchor_ok && a.error) atomicCAS(a.error, 0, 1 + b);
  }
  __syncthreads();
  for (int p = tid; p < L; p += kLatticeThreads) {
    const size_t d = (size_t)b * L + p;
    a.path[d] = pick_id[p];
    if (a.walk.temperature <= 0.0f || !a.q) continue;
    float row[kMaxTopK], q[kMaxTopK];
    if (used[p] >= 0) {
      for (int j = 0; j < K; ++j) row[j] = __ldcg(lat + p * kk + (size_t)used[p] * K + j);
      softmax_row(row, K, a.walk.temperature, q);
    }
    for (int j = 0; j < K; ++j) a.q[d * K + j] = used[p] >= 0 ? q[j] : 0.0f;
  }
}

}  // namespace dfsel::cuda
