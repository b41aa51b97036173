// GPU test support: skip cleanly without a GPU, RAII device buffers, poisoned outputs.
#pragma once

#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

namespace dfsel::test {

inline int gpu_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
}

#define DFSEL_REQUIRE_GPUS(n)                                                              \
  do {                                                                                     \
    const int have_ = ::dfsel::test::gpu_count();                                          \
    if (have_ < (n)) GTEST_SKIP() << "needs " << (n) << " CUDA GPU(s), found " << have_;    \
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
