// The answers of a build without CUDA.
#include "host/backend/backend.h"
#include "host/backend/device_memory.h"
#include "host/backend/dspark_backend.h"

namespace dfsel {

#if !defined(DFSEL_WITH_CUDA)
Status make_cuda_backend(const dfsel_plan_desc&, const PlanShape&, std::unique_ptr<Backend>*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status cuda_workspace_bytes(const dfsel_plan_desc&, const PlanShape&, size_t*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status cuda_device_count(int* n) {
  *n = 0;
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status device_rows_to_host(const void*, size_t, size_t, int64_t, int, void*, const char*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status device_upload(const void*, size_t, int, void**) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
void device_release(void*, int) {}
Status check_device_readable(const void*, int, const char*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status check_host_readable(const void*, const char*) { return Status::success(); }
Status make_cuda_dspark_backend(const dfsel_dspark_plan_desc&, const DSparkShape&, std::unique_ptr<DSparkBackend>*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
Status cuda_dspark_workspace_bytes(const dfsel_dspark_plan_desc&, const DSparkShape&, size_t*) {
  return fail(DFSEL_UNSUPPORTED, "this build of dfsel has no CUDA backend");
}
#endif

}  // namespace dfsel
