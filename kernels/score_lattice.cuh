// score_lattice: after the exchange, every drafted position of every block
//   1. merges the S*K records of its row into the global top-K (order.cuh, cand_rank),
//   2. computes the unary u = transform(z) and the K x K scores against the predecessors
//      (the anchor at p = 1, the merged candidates of p - 1 otherwise), codebook rows read
//      as stored from the local codebooks (replicated) or from the records (sharded),
//   3. and the last position to finish in a block walks it (greedy or sampling, p_min),
// all in one launch: one CTA per (block, position). Writes the native outputs and,
// optionally, llama.cpp's packed lattice rows (DESIGN section 4).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/exchange_layout.cuh"
#include "kernels/common/selector_math.cuh"

namespace dfsel::cuda {

struct LatticeArgs {
  // Exchange: recv holds n_ranks copies of the layout, rank r's at recv + r * layout.bytes.
  const uint8_t* recv;
  ExchangeLayout layout;
  int32_t n_ranks;
  int32_t k;
  int32_t rank;          // R
  int32_t block_size;
  int32_t n_blocks;
  Transform transform;
  // Codebooks: replicated placement reads rows here ({R, V}, row v at base + v * row_stride);
  // sharded placement (layout.sharded) reads them from recv and ignores these.
  const void* e_prev;
  const void* e_next;
  dfsel_type cb_type;
  size_t cb_row_stride;
  int64_t n_vocab;
  const int32_t* anchors;  // [n_blocks]
  const float* g;          // [n_blocks * L][R] from gate
  float temperature;       // <= 0 greedy
  float p_min;
  uint64_t seed;
  // Outputs (any may be null except path, n_emitted).
  int32_t* cand_ids;
  float* unary;
  float* scores;
  float* q;
  int32_t* path;
  int32_t* n_emitted;
  float* packed;
  size_t packed_row_stride;  // bytes
  int64_t n_embd;            // floats per packed row
  // Workspace: the walk's inputs and completion counters.
  float* lattice;           // [n_blocks * L][K][K]
  int2* choices;            // [n_blocks * L][K]: the walk's step from each lattice row (with
                            // the p_min stop flag) and the token id it emits
  unsigned* block_counters; // [max_blocks], zeroed once at set-up, left reusable
  int32_t* error;           // set to 1 + block index of an anchor out of range; never cleared here
};

// Shared memory and workspace sizes are derived from k and rank; k <= 64, rank <= 1024.
cudaError_t score_lattice(const LatticeArgs& args, cudaStream_t stream);

}  // namespace dfsel::cuda
