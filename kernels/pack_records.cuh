// pack_records: the vocabulary-sharded placement's half of the exchange (SPEC
// section 4.6). After shard_topk wrote this rank's candidates into its send buffer, copies each
// local candidate's E_prev and E_next rows into the record rows, and writes the anchor area:
// owned = 1 plus the anchor's E_prev row on the rank whose range holds the anchor, owned = 0
// everywhere else (anchors outside every range included). Rows are copied as stored.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/exchange_layout.cuh"

namespace dfsel::cuda {

struct PackRecordsArgs {
  uint8_t* send;            // this rank's layout (layout.sharded); cands already written
  ExchangeLayout layout;
  const void* e_prev;       // local rows {R, v_end - v_begin}: row v - v_begin
  const void* e_next;
  size_t cb_row_stride;     // bytes between local rows (ggml nb[1]), both codebooks
  size_t cb_row_bytes;      // row_bytes(type, R): bytes copied per row, <= layout.row_pad
  int64_t v_begin;          // this rank owns ids [v_begin, v_end)
  int64_t v_end;
  const int32_t* anchors;   // [layout.n_blocks]
};

// One launch over every (drafted row, candidate) and every block, chained after the top-K that
// wrote the records (kernels/common/chain.cuh); never allocates, never synchronises;
// graph-capturable. A candidate id outside [v_begin, v_end) (none from
// shard_topk) gets zero rows rather than an out-of-range read.
cudaError_t pack_records(const PackRecordsArgs& args, cudaStream_t stream);

}  // namespace dfsel::cuda
