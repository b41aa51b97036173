// score_lattice: after the exchange, every drafted position of every block
//   1. copies the codebook rows it needs into shared memory, all in flight together (every
//      record's rows as the records land when they fit, else the merged candidates' rows),
//   2. merges the S*K records of its row into the global top-K (order.cuh, cand_rank),
//   3. computes the unary u = transform(z) and the K x K scores against the predecessors
//      (the anchor at p = 1, the merged candidates of p - 1 otherwise) on tensor cores,
//      codebook rows read as stored from where row_source.cuh says (local codebooks, or the
//      records), and the walk step of each of its lattice rows (walk.cuh),
//   4. and one CTA of each block's cluster follows those steps (greedy or sampling, p_min),
// all in one launch: a cluster of CTAs per block, each taking some of its positions. Writes the
// native outputs and, optionally, llama.cpp's packed lattice rows (packed_row.cuh).
#pragma once

#include <cuda_runtime.h>

#include "kernels/block/lattice_args.cuh"

namespace dfsel::cuda {

// What plan creation decides once for a lattice of these arguments (the pointers of
// rows.e_prev / e_next, or of rows.recv when sharded, fix how rows are copied): the K bucket,
// the cluster (CTAs per block) and positions per CTA, the shared-memory carve, and the
// kernel's attributes raised on `device`. max_cluster 0 takes the largest the device holds.
// fast: a launch may take the instance for the common case (rows staged whole by bulk copies,
// the walker's tables pushed); a caller may clear it to time or test the general kernel, whose
// results are bitwise the same.
// resident: the clusters the device holds at once, of the general kernel and of the fast one
// (greedy; 0 when not fast).
struct LatticeLaunch {
  int kp;
  int cluster;
  int fast;
  int resident[2];
  LatticeSmem smem;
};
cudaError_t lattice_launch(const LatticeArgs& args, int device, LatticeLaunch* out, int max_cluster = 0);

// Enqueues the lattice and the walk for the validated arguments of the plan that made `launch`,
// chained (kernels/common/chain.cuh): its set-up runs under the previous kernel's tail, and it
// reads the records, g and the anchors only after that kernel has completed.
cudaError_t score_lattice(const LatticeArgs& args, const LatticeLaunch& launch, cudaStream_t stream);

}  // namespace dfsel::cuda
