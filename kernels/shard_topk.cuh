// shard_topk: per selected row of a logits shard, the top-K with global ids, one pass over
// the logits (SPEC section 4.2). Rows of few rows are split over many blocks and the
// partial lists merged by the last block of each row; the output is in candidate order.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/limits.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/row_map.cuh"

namespace dfsel::cuda {

struct ShardTopKArgs {
  const void* logits;   // row-strided, F32 / F16 / BF16
  dfsel_type type;
  int64_t n_cols;       // >= k
  size_t row_stride;    // bytes between logits rows (ggml nb[1])
  RowMap map;
  int32_t n_rows;       // selected rows
  int32_t k;            // 1..kMaxTopK
  int64_t id_offset;    // global id of column 0 (v_begin)
  CandRec* out;         // row s's list at out + s * out_stride, k records in candidate order
  size_t out_stride;    // in records
  void* scratch;        // shard_topk_scratch_bytes; zeroed once at set-up, left reusable
  int32_t splits;       // 0: the built-in heuristic; > 0: chunks per row, forced (tuning sweeps)
  int32_t shares_sms;   // nonzero: another kernel runs beside; size the grid to leave it room
  int32_t chained;      // nonzero: may start while the previous kernel in the stream runs
                        // (kernels/common/chain.cuh), which must not touch the logits, the
                        // scratch or out (the step's gate)
};

// Scratch for up to n_rows x n_cols on a device with num_sms multiprocessors.
size_t shard_topk_scratch_bytes(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms);

// Scratch for a forced split count (ShardTopKArgs::splits).
size_t shard_topk_scratch_bytes_split(int32_t n_rows, int32_t k, int32_t splits, int num_sms);

// CTAs per row that shard_topk launches for these arguments (the grid is n_rows times this);
// 0 for arguments it would refuse. Benchmarks size their floor kernels with it.
int shard_topk_splits(const ShardTopKArgs& args, int num_sms);

// Whether the grid for these arguments (splits > 0: the count shard_topk_splits gave) is resident
// all at once, one wave: rows x splits CTAs against the CTAs an SM holds beside the gate or alone.
bool shard_topk_one_wave(const ShardTopKArgs& args, int num_sms);

// Enqueues the selection on stream; never allocates, never synchronises; graph-capturable.
cudaError_t shard_topk(const ShardTopKArgs& args, int num_sms, cudaStream_t stream);

}  // namespace dfsel::cuda
