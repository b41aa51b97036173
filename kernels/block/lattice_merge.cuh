// Phases 1 to 3 of the lattice CTA (SPEC section 4.5): the records of row d (and of d - 1)
// from every rank; when the carve is spec, the codebook row of every record (and at p = 1 the
// anchor's) copied the moment its record lands, so the rows travel while the merge runs; the
// merge into the global top-K by rank of key; the unary and where the product finds each row.
#pragma once

#include <limits.h>

#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/row_source.cuh"

namespace dfsel::cuda {

// Elements of g a thread loads before the records (R up to 512 in one go; the rest after).
constexpr int kStagedG = 2;

// Records e < n_lists * S*K: list w = e / (S*K) is row d - w. Spec: record e's row (E_next of
// d for list 0, E_prev of d - 1 for list 1) goes to slot e; at p = 1 slot S*K + r takes rank r's
// anchor row (sharded) or slot S*K the anchor's (replicated). Sharded rows are found without
// the record, so their copies go out before its load.
template <int KP>
__device__ void stage_records(const LatticeArgs& a, const LatticeSmem& sm, const LatticeShared<KP>& s, int d, int b,
                              int p, int32_t anchor, bool anchor_ok) {
  const int K = a.k, R = a.R, tid = threadIdx.x, S = a.rows.n_ranks;
  const int n_recs = S * K, n_lists = p >= 2 ? 2 : 1;
  const bool sharded = a.rows.layout.sharded, spec = sm.spec;
  const int n_anchor = p == 1 ? (sharded ? S : 1) : 0;
  const uint32_t bytes = (uint32_t)sm.copy_bytes;
  // g[d] first, into registers: the copies below are ordered memory operations, and a load
  // after them would wait for the records before it is even issued.
  const int r16 = padded_rank(R);
  float gv[kStagedG];
#pragma unroll
  for (int i = 0; i < kStagedG; ++i) {
    const int r = tid + i * kLatticeThreads;
    gv[i] = r < R ? a.g[(size_t)d * R + r] : 0.0f;
  }
  auto copy = [&](int slot, const uint8_t* row) {
    s.ok[slot] = row != nullptr;
    if (!row) return;
    mbar_expect(&s.bar[0], bytes);
    bulk_copy(s.slots + (size_t)slot * sm.pitch, row, bytes, &s.bar[0]);
  };
  for (int e = tid; e < n_lists * n_recs + n_anchor; e += kLatticeThreads) {
    if (e < n_lists * n_recs) {
      const int w = e / n_recs, q = e % n_recs;
      if (spec && sharded) copy(e, candidate_row(a.rows, d - w, q, 0, 1 - w));
      const CandRec c = record_at(a.rows, d - w, q);
      s.recs[e] = c;
      s.keys[e] = cand_key(c);
      if (spec && !sharded) copy(e, candidate_row(a.rows, d - w, q, c.id, 1 - w));
    } else if (sharded) {
      const int r = e - n_recs;
      if (spec) copy(e, layout_anchor_row(a.rows.layout, rank_records(a.rows, r), b));
      s.flags[r] = *layout_anchor_owned(a.rows.layout, rank_records(a.rows, r), b);
    } else if (spec) {
      copy(e, anchor_ok ? book_row(a.rows, a.rows.e_prev, anchor) : nullptr);
    }
  }
#pragma unroll
  for (int i = 0; i < kStagedG; ++i)
    if (tid + i * kLatticeThreads < r16) s.gs[tid + i * kLatticeThreads] = gv[i];
  for (int r = tid + kStagedG * kLatticeThreads; r < r16; r += kLatticeThreads)
    s.gs[r] = r < R ? a.g[(size_t)d * R + r] : 0.0f;
  for (int j = tid; j < 2 * KP; j += kLatticeThreads) {  // holes only if records repeat a key
    s.cand[j] = CandRec{0.0f, -1};
    s.src[j] = 0;
  }
}

// The record of rank j < K is C[j]; its index is kept to find its codebook rows. The rank is
// cand_rank's, counted on the keys staged beside the records. Sharded, at p = 1, misc[0] is
// the anchor's owner (the lowest rank that flags it, S if none).
template <int KP>
__device__ void merge_records(const LatticeArgs& a, const LatticeShared<KP>& s, int p) {
  const int K = a.k, tid = threadIdx.x, S = a.rows.n_ranks;
  const int n_recs = S * K, n_lists = p >= 2 ? 2 : 1;
  for (int e = tid; e < n_lists * n_recs; e += kLatticeThreads) {
    const int w = e / n_recs, q = e % n_recs;
    const uint64_t* keys = s.keys + w * n_recs;
    const uint64_t mine = keys[q];
    int r0 = 0, r1 = 0, r2 = 0, r3 = 0, j = 0;
    for (; j + 4 <= n_recs; j += 4) {
      r0 += keys[j] > mine;
      r1 += keys[j + 1] > mine;
      r2 += keys[j + 2] > mine;
      r3 += keys[j + 3] > mine;
    }
    for (; j < n_recs; ++j) r0 += keys[j] > mine;
    const int rk = r0 + r1 + r2 + r3;
    if (rk < K) {
      s.cand[w * KP + rk] = s.recs[e];
      s.src[w * KP + rk] = q;
    }
  }
  if (tid == 0 && a.rows.layout.sharded && p == 1) {
    int owner = S;
    for (int r = S - 1; r >= 0; --r)
      if (s.flags[r] == 1) owner = r;
    s.misc[0] = owner;
  }
}

// Phase 3: unary, per-candidate outputs, and the slot of every row the product reads (-1: a
// zero row). Without spec, the global rows are noted for the chunk copies and the slots are
// j (E_next of candidate j) and KP + i (E_prev of predecessor i).
template <int KP>
__device__ void find_rows(const LatticeArgs& a, const LatticeSmem& sm, const LatticeShared<KP>& s, int d, int b,
                          int p, int32_t anchor, bool anchor_ok) {
  const int K = a.k, n_recs = a.rows.n_ranks * K;
  const bool sharded = a.rows.layout.sharded;
  for (int j = threadIdx.x; j < KP; j += kLatticeThreads) {
    s.u[j] = 0.0f;
    s.nslot[j] = s.pslot[j] = -1;
    s.rowp[j] = s.rowp[KP + j] = nullptr;
    if (j >= K) continue;
    const CandRec c = s.cand[j];
    s.u[j] = transform_logit(a.transform, c.z);
    if (sm.spec) {
      const int qn = s.src[j];
      s.nslot[j] = s.ok[qn] ? qn : -1;
      if (p >= 2) {
        const int qp = n_recs + s.src[KP + j];
        s.pslot[j] = s.ok[qp] ? qp : -1;
      } else if (j == 0 && anchor_ok) {
        const int slot = sharded ? (s.misc[0] < a.rows.n_ranks ? n_recs + s.misc[0] : -1) : n_recs;
        s.pslot[0] = slot >= 0 && s.ok[slot] ? slot : -1;
      }
    } else {
      const uint8_t* next = candidate_row(a.rows, d, s.src[j], c.id, 1);
      const uint8_t* prev = nullptr;
      if (p >= 2) prev = candidate_row(a.rows, d - 1, s.src[KP + j], s.cand[KP + j].id, 0);
      else if (j == 0 && anchor_ok) prev = anchor_row(a.rows, b, anchor, sharded ? s.misc[0] : a.rows.n_ranks);
      s.rowp[j] = next;
      s.rowp[KP + j] = prev;
      s.nslot[j] = next ? j : -1;
      s.pslot[j] = prev ? KP + j : -1;
    }
    const size_t o = (size_t)d * K + j;
    if (a.cand_ids) a.cand_ids[o] = c.id;
    if (a.unary) a.unary[o] = s.u[j];
  }
}

}  // namespace dfsel::cuda

