// The DSpark chain of one rank as one launch (docs/dspark.md, "The CUDA backend"): every step
// of every block in a single cooperative kernel, after begin (kernels/dspark_chain.cuh).
//
// Per step each warp multiplies its slices of 16 W2 rows by every drafting block's e on tensor
// cores (kernels/block/dspark_mma.cuh, the pass's product: the same bits), keeps its bests,
// and each CTA folds its part into the step's slot with atomics (a maximum of 64-bit keys, a
// maximum of row maxima, an exact integer sum of the normaliser). One grid barrier later every
// CTA reads the slot and takes the step itself, the same bits in every CTA: the winner, the
// block's state, the next W1 row and the confidence; CTA 0 alone writes the outputs. No
// launch, no last-CTA merge and no drained GPU between steps; even steps walk the slices
// backwards, so that a step starts on the rows the step before read last, still in the L2.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common/dspark_args.cuh"

namespace dfsel::cuda {

// How the one-launch chain is launched, decided at plan creation for the plan's largest run.
struct DSparkLaunch {
  void (*kernels[2])(DSparkChainArgs, int32_t);  // greedy, sampling: for the plan's e terms and group size
  int32_t e_pitch;  // bytes between e's term rows in shared memory
  int grid;         // every SM's resident CTAs (a cooperative launch)
  int threads;
  size_t smem;
};

// Whether a plan can take the one-launch chain: one rank, W2 on tensor cores
// (dspark_mma_supported).
bool dspark_launch_supported(const DSparkChainArgs& a);

// Chooses the kernel and its grid on `device` for runs of up to a.max_blocks blocks.
// cudaErrorInvalidValue where dspark_launch_supported is false or shared memory is short.
cudaError_t dspark_launch_setup(const DSparkChainArgs& a, int device, DSparkLaunch* out);

// Every step of the run (after dspark_begin on the same stream).
cudaError_t dspark_launch_run(const DSparkChainArgs& a, const DSparkLaunch& l, cudaStream_t stream);

}  // namespace dfsel::cuda
