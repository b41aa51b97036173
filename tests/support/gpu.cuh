// GPU test support: skip cleanly without a GPU (or fail, under DFSEL_REQUIRE_GPU=1), RAII
// device buffers, poisoned outputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace dfsel::test {

// The CUDA GPUs this process can use: cudaGetDeviceCount, and a context made on device 0 (a
// driver that counts devices may still fail to start one). `why` says why there are none.
struct GpuProbe {
  int count = 0;
  std::string why;
};

inline GpuProbe probe_gpus() {
  GpuProbe p;
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    p.why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e);
  } else if (n == 0) {
    p.why = "cudaGetDeviceCount found no CUDA device";
  } else {
    int current = 0;
    cudaGetDevice(&current);
    e = cudaSetDevice(0);
    if (e == cudaSuccess) e = cudaFree(nullptr);  // makes device 0's context
    cudaSetDevice(current);
    if (e == cudaSuccess) p.count = n;
    else p.why = std::string("creating a CUDA context on device 0 failed: ") + cudaGetErrorName(e) + ": " +
                 cudaGetErrorString(e);
  }
  cudaGetLastError();
  return p;
}

// Probed once per process.
inline const GpuProbe& gpu_probe() {
  static const GpuProbe p = probe_gpus();
  return p;
}

inline int gpu_count() { return gpu_probe().count; }

// DFSEL_REQUIRE_GPU=1 (scripts/gpu-check.sh, python/run-gpu-tests.sh): this machine has a GPU,
// so a GPU test that finds none working fails instead of skipping.
inline bool gpu_required() {
  const char* v = std::getenv("DFSEL_REQUIRE_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

// Skips a test that needs n GPUs where fewer work. Under DFSEL_REQUIRE_GPU=1 no working GPU at
// all is a failure that names the CUDA error, so that a GPU machine whose driver or device
// fails does not pass every GPU test as skipped; fewer GPUs than n (two on a one-GPU machine)
// still skips.
#define DFSEL_REQUIRE_GPUS(n)                                                                   \
  do {                                                                                          \
    const ::dfsel::test::GpuProbe& gpus_ = ::dfsel::test::gpu_probe();                          \
    if (gpus_.count == 0 && ::dfsel::test::gpu_required())                                      \
      FAIL() << "DFSEL_REQUIRE_GPU=1 but no CUDA GPU works: " << gpus_.why;                     \
    if (gpus_.count < (n))                                                                      \
      GTEST_SKIP() << "needs " << (n) << " CUDA GPU(s), found " << gpus_.count                  \
                   << (gpus_.why.empty() ? std::string() : " (" + gpus_.why + ")");             \
  } while (0)

#define CUDA_OK(expr)                                                        \
  do {                                                                       \
    const cudaError_t e_ = (expr);                                           \
    ASSERT_EQ(e_, cudaSuccess) << #expr << ": " << cudaGetErrorString(e_);   \
  } while (0)

// A device allocation that frees itself; poison() fills it with 0xff bytes (NaN floats, -1 ints)
// so that an element the kernel failed to write shows up.
template <typename T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t n) { resize(n); }
  ~DeviceBuffer() { if (p_) cudaFree(p_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void resize(size_t n) {
    if (p_) cudaFree(p_);
    p_ = nullptr;
    n_ = n;
    if (n) cudaMalloc(&p_, n * sizeof(T));
  }
  T* get() const { return p_; }
  size_t size() const { return n_; }
  void upload(const T* src, size_t n) { cudaMemcpy(p_, src, n * sizeof(T), cudaMemcpyHostToDevice); }
  void upload(const std::vector<T>& v) { upload(v.data(), v.size()); }
  std::vector<T> download() const {
    std::vector<T> v(n_);
    if (n_) cudaMemcpy(v.data(), p_, n_ * sizeof(T), cudaMemcpyDeviceToHost);
    return v;
  }
  void poison() { if (n_) cudaMemset(p_, 0xff, n_ * sizeof(T)); }
  void zero() { if (n_) cudaMemset(p_, 0, n_ * sizeof(T)); }

 private:
  T* p_ = nullptr;
  size_t n_ = 0;
};

}  // namespace dfsel::test
