// The DSpark chain on one rank's shard (docs/dspark.md), as kernels the host side
// (host/backend/cuda_dspark.cu) enqueues around the exchanges of a run:
//   begin    outputs cleared, each block's state, its first W1 row, the hidden part of its
//            confidence head for every step, exchange 0's records (sharded W1);
//   pass     step k: every W2 row of the shard read once for all drafting blocks (the rows
//            staged in shared memory, each row's dot products in the eight-chain order of
//            kernels/common/dspark_math.cuh, or on tensor cores where W2 is BF16:
//            kernels/block/dspark_mma.cuh), the shard's best and largest l per block, when
//            sampling l stored and the shard's part of step k - 1's normaliser; its last CTA
//            writes the records and, on one rank, merges them;
//   merge    several ranks, after the exchange: the winner, the outputs, the next W1 row and
//            the next step's confidence (the same code the pass's last CTA runs on one rank).
// Every kernel but begin is launched chained (kernels/common/chain.cuh): a pass stages its
// first W2 tiles, which no kernel writes, before it waits for the kernel before it.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels/common/dspark_args.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {

using DSparkPassKernel = void (*)(DSparkChainArgs, DSparkPassShape, int32_t);

// How a pass is launched, decided at plan creation for the plan's largest run.
struct DSparkPassLaunch {
  DSparkPassShape shape;
  int grid;     // CTAs: every SM's resident CTAs, one wave
  int threads;  // two a row of the tile
  size_t smem;  // dynamic shared memory (the same for every instance)
  DSparkPassKernel kernels[4];  // for the plan's W2 type, reading a row for 1, 2, 4 or 8 blocks
                                // (tensor cores: 8, then 16 where max_blocks > 8)
};

// Whether the pass can take the product on tensor cores: W2 stored as BF16 (K-quants are
// widened to it), R a multiple of 16.
bool dspark_mma_supported(const DSparkChainArgs& a);

// Chooses the pass's shape for runs of up to a.max_blocks blocks on `device` (attributes set
// on the kernel): the product on tensor cores when `mma`, else the eight chains; `asked` if its
// rows are not 0, else the first tile of kDSparkTiles (kernels/policy.cuh) that fits.
// cudaErrorInvalidValue when the tile does not fit the device's shared memory, the W2 type is
// not one the kernels read, or mma is asked where it is not supported.
cudaError_t dspark_pass_setup(const DSparkChainArgs& a, int device, DSparkTile asked, bool mma, DSparkPassLaunch* out);

cudaError_t dspark_begin(const DSparkChainArgs& a, cudaStream_t stream);
// Step k in 1..N; k = N + 1 (sampling) computes only step N's normaliser. The instance reads
// each staged row for up to 1, 2, 4 or 8 blocks at once, the fewest that cover a.n_blocks
// (tensor cores: 8, or 16 above 8).
cudaError_t dspark_pass(const DSparkChainArgs& a, int32_t k, const DSparkPassLaunch& l, cudaStream_t stream);
// Exchange x's records of every rank, merged (several ranks).
cudaError_t dspark_merge(const DSparkChainArgs& a, int32_t x, cudaStream_t stream);

}  // namespace dfsel::cuda
