// Device-side inputs for the benchmarks: hashed pseudo-random values written by a kernel, so
// that filling gigabytes of logits and codebooks takes milliseconds, not seconds.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::bench {

__host__ __device__ inline uint64_t hash64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

// Uniform in [-scale, scale) from the element index and seed.
__host__ __device__ inline float hashed_value(uint64_t seed, uint64_t i, float scale) {
  return ((float)(hash64(seed ^ (i * 0x2545F4914F6CDD1Dull)) >> 40) * (2.0f / 16777216.0f) - 1.0f) * scale;
}

static __global__ void fill_hashed_kernel(uint8_t* p, dfsel_type t, size_t n, float scale, uint64_t seed) {
  const size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += stride) {
    if (t == DFSEL_TYPE_Q8_0) {
      if (i % kQ8Block == 0) {  // one thread per block writes its scale
        BlockQ8_0* b = reinterpret_cast<BlockQ8_0*>(p) + i / kQ8Block;
        b->d = float_to_f16(scale / 127.0f);
      }
      reinterpret_cast<BlockQ8_0*>(p)[i / kQ8Block].qs[i % kQ8Block] = (int8_t)(hash64(seed ^ i) % 255 - 127);
      continue;
    }
    const float v = hashed_value(seed, i, scale);
    if (t == DFSEL_TYPE_F32) reinterpret_cast<float*>(p)[i] = v;
    else if (t == DFSEL_TYPE_BF16) reinterpret_cast<uint16_t*>(p)[i] = float_to_bf16(v);
    else reinterpret_cast<uint16_t*>(p)[i] = float_to_f16(v);
  }
}

// n elements of type t (n a multiple of 32 for Q8_0) at p.
inline cudaError_t fill_hashed(void* p, dfsel_type t, size_t n, float scale, uint64_t seed, cudaStream_t st = nullptr) {
  fill_hashed_kernel<<<2048, 256, 0, st>>>(static_cast<uint8_t*>(p), t, n, scale, seed);
  return cudaGetLastError();
}

inline size_t elem_bytes(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

inline dfsel_tensor matrix(const void* data, dfsel_type t, int64_t ne0, int64_t ne1, size_t nb1) {
  return dfsel_tensor_2d(data, t, ne0, ne1, nb1);
}

// A device allocation freed with its owner.
class DeviceMem {
 public:
  DeviceMem() = default;
  explicit DeviceMem(size_t bytes, int device = -1) { alloc(bytes, device); }
  ~DeviceMem() { reset(); }
  DeviceMem(const DeviceMem&) = delete;
  DeviceMem& operator=(const DeviceMem&) = delete;
  cudaError_t alloc(size_t bytes, int device = -1) {
    reset();
    if (device >= 0) cudaSetDevice(device);
    device_ = device;
    return cudaMalloc(&p_, bytes ? bytes : 16);
  }
  void reset() {
    if (p_) {
      if (device_ >= 0) cudaSetDevice(device_);
      cudaFree(p_);
    }
    p_ = nullptr;
  }
  template <typename T = uint8_t>
  T* as() const { return static_cast<T*>(p_); }
  void* get() const { return p_; }

 private:
  void* p_ = nullptr;
  int device_ = -1;
};

// `copies` F32 inputs of rows x vocab hashed values (rotation_copies of them, so that
// back-to-back calls miss L2); false with the benchmark skipped when an allocation fails.
inline bool hashed_logits(benchmark::State& state, int32_t rows, int64_t vocab, int copies,
                          std::vector<std::unique_ptr<DeviceMem>>* in) {
  const size_t bytes = (size_t)rows * vocab * 4;
  for (int c = 0; c < copies; ++c) {
    in->push_back(std::make_unique<DeviceMem>());
    const cudaError_t a = in->back()->alloc(bytes);
    const cudaError_t f = a == cudaSuccess ? fill_hashed(in->back()->get(), DFSEL_TYPE_F32, (size_t)rows * vocab, 12.0f,
                                                         7654321ull * (c + 1))
                                           : a;
    if (f != cudaSuccess) {
      state.SkipWithError((std::string("allocating and filling the inputs: ") + cudaGetErrorString(f)).c_str());
      return false;
    }
  }
  return true;
}

}  // namespace dfsel::bench
