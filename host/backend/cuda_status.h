// CUDA runtime errors as dfsel statuses, the stream check and the device guard every CUDA
// entry point uses.
// Host code of the CUDA backend and the device exchange only (needs cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

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

// A stream given to a run, a wait or a check must belong to the plan's device. CUDA refuses
// the device query on a capturing stream (and the capture with it), so it is skipped there:
// the launches check then. Waiting on a capturing stream would invalidate the caller's
// capture, so a wait (capture_ok false) refuses one instead.
inline Status check_stream(cudaStream_t st, int device, bool capture_ok) {
  cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  DFSEL_CUDA_TRY(cudaStreamIsCapturing(st, &cs), "cudaStreamIsCapturing");
  if (cs != cudaStreamCaptureStatusNone) {
    if (capture_ok) return Status::success();
    return fail(DFSEL_INVALID_ARGUMENT, "stream %p is capturing a CUDA graph; check the plan after the graph has been "
                "launched", static_cast<void*>(st));
  }
  int on = -1;
  DFSEL_CUDA_TRY(cudaStreamGetDevice(st, &on), "cudaStreamGetDevice of the stream");
  if (on != device)
    return fail(DFSEL_INVALID_ARGUMENT, "stream %p belongs to CUDA device %d but the plan runs on device %d",
                static_cast<void*>(st), on, device);
  return Status::success();
}

// A plan's device must be one of those present.
inline Status check_device(int device) {
  int n = 0;
  DFSEL_CUDA_TRY(cudaGetDeviceCount(&n), "cudaGetDeviceCount");
  if (device < 0 || device >= n)
    return fail(DFSEL_INVALID_ARGUMENT, "device = %d is outside the %d CUDA devices present", device, n);
  return Status::success();
}

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

// Whether the work a plan enqueued on stream has completed (a failed stream is an error), and
// the blocking wait for it: the query and wait of every CUDA backend.
inline Status query_run(cudaStream_t st, int device, bool* done) {
  DeviceGuard guard(device);
  DFSEL_TRY(check_stream(st, device, false));
  const cudaError_t e = cudaStreamQuery(st);
  *done = e == cudaSuccess;
  if (e != cudaSuccess && e != cudaErrorNotReady) return cuda_fail(e, "the plan's last run");
  return Status::success();
}

inline Status wait_run(cudaStream_t st, int device) {
  DeviceGuard guard(device);
  DFSEL_TRY(check_stream(st, device, false));
  DFSEL_CUDA_TRY(cudaStreamSynchronize(st), "the plan's last run");
  return Status::success();
}

// A CUDA plan's workspace on the current device: the caller's (at least `need` bytes, 256-byte
// aligned) or one allocated into *owned, zeroed either way (the kernels' counters and flags
// start at zero and leave them so; the record bytes an exchange copies and a step does not
// write are defined).
inline Status device_workspace(void* given, size_t given_bytes, size_t need, void** owned, uint8_t** base) {
  if (given) {
    if (given_bytes < need)
      return fail(DFSEL_INVALID_ARGUMENT, "workspace_bytes = %zu is less than the %zu bytes this plan needs",
                  given_bytes, need);
    if (reinterpret_cast<uintptr_t>(given) % 256 != 0)
      return fail(DFSEL_INVALID_ARGUMENT, "workspace = %p is not aligned to 256 bytes", given);
    *base = static_cast<uint8_t*>(given);
  } else {
    DFSEL_CUDA_TRY(cudaMalloc(owned, need), "cudaMalloc of the plan workspace");
    *base = static_cast<uint8_t*>(*owned);
  }
  DFSEL_CUDA_TRY(cudaMemset(*base, 0, need), "cudaMemset of the plan workspace");
  return Status::success();
}

}  // namespace dfsel
