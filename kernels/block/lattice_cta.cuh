// The lattice CTA's shared state (score_lattice.cu): pointers into the carve of its dynamic
// shared memory (LatticeSmem, decided once per plan: lattice_args.cuh), and the warp tiling of
// its K x K product.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/block/lattice_args.cuh"
#include "kernels/common/order.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {

// kLatticeThreads and the shared-memory budgets of the carve are kernels/policy.cuh's.
constexpr int kLatticeWarps = kLatticeThreads / 32;

// R rounded up to whole k-steps of 16 elements: what the product reads of every row and of g.
__host__ __device__ constexpr int padded_rank(int R) { return (R + 15) & ~15; }

// The K x K product on BF16 tensor cores (m16n8k16): predecessors are the 16-row M tiles,
// candidates the 8-column N tiles; the warps not needed for M tiles split R's k-steps.
template <int KP>
struct LatticeWarps {
  static constexpr int kMt = KP >= 16 ? KP / 16 : 1;
  static constexpr int kNt = KP / 8;
  static constexpr int kKg = kLatticeWarps / kMt;  // warps splitting the k-steps of one M tile
  static constexpr int kRedPitch = KP + 1;         // floats; odd, so a thread per row reads conflict-free
  static_assert(kKg >= 1 && kMt * kKg == kLatticeWarps, "warps cover the M tiles");
};

// Pointers into the carve.
template <int KP>
struct LatticeShared {
  uint8_t* slots;    // staged codebook rows (or row chunks), LatticeSmem::pitch bytes apart
  float* gs;         // g[d] for the current chunk range, zero past R
  CandRec* recs;     // [2][S*K] the records of d and d - 1
  uint64_t* keys;    // [2][S*K] their cand_key
  int* flags;        // [S] anchor owned flags (sharded, p = 1)
  CandRec* cand;     // [2][KP] C[d], then C[d - 1]
  int* src;          // [2][KP] record index of each merged candidate
  int* nslot;        // [KP] slot of candidate j's E_next row, -1: zeros
  int* pslot;        // [KP] slot of predecessor i's E_prev row, -1: zeros
  const uint8_t** rowp;  // [2][KP] global rows (next, then prev) copied per chunk when !spec
  uint8_t* ok;       // [n_slots] the slot holds a row (spec)
  float* u;          // [KP]
  float* red;        // [kKg][KP][kRedPitch] partial products; S = u + their sum lands in red[0]
  float* fin;        // [KP][kRedPitch] S for the packed rows, where the lanes that choose sum it
  int2* table;       // walker: [L][KP] {choice, emitted id} pushed by every CTA, or a staged chunk
  float* qtab;       // walker: [L][KP][KP] q rows pushed by every CTA (push_q)
  int* used;         // walker: [L] lattice row of each step, -1 once stopped
  int* pick;         // walker: [L] candidate emitted at each step, -1 if none
  uint64_t* bar;     // [0] the staged rows' transfers ([1] unused)
  int* misc;         // [0] the anchor's owner (sharded, p = 1)
};

template <int KP>
__device__ __forceinline__ LatticeShared<KP> carve_lattice(uint8_t* smem, const LatticeSmem& sm) {
  LatticeShared<KP> s;
  s.slots = smem + sm.slots_off;
  s.gs = (float*)(smem + sm.gs_off);
  s.recs = (CandRec*)(smem + sm.recs_off);
  s.keys = (uint64_t*)(smem + sm.keys_off);
  s.flags = (int*)(smem + sm.flags_off);
  s.cand = (CandRec*)(smem + sm.cand_off);
  s.src = (int*)(smem + sm.src_off);
  s.nslot = s.src + 2 * KP;
  s.pslot = s.nslot + KP;
  s.rowp = (const uint8_t**)(smem + sm.rowp_off);
  s.ok = smem + sm.ok_off;
  s.u = (float*)(smem + sm.u_off);
  s.red = (float*)(smem + sm.red_off);
  s.fin = (float*)(smem + sm.fin_off);
  s.table = (int2*)(smem + sm.table_off);
  s.qtab = (float*)(smem + sm.qtab_off);
  s.used = (int*)(smem + sm.used_off);
  s.pick = s.used + sm.L;
  s.bar = (uint64_t*)(smem + sm.bar_off);
  s.misc = (int*)(smem + sm.bar_off + 2 * sizeof(uint64_t));
  return s;
}

}  // namespace dfsel::cuda
