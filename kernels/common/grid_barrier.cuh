// A barrier over every CTA of a cooperative launch (all of them resident), reusable from one
// launch to the next without a reset: an arrival counter that the last arriver clears, and a
// generation word that it advances. Every write a CTA made before the barrier is visible to
// every CTA after it (the CTA's barrier, then a GPU-scope fence before the arrival, and an
// acquiring read of the generation after it).
#pragma once

#include <stdint.h>

namespace dfsel::cuda {

__device__ __forceinline__ uint32_t ld_acquire_gpu(const uint32_t* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_gpu(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// bar[0]: arrivals (0 between barriers), bar[1]: the generation. The whole CTA calls it.
__device__ __forceinline__ void grid_barrier(uint32_t* bar) {
  __syncthreads();
  if (threadIdx.x == 0) {
    // The generation cannot move before this CTA arrives, so this is the current one.
    const uint32_t gen = ld_acquire_gpu(bar + 1);
    __threadfence();
    if (atomicAdd(bar, 1u) == gridDim.x * gridDim.y * gridDim.z - 1) {
      atomicExch(bar, 0u);  // before the generation moves: nobody arrives at the next one sooner
      __threadfence();
      st_release_gpu(bar + 1, gen + 1);
    } else {
      while (ld_acquire_gpu(bar + 1) == gen) {
      }
    }
  }
  __syncthreads();
}

}  // namespace dfsel::cuda
