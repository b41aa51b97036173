// A barrier over every CTA of a cooperative launch (all of them resident): a counter of
// arrivals that a kernel before the launch zeroes. Every write a CTA made before the barrier is
// visible to every CTA after it (the CTA's barrier, then a GPU-scope fence before the arrival,
// and an acquiring read of the counter after it).
#pragma once

#include <stdint.h>

namespace dfsel::cuda {

__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

// *arrivals counts every CTA's arrivals since it was last zeroed (by a kernel before the
// launch); the n-th barrier of the launch returns once n x the grid's CTAs have arrived. An
// arrival is one fire-and-forget add and the wait one polled word: no reset, no generation,
// no round trip of a last arriver. The whole CTA calls it, every CTA the same number of times.
__device__ __forceinline__ void grid_barrier(uint32_t* arrivals, uint32_t n) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const uint32_t target = n * gridDim.x * gridDim.y * gridDim.z;
    __threadfence();
    asm volatile("red.relaxed.gpu.global.add.u32 [%0], 1;" ::"l"(arrivals) : "memory");
    while (ld_acquire_gpu(arrivals) < target) {
    }
  }
  __syncthreads();
}

}  // namespace dfsel::cuda
