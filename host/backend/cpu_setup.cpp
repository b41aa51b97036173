#include "host/backend/cpu_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dfsel {

namespace {

// The machine's physical memory in bytes, 0 when the system does not say.
size_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0 || (unsigned long)pages > SIZE_MAX / (unsigned long)page) return 0;
  return (size_t)pages * (size_t)page;
}

// A small file's whole text, or "" when it cannot be read.
std::string read_text(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  std::string text;
  char buf[512];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0 && text.size() < (1u << 20)) text.append(buf, n);
  std::fclose(f);
  return text;
}

// The number a file holds ("123\n"), or -1 ("max", missing, anything else).
long long read_number(const std::string& path) {
  const std::string t = read_text(path);
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(t.c_str(), &end, 10);
  if (end == t.c_str() || errno != 0 || v < 0 || (*end != '\0' && *end != '\n')) return -1;
  return v;
}

// The value of the line "key N" (or "key: N kB") of a file, times `unit`; -1 when absent.
long long read_key(const std::string& path, const char* key, long long unit) {
  const std::string t = read_text(path);
  const size_t n = std::strlen(key);
  for (size_t at = 0; at < t.size();) {
    const size_t eol = std::min(t.find('\n', at), t.size());
    if (t.compare(at, n, key) == 0 && at + n < eol && (t[at + n] == ' ' || t[at + n] == ':')) {
      long long v = -1;
      if (std::sscanf(t.c_str() + at + n, "%*[: ]%lld", &v) == 1 && v >= 0 && v <= LLONG_MAX / unit) return v * unit;
      return -1;
    }
    at = eol + 1;
  }
  return -1;
}

// What the cgroup at `dir` and every one above it up to `top` leave: the least of limit less
// what is held and not reclaimable. SIZE_MAX when none sets a limit.
size_t cgroup_left(std::string dir, const std::string& top, const char* limit_file, const char* usage_file,
                   const char* inactive_key) {
  size_t left = SIZE_MAX;
  while (true) {
    const long long limit = read_number(dir + "/" + limit_file), usage = read_number(dir + "/" + usage_file);
    if (limit >= 0 && usage >= 0) {
      const long long inactive = std::max(0LL, read_key(dir + "/memory.stat", inactive_key, 1));
      const long long held = usage - std::min(usage, inactive);
      left = std::min(left, limit > held ? (size_t)(limit - held) : 0);
    }
    if (dir.size() <= top.size()) break;
    dir.erase(dir.find_last_of('/'));
  }
  return left;
}

}  // namespace

HostMemory read_host_memory(const std::string& root) {
  HostMemory m{};
  m.physical = host_memory_bytes();
  const long long avail = read_key(root + "/proc/meminfo", "MemAvailable", 1024);
  m.available = avail > 0 ? (size_t)avail : 0;
  // /proc/self/cgroup: "0::/path" (v2), "N:memory:/path" or "N:cpu,memory:/path" (v1).
  const std::string groups = read_text(root + "/proc/self/cgroup");
  size_t left = SIZE_MAX;
  for (size_t at = 0; at < groups.size();) {
    const size_t eol = std::min(groups.find('\n', at), groups.size());
    const std::string line = groups.substr(at, eol - at);
    at = eol + 1;
    const size_t c1 = line.find(':'), c2 = c1 == std::string::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string::npos) continue;
    const std::string controllers = "," + line.substr(c1 + 1, c2 - c1 - 1) + ",";
    std::string path = line.substr(c2 + 1);
    if (path.empty() || path[0] != '/' || path.find("/..") != std::string::npos) continue;
    while (path.size() > 1 && path.back() == '/') path.pop_back();
    if (path == "/") path.clear();
    if (controllers == ",,") {
      const std::string top = root + "/sys/fs/cgroup";
      left = std::min(left, cgroup_left(top + path, top, "memory.max", "memory.current", "inactive_file"));
    } else if (controllers.find(",memory,") != std::string::npos) {
      const std::string top = root + "/sys/fs/cgroup/memory";
      left = std::min(left, cgroup_left(top + path, top, "memory.limit_in_bytes", "memory.usage_in_bytes",
                                        "total_inactive_file"));
    }
  }
  m.cgroup_left = left == SIZE_MAX ? 0 : std::max<size_t>(left, 1);  // 0 says nothing: a full cgroup leaves 1 byte
  return m;
}

Status check_cpu_setup(const CpuSetup& s, const HostMemory& m) {
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
  if (!s.workspace && m.physical > 0 && s.need > m.physical)
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes (config.max_blocks = %d, shard.n_ranks = %d) is more "
                "than this machine's %zu bytes of memory", s.need, s.max_blocks, s.n_ranks, m.physical);
  const bool cgroup_less = m.cgroup_left > 0 && (m.available == 0 || m.cgroup_left < m.available);
  const size_t left = cgroup_less ? m.cgroup_left : m.available;
  if (!s.workspace && left > 0 && s.need > left)
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes (config.max_blocks = %d, shard.n_ranks = %d) is more "
                "than the %zu bytes %s", s.need, s.max_blocks, s.n_ranks, left,
                cgroup_less ? "this process's memory cgroup leaves (its limit less what it holds)"
                            : "of memory available now (MemAvailable)");
  if (s.n_threads > kMaxCpuThreads)
    return fail(DFSEL_INVALID_ARGUMENT, "n_threads = %d is more than the CPU backend's %d worker threads", s.n_threads,
                kMaxCpuThreads);
  return Status::success();
}

}  // namespace dfsel
