// The launch prelude of every timed replay (bench_util.cuh): one thread spins on the GPU's
// global timer so that the start event and the graph launch queue up behind it, and the time
// between the events is the graph's device time alone, not the host's launch latency too.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "bench_util.cuh"

namespace dfsel::bench {
namespace {

__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void spin_kernel(unsigned long long ns) {
  const unsigned long long t0 = global_ns();
  while (global_ns() - t0 < ns) {
  }
}

}  // namespace

bool launch_prelude_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DFSEL_BENCH_PRELUDE");
    return v == nullptr || std::strcmp(v, "0") != 0;
  }();
  return on;
}

cudaError_t launch_prelude(cudaStream_t stream) {
  if (!launch_prelude_enabled()) return cudaSuccess;
  spin_kernel<<<1, 1, 0, stream>>>(kLaunchPreludeNs);
  return cudaGetLastError();
}

}  // namespace dfsel::bench
