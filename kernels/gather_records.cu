// gather_records: a CTA copies one rank's records, 16 bytes a thread where the buffers and the
// size allow, else a byte at a time.
#include "kernels/gather_records.cuh"

#include <stdint.h>

#include "kernels/cluster_launch.cuh"
#include "kernels/common/chain.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kGatherThreads = 256;

__global__ void __launch_bounds__(kGatherThreads) gather_kernel(const __grid_constant__ GatherRecordsArgs a) {
  chain_release();
  chain_wait();  // the send buffers the kernels before it wrote
  const uint8_t* src = static_cast<const uint8_t*>(a.send[blockIdx.x]);
  uint8_t* dst = static_cast<uint8_t*>(a.recv) + (size_t)blockIdx.x * a.bytes;
  if (((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst) | a.bytes) & 15) == 0) {
    for (size_t i = threadIdx.x; i < a.bytes / 16; i += kGatherThreads)
      reinterpret_cast<uint4*>(dst)[i] = __ldcg(reinterpret_cast<const uint4*>(src) + i);
  } else {
    for (size_t i = threadIdx.x; i < a.bytes; i += kGatherThreads) dst[i] = __ldcg(src + i);
  }
}

}  // namespace

cudaError_t gather_records(const GatherRecordsArgs& args, cudaStream_t stream) {
  if (args.n < 1 || args.n > kGatherMaxRanks) return cudaErrorInvalidValue;
  if (args.bytes == 0) return cudaSuccess;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)args.n), kGatherThreads, 0, stream, 1, true, attr);
  return cudaLaunchKernelEx(&cfg, gather_kernel, args);
}

}  // namespace dfsel::cuda
