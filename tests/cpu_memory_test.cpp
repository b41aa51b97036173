// A CPU workspace the plan allocates is refused when it is larger than the memory the process
// can take now, not only than the machine's: creation zero-fills it, and where the system
// overcommits, a workspace between the memory available (or a memory cgroup's limit) and the
// physical memory got the process killed inside dfsel_plan_create instead of
// DFSEL_OUT_OF_MEMORY. The memory the check compares with is given here, and read from a
// folder laid out as /proc and /sys/fs/cgroup, so nothing is allocated.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "host/backend/cpu_setup.h"
#include "support/gguf_writer.h"

namespace dfsel::test {
namespace {

constexpr size_t kMiB = size_t{1} << 20, kGiB = size_t{1} << 30;

CpuSetup allocated(size_t need) { return CpuSetup{nullptr, 0, need, 4096, 1, 5120, 1}; }

TEST(CpuMemory, AWorkspaceLargerThanTheMemoryAvailableNowIsRefused) {
  const HostMemory m{64 * kGiB, 2 * kGiB, 0};
  const Status s = check_cpu_setup(allocated(3 * kGiB), m);
  EXPECT_EQ(DFSEL_OUT_OF_MEMORY, s.code);
  EXPECT_NE(std::string::npos, s.msg.find("2147483648 bytes of memory available now (MemAvailable)")) << s.msg;
  EXPECT_NE(std::string::npos, s.msg.find("config.max_blocks = 4096")) << s.msg;
  EXPECT_TRUE(check_cpu_setup(allocated(1 * kGiB), m).ok());
}

TEST(CpuMemory, AWorkspaceLargerThanTheMemoryCgroupLeavesIsRefused) {
  const HostMemory m{64 * kGiB, 32 * kGiB, 512 * kMiB};
  const Status s = check_cpu_setup(allocated(1 * kGiB), m);
  EXPECT_EQ(DFSEL_OUT_OF_MEMORY, s.code);
  EXPECT_NE(std::string::npos, s.msg.find("536870912 bytes this process's memory cgroup leaves")) << s.msg;
  EXPECT_TRUE(check_cpu_setup(allocated(256 * kMiB), m).ok());
}

TEST(CpuMemory, TheMachinesMemoryIsNamedFirstAndACallersWorkspaceIsNotCompared) {
  const HostMemory m{16 * kGiB, 1 * kGiB, 512 * kMiB};
  const Status s = check_cpu_setup(allocated(32 * kGiB), m);
  EXPECT_EQ(DFSEL_OUT_OF_MEMORY, s.code);
  EXPECT_NE(std::string::npos, s.msg.find("more than this machine's 17179869184 bytes of memory")) << s.msg;
  // The caller's own workspace is not allocated, so not compared with what is left.
  alignas(16) static unsigned char given[64];
  EXPECT_TRUE(check_cpu_setup(CpuSetup{given, 32 * kGiB, 32 * kGiB, 4096, 1, 5120, 1}, m).ok());
  // Where the system says nothing, nothing is refused for memory.
  EXPECT_TRUE(check_cpu_setup(allocated(32 * kGiB), HostMemory{0, 0, 0}).ok());
}

// root/<path> holding text.
void put(const TempDir& root, const std::string& path, const std::string& text) {
  const std::filesystem::path p = root.file(path);
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(CpuMemory, ReadsMemAvailableAndTheLeastACgroupV2Leaves) {
  TempDir root;
  put(root, "proc/meminfo", "MemTotal:       24683748 kB\nMemFree:        24050300 kB\nMemAvailable:    1048576 kB\n");
  put(root, "proc/self/cgroup", "0::/engine/worker\n");
  // engine: 300 MB, of which 100 MB held, 50 MB of it inactive file pages (reclaimable).
  put(root, "sys/fs/cgroup/engine/memory.max", "300000000\n");
  put(root, "sys/fs/cgroup/engine/memory.current", "100000000\n");
  put(root, "sys/fs/cgroup/engine/memory.stat", "anon 50000000\nactive_file 0\ninactive_file 50000000\n");
  put(root, "sys/fs/cgroup/engine/worker/memory.max", "max\n");
  put(root, "sys/fs/cgroup/engine/worker/memory.current", "80000000\n");
  const HostMemory m = read_host_memory(root.file(""));
  EXPECT_EQ(size_t{1048576} * 1024, m.available);
  EXPECT_EQ(size_t{250000000}, m.cgroup_left);
  EXPECT_GT(m.physical, 0u);
  const Status s = check_cpu_setup(allocated(300000000), m);
  EXPECT_EQ(DFSEL_OUT_OF_MEMORY, s.code) << s.msg;
  EXPECT_NE(std::string::npos, s.msg.find("250000000 bytes this process's memory cgroup leaves")) << s.msg;
}

TEST(CpuMemory, ReadsACgroupV1Limit) {
  TempDir root;
  put(root, "proc/meminfo", "MemAvailable:   8388608 kB\n");
  put(root, "proc/self/cgroup", "5:cpu,cpuacct:/x\n4:memory:/pod/x\n0::/\n");
  put(root, "sys/fs/cgroup/memory/pod/memory.limit_in_bytes", "2000000000\n");
  put(root, "sys/fs/cgroup/memory/pod/memory.usage_in_bytes", "500000000\n");
  put(root, "sys/fs/cgroup/memory/pod/memory.stat", "inactive_file 7\ntotal_inactive_file 100000000\n");
  put(root, "sys/fs/cgroup/memory/pod/x/memory.limit_in_bytes", "9223372036854771712\n");
  put(root, "sys/fs/cgroup/memory/pod/x/memory.usage_in_bytes", "400000000\n");
  const HostMemory m = read_host_memory(root.file(""));
  EXPECT_EQ(size_t{8388608} * 1024, m.available);
  EXPECT_EQ(size_t{1600000000}, m.cgroup_left);
  // A cgroup holding its whole limit leaves nothing, which is not "the system does not say".
  put(root, "sys/fs/cgroup/memory/pod/memory.usage_in_bytes", "2100000000\n");
  const HostMemory full = read_host_memory(root.file(""));
  EXPECT_EQ(1u, full.cgroup_left);
  EXPECT_EQ(DFSEL_OUT_OF_MEMORY, check_cpu_setup(allocated(4096), full).code);
}

TEST(CpuMemory, NothingToReadIsNoLimit) {
  TempDir root;
  const HostMemory m = read_host_memory(root.file(""));
  EXPECT_EQ(0u, m.available);
  EXPECT_EQ(0u, m.cgroup_left);
  put(root, "proc/self/cgroup", "0::/../../etc\n0::/a\n");
  put(root, "sys/fs/cgroup/a/memory.max", "garbage\n");
  put(root, "sys/fs/cgroup/a/memory.current", "1\n");
  EXPECT_EQ(0u, read_host_memory(root.file("")).cgroup_left);
}

// The system's own files, as plan creation reads them: on Linux the kernel says what is available.
TEST(CpuMemory, TheSystemSaysWhatIsAvailable) {
  const HostMemory m = read_host_memory();
  EXPECT_GT(m.physical, 0u);
  EXPECT_GT(m.available, 0u);
  EXPECT_LE(m.available, m.physical);
}

}  // namespace
}  // namespace dfsel::test
