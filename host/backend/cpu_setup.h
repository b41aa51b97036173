// What a CPU backend of either plan kind (cpu_backend.cpp, cpu_dspark.cpp) needs before it is
// built, checked once for both: its workspace fits the address space, a caller's workspace is
// large enough and 16-byte aligned (the carve places floats and records at 16-byte offsets),
// one the plan allocates is no larger than the memory the process can take now (the machine's,
// what the kernel counts available, what its memory cgroup leaves), and the worker threads are
// at most kMaxCpuThreads. Then the build itself, whose failures (memory, threads) come back
// as statuses.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>
#include <new>
#include <string>
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

// The memory a workspace the plan allocates must fit in, in bytes; 0 where the system does not
// say. Creation zero-fills the workspace: where the system overcommits, an allocation larger
// than what is left succeeds and the zeroing gets the process killed (by the kernel, or by its
// memory cgroup's limit) instead of a status returned.
struct HostMemory {
  size_t physical;     // the machine's memory (sysconf)
  size_t available;    // what the kernel counts available now: MemAvailable of /proc/meminfo
  size_t cgroup_left;  // the least that the process's memory cgroup or one above it leaves: its
                       // limit less what it holds but cannot reclaim (usage less inactive file pages)
};

// HostMemory as the system says it now. root is "" for the system's own /proc and
// /sys/fs/cgroup; a test passes a folder laid out the same way (physical is sysconf's either way).
// cgroup v2 (memory.max, memory.current) and v1 (memory.limit_in_bytes, memory.usage_in_bytes),
// mounted at /sys/fs/cgroup and /sys/fs/cgroup/memory.
HostMemory read_host_memory(const std::string& root = "");

Status check_cpu_setup(const CpuSetup& s, const HostMemory& memory);
inline Status check_cpu_setup(const CpuSetup& s) { return check_cpu_setup(s, read_host_memory()); }

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
