// The lattice CTA's shared state (score_lattice.cu): the carve of its dynamic shared memory
// and the register tiling of its K x K scores. One CTA scores one drafted row d.
#pragma once

#include <stdint.h>

#include "kernels/common/order.cuh"
#include "kernels/score_lattice.cuh"

namespace dfsel::cuda {

constexpr int kLatticeThreads = 256;

template <int KP>
struct LatticeTile {
  // kT x kT scores per thread: independent accumulators, and R split over kGroups groups,
  // so that no thread runs one long dependent chain of FMAs over all of R.
  static constexpr int kT = KP >= 32 ? 4 : KP == 16 ? 2 : 1;
  static constexpr int kSide = KP / kT;
  static constexpr int kTiles = kSide * kSide;
  static constexpr int kGroups = kLatticeThreads / kTiles;  // thread groups splitting each R chunk
  static constexpr int kRchMax = 8192 / KP;                  // 2 * KP * kRchMax floats = 64 KB
  static_assert(kGroups >= 1 && kTiles * kGroups == kLatticeThreads, "tiles cover the CTA");
};

// Pointers into the carve. region is reused by the phases: the A and B chunks, then the
// staged scores, then the walk's choice table.
template <int KP>
struct LatticeShared {
  float* region;
  float* gs;             // g[d], zero-padded to a multiple of 4
  const uint8_t** prow;  // [KP] E_prev rows of the predecessors (null: zeros)
  const uint8_t** nrow;  // [KP] E_next rows of the candidates
  CandRec* cand;         // [2][KP] C[d], then C[d - 1]
  CandRec* recs;         // [2][S*K] the records of d and d - 1
  int* src;              // [2][KP] record index of each merged candidate
  float* u;              // [KP]
  int* misc;             // [0] anchor owner, [1] last-CTA flag
};

template <int KP>
__device__ __forceinline__ LatticeShared<KP> carve_lattice(uint8_t* smem, const LatticeSmem& sm) {
  LatticeShared<KP> s;
  s.region = (float*)smem;
  s.gs = (float*)(smem + sm.gs_off);
  s.prow = (const uint8_t**)(smem + sm.ptr_off);
  s.nrow = s.prow + KP;
  s.cand = (CandRec*)(smem + sm.cand_off);
  s.recs = (CandRec*)(smem + sm.recs_off);
  s.src = (int*)(smem + sm.src_off);
  s.u = (float*)(smem + sm.u_off);
  s.misc = (int*)(smem + sm.misc_off);
  return s;
}

inline size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

// The carve for k, R, L and S ranks; vec / vec8 as the rows' alignment allows.
template <int KP>
LatticeSmem lattice_smem(int k, int R, int L, int n_ranks, bool vec, bool vec8) {
  using T = LatticeTile<KP>;
  LatticeSmem sm;
  const int r4 = (R + 3) & ~3;
  sm.rch = r4 < T::kRchMax ? r4 : T::kRchMax;
  sm.ld = sm.rch + 4;
  sm.vec = vec ? 1 : 0;
  sm.vec8 = vec8 ? 1 : 0;  // rch is then a multiple of 8: R is, and so is kRchMax
  size_t region = 2 * (size_t)KP * sm.ld * 4;
  const size_t stage = (size_t)KP * KP * 4 * (T::kGroups > 1 ? 1 + T::kGroups : 1);
  if (stage > region) region = stage;
  const size_t walk = (size_t)L * k * 8 + (size_t)L * 2 * 4;  // choices [L][K]; row used, id [L]
  if (walk > region) region = walk;
  sm.gs_off = up16(region);
  sm.ptr_off = sm.gs_off + up16((size_t)r4 * 4);
  sm.cand_off = sm.ptr_off + 2 * KP * sizeof(void*);
  sm.recs_off = sm.cand_off + 2 * KP * sizeof(CandRec);
  sm.src_off = sm.recs_off + up16(2 * (size_t)n_ranks * k * sizeof(CandRec));
  sm.u_off = sm.src_off + 2 * KP * 4;
  sm.misc_off = sm.u_off + KP * 4;
  sm.bytes = sm.misc_off + 16;
  return sm;
}

}  // namespace dfsel::cuda
