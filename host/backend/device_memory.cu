// The device copies of plan creation (device_memory.h): quantised rows read to the host and their
// BF16 copies uploaded and released, a CUDA DSpark plan's d2t read to be checked, and where a
// CUDA plan's weights live. They are CUDA runtime calls, so
// they are compiled with the CUDA backend; the widening itself is host/plan/widen_weights.cpp,
// and a build without CUDA answers DFSEL_UNSUPPORTED (backend_stubs.cpp).
#include <cuda_runtime.h>

#include "host/backend/cuda_status.h"
#include "host/backend/device_memory.h"

namespace dfsel {

Status device_rows_to_host(const void* src, size_t pitch, size_t row_bytes, int64_t rows, int device, void* dst,
                           const char* what) {
  DeviceGuard g(device);
  const cudaError_t e = cudaMemcpy2D(dst, row_bytes, src, pitch, row_bytes, (size_t)rows, cudaMemcpyDeviceToHost);
  if (e != cudaSuccess) return cuda_fail(e, what);
  return Status::success();
}

Status device_upload(const void* src, size_t bytes, int device, void** out) {
  DeviceGuard g(device);
  DFSEL_CUDA_TRY(cudaMalloc(out, bytes), "cudaMalloc of widened weights");
  const cudaError_t e = cudaMemcpy(*out, src, bytes, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(*out);
    *out = nullptr;
    return cuda_fail(e, "uploading widened weights");
  }
  return Status::success();
}

void device_release(void* p, int device) {
  DeviceGuard g(device);
  cudaFree(p);
}

Status check_device_readable(const void* p, int device, const char* what) {
  DFSEL_TRY(check_device(device));  // a bad device is reported as such first
  cudaPointerAttributes a{};
  DFSEL_CUDA_TRY(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes");
  if (a.type == cudaMemoryTypeUnregistered)
    return fail(DFSEL_INVALID_ARGUMENT, "%s = %p is host memory that CUDA did not allocate or register; a CUDA plan "
                "reads it on device %d: give device memory (or cudaMallocHost / cudaHostRegister memory)", what, p,
                device);
  if (a.type == cudaMemoryTypeDevice && a.device != device)
    return fail(DFSEL_INVALID_ARGUMENT, "%s = %p is memory of CUDA device %d but the plan runs on device %d", what, p,
                a.device, device);
  return Status::success();
}

Status check_host_readable(const void* p, const char* what) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    cudaGetLastError();  // no driver or no GPU: nothing here is device memory
    return Status::success();
  }
  cudaPointerAttributes a{};
  DFSEL_CUDA_TRY(cudaPointerGetAttributes(&a, p), "cudaPointerGetAttributes");
  if (a.type == cudaMemoryTypeDevice)
    return fail(DFSEL_INVALID_ARGUMENT, "%s = %p is memory of CUDA device %d; a CPU plan reads host memory", what, p,
                a.device);
  return Status::success();
}

}  // namespace dfsel