namespace dfsel::cuda {

// The fast instance's phases 2 and 3 as one (score_lattice.cu): with every row staged whole
// (spec), the thread that ranks a record also writes what find_rows derives from it. Before
// the staging barrier, clear_slots leaves the lanes past K empty and, at p = 1, every
// predecessor but the anchor's; merge_and_find then fills the rest.
template <int KP>
__device__ void clear_slots(const LatticeArgs& a, const LatticeShared<KP>& s, int p) {
  for (int j = threadIdx.x; j < KP; j += kLatticeThreads) {
    if (j >= a.k) {
      s.u[j] = 0.0f;
      s.nslot[j] = -1;
    }
    if (j >= a.k || p == 1) s.pslot[j] = -1;
  }
}

// merge_records and find_rows, bitwise: a record whose key has `above` larger keys takes rank
// `above` (cand_rank). Records that repeat a key share its rank and leave the ranks after it
// empty; the first of them (lowest index) writes its rank and those holes, which find_rows
// reads as CandRec{0, -1} with record 0's rows. Sharded, at p = 1, the anchor's row is the
// lowest rank's that flags it.
template <int KP>
__device__ void merge_and_find(const LatticeArgs& a, const LatticeShared<KP>& s, int d, int p, bool anchor_ok) {
  const int K = a.k, tid = threadIdx.x, S = a.rows.n_ranks;
  const int n_recs = S * K, n_lists = p >= 2 ? 2 : 1;
  for (int e = tid; e < n_lists * n_recs; e += kLatticeThreads) {
    const int w = e / n_recs, q = e % n_recs;
    const uint64_t* keys = s.keys + w * n_recs;
    const uint64_t mine = keys[q];
    int above = 0, same = 0, before = 0;
#pragma unroll 8
    for (int j = 0; j < n_recs; ++j) {
      const uint64_t k = keys[j];
      above += k > mine;
      same += k == mine;
      before += k == mine && j < q;
    }
    if (before != 0 || above >= K) continue;
    const int last = min(above + same, K);
    for (int j = above; j < last; ++j) {
      const bool own = j == above;
      if (w == 0) {
        const CandRec c = own ? s.recs[e] : CandRec{0.0f, -1};
        const int qn = own ? q : 0;
        const float u = transform_logit(a.transform, c.z);
        s.cand[j] = c;
        s.u[j] = u;
        s.nslot[j] = s.ok[qn] ? qn : -1;
        const size_t o = (size_t)d * K + j;
        if (a.cand_ids) a.cand_ids[o] = c.id;
        if (a.unary) a.unary[o] = u;
      } else {
        const int qp = n_recs + (own ? q : 0);
        s.pslot[j] = s.ok[qp] ? qp : -1;
      }
    }
  }
  if (p == 1 && anchor_ok && tid == kLatticeThreads - 1) {
    int slot = n_recs;
    if (a.rows.layout.sharded) {
      int owner = S;
      for (int r = S - 1; r >= 0; --r)
        if (s.flags[r] == 1) owner = r;
      slot = owner < S ? n_recs + owner : -1;
    }
    s.pslot[0] = slot >= 0 && s.ok[slot] ? slot : -1;
  }
}

}  // namespace dfsel::cuda
