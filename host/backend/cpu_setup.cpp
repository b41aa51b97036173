#include "host/backend/cpu_setup.h"

#include <unistd.h>

#include <cinttypes>

namespace dfsel {

namespace {

// The machine's physical memory in bytes, 0 when the system does not say.
size_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || (unsigned long)pages > SIZE_MAX / (unsigned long)page) return 0;
  return (size_t)pages * (size_t)page;
}

}  // namespace

Status check_cpu_setup(const CpuSetup& s) {
  if (s.workspace && s.workspace_bytes < s.need)
    return fail(DFSEL_INVALID_ARGUMENT, "workspace_bytes = %zu is less than the %zu bytes this plan needs",
                s.workspace_bytes, s.need);
  if (s.workspace && reinterpret_cast<uintptr_t>(s.workspace) % 16 != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "workspace = %p is not aligned to 16 bytes", s.workspace);
  if (s.need == SIZE_MAX)
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace for config.max_blocks = %d, config.n_embd = %" PRId64
                " and shard.n_ranks = %d does not fit in the address space", s.max_blocks, s.n_embd, s.n_ranks);
  // Refused before it is allocated: where the system overcommits memory the allocation itself
  // succeeds, and zeroing it gets the process killed instead of a status returned.
  const size_t memory = host_memory_bytes();
  if (!s.workspace && memory > 0 && s.need > memory)
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes (config.max_blocks = %d, shard.n_ranks = %d) is more "
                "than this machine's %zu bytes of memory", s.need, s.max_blocks, s.n_ranks, memory);
  if (s.n_threads > kMaxCpuThreads)
    return fail(DFSEL_INVALID_ARGUMENT, "n_threads = %d is more than the CPU backend's %d worker threads", s.n_threads,
                kMaxCpuThreads);
  return Status::success();
}

}  // namespace dfsel
