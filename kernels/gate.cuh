// gate: g[s] = W_h . h[row(s)] for every selected row (DESIGN section 2), W_h {n_embd, R} as
// stored (F32, F16, BF16, Q8_0), hidden F32 / F16 / BF16. W_h is read once per launch for
// all rows (tiles of rows share each loaded W_h row).
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/shard_topk.cuh"

namespace dfsel::cuda {

struct GateArgs {
  const void* w_h;  // R rows of n_embd elements
  dfsel_type w_type;
  size_t w_row_stride;  // bytes (ggml nb[1])
  const void* hidden;
  dfsel_type h_type;
  size_t h_row_stride;  // bytes
  int64_t n_embd;
  int32_t rank;         // R
  RowMap map;
  int32_t n_rows;
  float* g;             // [n_rows][R]
};

cudaError_t gate(const GateArgs& args, int num_sms, cudaStream_t stream);

}  // namespace dfsel::cuda
