// Phases 1 and 2 of the lattice CTA (SPEC section 4.5): the records of row d (and of
// d - 1) from every rank, merged into the global top-K by rank of key; g[d]; the anchor's
// owner when the codebooks are sharded.
#pragma once

#include <limits.h>

#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/row_source.cuh"

namespace dfsel::cuda {

template <int KP>
__device__ void stage_records(const LatticeArgs& a, const LatticeShared<KP>& s, int d, int p) {
  const int K = a.k, R = a.R, tid = threadIdx.x;
  const int n_recs = a.rows.n_ranks * K, n_lists = p >= 2 ? 2 : 1;
  for (int e = tid; e < n_lists * n_recs; e += kLatticeThreads)
    s.recs[e] = record_at(a.rows, d - e / n_recs, e % n_recs);
  for (int r = tid; r < ((R + 3) & ~3); r += kLatticeThreads) s.gs[r] = r < R ? a.g[(size_t)d * R + r] : 0.0f;
  for (int j = tid; j < 2 * KP; j += kLatticeThreads) {  // holes only if records repeat a key
    s.cand[j] = CandRec{0.0f, -1};
    s.src[j] = 0;
  }
}

// The record of rank j < K is C[j]; its index is kept to find its codebook rows.
template <int KP>
__device__ void merge_records(const LatticeArgs& a, const LatticeShared<KP>& s, int b, int p, bool anchor_ok) {
  const int K = a.k, tid = threadIdx.x;
  const int n_recs = a.rows.n_ranks * K, n_lists = p >= 2 ? 2 : 1;
  for (int e = tid; e < n_lists * n_recs; e += kLatticeThreads) {
    const int w = e / n_recs, q = e % n_recs;
    const int rk = cand_rank(s.recs + w * n_recs, n_recs, q);
    if (rk < K) {
      s.cand[w * KP + rk] = s.recs[e];
      s.src[w * KP + rk] = q;
    }
  }
  if (tid == 0)
    s.misc[0] = a.rows.layout.sharded && p == 1 && anchor_ok ? anchor_owner(a.rows, b) : a.rows.n_ranks;
}

// Phase 3: unary, the codebook rows of every candidate and predecessor, per-candidate outputs.
template <int KP>
__device__ void find_rows(const LatticeArgs& a, const LatticeShared<KP>& s, int d, int b, int p, bool anchor_ok) {
  const int K = a.k;
  for (int j = threadIdx.x; j < KP; j += kLatticeThreads) {
    s.u[j] = 0.0f;
    s.prow[j] = s.nrow[j] = nullptr;
    if (j >= K) continue;
    const CandRec c = s.cand[j];
    s.u[j] = transform_logit(a.transform, c.z);
    s.nrow[j] = candidate_row(a.rows, d, s.src[j], c.id, 1);
    if (p >= 2) s.prow[j] = candidate_row(a.rows, d - 1, s.src[KP + j], s.cand[KP + j].id, 0);
    else if (j == 0 && anchor_ok) s.prow[0] = anchor_row(a.rows, b, a.anchors[b], s.misc[0]);  // P = {anchor}
    const size_t o = (size_t)d * K + j;
    if (a.cand_ids) a.cand_ids[o] = c.id;
    if (a.unary) a.unary[o] = s.u[j];
  }
}

}  // namespace dfsel::cuda
