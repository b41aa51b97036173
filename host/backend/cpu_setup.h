// What a CPU backend of either plan kind (cpu_backend.cpp, cpu_dspark.cpp) needs before it is
// built, checked once for both: its workspace fits the address space, a caller's workspace is
// large enough and 16-byte aligned (the carve places floats and records at 16-byte offsets),
// one the plan allocates is no larger than the machine's memory, and the worker threads are
// at most kMaxCpuThreads. Then the build itself, whose failures (memory, threads) come back
// as statuses.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <new>
#include <system_error>

#include "host/backend/cpu_pool.h"
#include "host/status.h"

namespace dfsel {

constexpr int32_t kMaxCpuThreads = 1024;

struct CpuSetup {
  void* workspace;         // the caller's, or NULL: the plan allocates it
  size_t workspace_bytes;  // the caller's
  size_t need;             // the carve's total; SIZE_MAX when it does not fit the address space
  // The description's values that size the carve, named by the refusals.
  int32_t max_blocks, n_ranks;
  int64_t n_embd;
  int32_t n_threads;
};

Status check_cpu_setup(const CpuSetup& s);

// Builds the backend with make(), which returns a new object; what_else names what the backend
// allocates beside the workspace (" and W_h widened to ...", or "").
template <class Base, class Make>
Status build_cpu_backend(const CpuSetup& s, const char* what_else, std::unique_ptr<Base>* out, Make make) {
  try {
    out->reset(make());
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes%s could not be allocated", s.need, what_else);
  } catch (const std::system_error& e) {
    return fail(DFSEL_INTERNAL_ERROR, "the CPU backend's %d worker threads could not be started: %s",
                WorkerPool::resolve(s.n_threads), e.what());
  }
  return Status::success();
}

}  // namespace dfsel
