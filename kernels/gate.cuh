// gate: g[s] = W_h . h[row(s)] for every selected row (DESIGN section 2), W_h {n_embd, R} as
// stored (F32, F16, BF16, Q8_0), hidden F32 / F16 / BF16.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/row_map.cuh"

namespace dfsel::cuda {

struct GateArgs {
  const void* w_h;  // R rows of n_embd elements
  dfsel_type w_type;
  size_t w_row_stride;  // bytes (ggml nb[1])
  const void* hidden;
  dfsel_type h_type;
  size_t h_row_stride;  // bytes
  int64_t n_embd;
  int32_t R;
  RowMap map;
  int32_t n_rows;
  float* g;             // [n_rows][R]
};

// What the gate needs to know of its device, read once at plan creation.
struct GateDevice {
  int num_sms;
  int cluster_ok;  // thread-block clusters (sm_90): n_embd is then split over a cluster
  int max_split;   // the largest cluster: 8, the portable size (benchmarks sweep others)
};
cudaError_t gate_device(int device, GateDevice* out);

// The cluster size gate() uses for these sizes (1: no split).
int gate_splits(int32_t n_rows, int32_t R, int64_t n_embd, const GateDevice& dev);

// Enqueues the gate. The arguments are the plan's, validated at its creation (types, shapes,
// Q8_0 rows a multiple of 32, at most 65535 tiles of 16 rows); never allocates.
cudaError_t gate(const GateArgs& args, const GateDevice& dev, cudaStream_t stream);

}  // namespace dfsel::cuda
