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
// backwards, so that a step starts on the rows the step before read last, still in the L2. The
// default builds stage each warp's next slice in shared memory while it multiplies this one.
//
// Several ranks run the same kernel a launch a step: the exchange between steps cannot live
// inside a launch, so the last CTA to fold its part in writes the rank's records instead of the
// barrier, and dspark_merge takes the step after the exchange.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common/dspark_args.cuh"

namespace dfsel::cuda {

// A kernel of the one-launch chain and its launch: every SM's resident CTAs (cooperative).
struct DSparkLaunchKernel {
  void (*fn)(DSparkChainArgs, int32_t, int32_t, int32_t, uint32_t);  // (args, e pitch, first step, last step, keep)
  int grid, threads;
  size_t smem;
};

// How the one-launch chain is launched, decided at plan creation for the plan's largest run.
struct DSparkLaunch {
  DSparkLaunchKernel k[2][2];  // [sampling][wide]: for the plan's e terms
  int wide_from;               // runs of this many blocks or more take the wide kernels
  int32_t e_pitch;             // bytes between e's term rows in shared memory
  uint32_t keep;               // W2's L2 policy (dspark_l2_keep), or kDSparkKeepOff
};

// How the one launch's loads use the L2 (H200: 60 MB against W2's 84 MB at V 163840, R 256): a
// fixed share of W2's slices of 16 rows, picked by a hash of the slice, is loaded as last to go
// (L2::evict_last) in every step but the last, the other slices and the base logits as first
// to go (evict_first). Each step after the first finds the kept share in the L2 whatever the
// other slices and the blocks' logits pushed through it; the walk's turn still finds the
// slices read last. keep is that share of 65536 (65536: every slice); kDSparkKeepOff loads
// everything as any other line.
constexpr uint32_t kDSparkKeepOff = 0xffffffffu;

// The share of 65536 to keep for a shard of w2_bytes on a device whose L2 holds l2_bytes, where
// `sharers` plans of one call run on that device: the kept rows of all of them take
// kDSparkL2Fraction of the L2. Measured on one H200 (2026-12-04, 1 block, greedy, one call):
// kept 28 / 34 / 40 / 66 MB of its 60 MB took 173.6 / 171.9 / 170.1 / 181.9 us, none kept (all
// streamed) 184.0, no policy 185.9.
constexpr double kDSparkL2Fraction = 0.55;
uint32_t dspark_l2_keep(size_t w2_bytes, size_t l2_bytes, int sharers);

// Whether a plan can take the one-launch chain's kernel: W2 on tensor cores
// (dspark_mma_supported), the shard starting at a multiple of 4 rows (the noise's Philox calls
// are shared by 4 ids). One rank runs it as the whole chain, several a launch a step.
bool dspark_launch_supported(const DSparkChainArgs& a);

// Chooses the kernels and their grids on `device` for runs of up to a.max_blocks blocks: the
// builds named `narrow` and `wide` (null: the defaults, or where a default's shared memory is
// short for a.max_blocks its fallback; kernels/dspark_launch.cu lists them), the wide one for
// runs of more blocks than a narrow group where it fits (else more narrow groups).
// cudaErrorInvalidValue where dspark_launch_supported is false or shared memory is short;
// cudaErrorNotSupported for a name that is not a build.
cudaError_t dspark_launch_setup(const DSparkChainArgs& a, int device, const char* narrow, const char* wide,
                                DSparkLaunch* out);

// One rank: every step of the run (after dspark_begin on the same stream), cooperative.
cudaError_t dspark_launch_run(const DSparkChainArgs& a, const DSparkLaunch& l, cudaStream_t stream);

// Several ranks: step k (k = N + 1: step N's normaliser only) as one launch of the same kernel,
// chained (kernels/common/chain.cuh): the shard's slices as the one launch reads them (the
// backwards walk on even steps), every CTA's part folded into the step's slots, and the last CTA
// to finish writes this rank's records for the exchange (dspark_merge takes the step after it).
cudaError_t dspark_launch_step(const DSparkChainArgs& a, const DSparkLaunch& l, int32_t k, cudaStream_t stream);

}  // namespace dfsel::cuda
