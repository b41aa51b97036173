// gate: g[s] = W_h . h[row(s)] for every selected row (SPEC section 2.3), W_h {n_embd, R} as
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
  int32_t chained;      // nonzero: may start while the previous kernel in the stream runs
                        // (kernels/common/chain.cuh), which must not touch g
};

// What the gate needs to know of its device, read once at plan creation, and two tuning
// overrides that benchmarks and tests set (a plan leaves them at "choose").
struct GateDevice {
  int num_sms;
  int max_split;    // the largest cluster n_embd is split over: 16 (non-portable) where the
                    // device holds one, else 8
  int force_tile;   // -1: chosen by the row count; else kGateTiles index (gate.cu)
  int force_split;  // 0: chosen; else the cluster size (a power of two: rounded down; at most
                    // the n_embd stages)
};
cudaError_t gate_device(int device, GateDevice* out);

// How gate() runs for these sizes: the tile shape (index), the cluster size n_embd is split
// over and the CTAs launched.
struct GateShape {
  int tile;
  int split;
  int64_t ctas;
};
GateShape gate_shape(const GateArgs& args, const GateDevice& dev);
constexpr int kGateTiles = 2;
const char* gate_tile_name(int tile);

// Enqueues the gate. The arguments are the plan's, validated at its creation (types, shapes,
// Q8_0 rows a multiple of 32); any row count up to 2^31 - 1 runs, with no limit of its own: the
// grid holds at most 65535 row groups and its CTAs take the groups past that in turn. Never
// allocates. The summation order depends only on the
// arguments' sizes and types and on dev, so equal inputs give bitwise equal g.
cudaError_t gate(const GateArgs& args, const GateDevice& dev, cudaStream_t stream);

}  // namespace dfsel::cuda
