// gather_records: the in-process exchange between ranks of one device as one kernel (host/
// exchange/in_process_cuda.cu): rank r's send buffer into slot r of the receive buffer, for
// every rank, where n copies would each be a node of their own between the kernels of a step.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>

namespace dfsel::cuda {

constexpr int kGatherMaxRanks = 16;  // more ranks on one device: the caller copies instead
// Larger records are copied instead: one CTA a rank is slower than the copies there. One H200,
// 2 ranks, graph replay: DSpark at 1 block (records of under 1 KB) 264.9 -> 248.5 us a chain,
// the DFlash2 step replicated (about 2 KB) 46.8 -> 45.0, sharded (codebook rows, over 16 KB)
// 52.2 -> 75.6.
constexpr size_t kGatherMaxBytes = 16384;

struct GatherRecordsArgs {
  void* recv;                              // n * bytes
  const void* send[kGatherMaxRanks];       // rank r's bytes
  int n;
  size_t bytes;
};

// One CTA a rank, chained after the kernel that wrote the last send buffer
// (kernels/common/chain.cuh); graph-capturable, allocates nothing.
cudaError_t gather_records(const GatherRecordsArgs& args, cudaStream_t stream);

}  // namespace dfsel::cuda
