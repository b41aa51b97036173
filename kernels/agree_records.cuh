// agree_records: a DFlash2 group rank's agree section (kernels/common/agree_record.cuh), what it
// was given for each block, written into its send buffer before the exchange so that the lattice
// of every rank can compare every rank's.
#pragma once

#include <cuda_runtime.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/exchange_layout.cuh"
#include "kernels/common/row_map.cuh"

namespace dfsel::cuda {

struct AgreeRecordsArgs {
  uint8_t* send;  // this rank's records (layout.agree_off != 0)
  ExchangeLayout layout;
  const uint8_t* hidden;  // the run's hidden rows, as stored
  size_t h_row_stride;
  dfsel_type h_type;
  int64_t n_embd;
  RowMap map;              // drafted row d = b * L + p - 1 reads hidden row map_row(map, d)
  int32_t L;               // drafted rows a block
  const int32_t* anchors;  // [layout.n_blocks]
  uint32_t scalars;        // the records' words the host computes: the run's scalars and W_h
  uint32_t weights;
  uint64_t* sums;     // [layout.n_blocks] scratch, zero between launches (the last CTA of a block
  uint32_t* tickets;  // resets both)
};

// n_blocks x L CTAs, each digesting one drafted hidden row; the last of a block writes the
// record. Chained after the step's other kernels (kernels/common/chain.cuh:
// before its wait it reads only the step's inputs and writes only the agree section and its
// scratch). Never allocates; graph-capturable.
cudaError_t agree_records(const AgreeRecordsArgs& args, cudaStream_t stream);

}  // namespace dfsel::cuda
