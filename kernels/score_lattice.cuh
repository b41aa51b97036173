// score_lattice: after the exchange, every drafted position of every block
//   1. merges the S*K records of its row into the global top-K (order.cuh, cand_rank),
//   2. computes the unary u = transform(z) and the K x K scores against the predecessors
//      (the anchor at p = 1, the merged candidates of p - 1 otherwise), codebook rows read
//      as stored from where row_source.cuh says (local codebooks, or the records),
//   3. and the last position to finish in a block walks it (walk.cuh: greedy or sampling,
//      p_min),
// all in one launch: one CTA per (block, position). Writes the native outputs and,
// optionally, llama.cpp's packed lattice rows (packed_row.cuh).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/exchange_layout.cuh"
#include "kernels/common/row_source.cuh"
#include "kernels/common/selector_math.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::cuda {

struct LatticeArgs {
  RowSource rows;  // the records of every rank and, replicated, the local codebooks
  int32_t k;
  int32_t R;
  int32_t block_size;
  int32_t n_blocks;
  dfsel_type cb_type;
  Transform transform;
  const int32_t* anchors;  // [n_blocks]
  const float* g;          // [n_blocks * L][R] from gate
  WalkParams walk;
  // Outputs (any may be null except path, n_emitted).
  int32_t* cand_ids;
  float* unary;
  float* scores;
  float* q;                  // written when sampling
  int32_t* path;
  int32_t* n_emitted;
  float* packed;
  size_t packed_row_stride;  // bytes, resolved (packed_stride)
  int64_t n_embd;            // floats per packed row
  // Workspace: the walk's inputs and completion counters.
  float* lattice;           // [n_blocks * L][K][K]
  int2* choices;            // [n_blocks * L][K]: the walk's choice from each lattice row (with
                            // the kWalkStop flag) and the token id it emits
  unsigned* block_counters; // [max_blocks], zeroed once at set-up, left reusable
  int32_t* error;           // set to 1 + block index of an anchor out of range; never cleared here
};

// Shared memory carve of one CTA; offsets in bytes.
struct LatticeSmem {
  int rch;   // R chunk staged per pass, a multiple of 4 (8 with vec8)
  int ld;    // pitch of the staged rows in floats: rch + 4 keeps 128-bit reads conflict-free
  int vec;   // 4-element loads in one access
  int vec8;  // 2-byte rows, R % 8 == 0, rows 16-byte aligned: 8 elements per 16-byte load
  size_t gs_off, ptr_off, cand_off, recs_off, src_off, u_off, misc_off, bytes;
};

// What plan creation decides once for a lattice of these arguments (the pointers of
// rows.e_prev / e_next, or of rows.recv when sharded, fix the load widths): the K bucket, the
// shared-memory carve, and the kernel's dynamic shared-memory limit raised on `device`.
struct LatticeLaunch {
  int kp;
  LatticeSmem smem;
};
cudaError_t lattice_launch(const LatticeArgs& args, int device, LatticeLaunch* out);

// Enqueues the lattice and the walk for the validated arguments of the plan that made `launch`.
cudaError_t score_lattice(const LatticeArgs& args, const LatticeLaunch& launch, cudaStream_t stream);

}  // namespace dfsel::cuda
