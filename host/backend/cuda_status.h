// CUDA runtime errors as dfsel statuses, and the device guard every CUDA entry point uses.
// Host code of the CUDA backend and the device exchange only (needs cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

#include "host/status.h"

namespace dfsel {

inline Status cuda_fail(cudaError_t e, const char* what) {
  // Clear the runtime's record of a non-sticky error (a failed allocation), so that a later
  // launch check of this thread does not report it again as its own.
  cudaGetLastError();
  const dfsel_status code = e == cudaErrorMemoryAllocation ? DFSEL_OUT_OF_MEMORY : DFSEL_CUDA_ERROR;
  return fail(code, "%s failed: %s (%s)", what, cudaGetErrorString(e), cudaGetErrorName(e));
}

#define DFSEL_CUDA_TRY(expr, what)                               \
  do {                                                           \
    const cudaError_t e_ = (expr);                               \
    if (e_ != cudaSuccess) return ::dfsel::cuda_fail(e_, what);  \
  } while (0)

// Makes a plan's device current for the duration of a call and restores the caller's.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    if (cudaGetDevice(&prev_) != cudaSuccess) prev_ = -1;
    if (prev_ != device) cudaSetDevice(device);
  }
  ~DeviceGuard() {
    if (prev_ >= 0) cudaSetDevice(prev_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int prev_ = -1;
};

}  // namespace dfsel
