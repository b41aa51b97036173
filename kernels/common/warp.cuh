// A warp's shuffles of 64-bit words: a shuffle moves 32 bits, so a word moves as two halves.
// Every lane of the warp takes part (full mask).
#pragma once

#include <cstdint>

namespace dfsel::cuda {

__device__ __forceinline__ uint64_t shfl_xor_u64(uint64_t v, int mask) {
  const uint32_t lo = __shfl_xor_sync(0xffffffffu, (uint32_t)v, mask);
  const uint32_t hi = __shfl_xor_sync(0xffffffffu, (uint32_t)(v >> 32), mask);
  return ((uint64_t)hi << 32) | lo;
}

__device__ __forceinline__ uint64_t shfl_down_u64(uint64_t v, int delta) {
  const uint32_t lo = __shfl_down_sync(0xffffffffu, (uint32_t)v, delta);
  const uint32_t hi = __shfl_down_sync(0xffffffffu, (uint32_t)(v >> 32), delta);
  return ((uint64_t)hi << 32) | lo;
}

}  // namespace dfsel::cuda
