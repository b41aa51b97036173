// The CPU backend's worker pool: every item of every job runs exactly once, whatever the
// thread count and however late a worker wakes; the pool shuts down cleanly.
#include <gtest/gtest.h>

#include <atomic>
#include <vector>

#include "host/backend/cpu_pool.h"

namespace dfsel {
namespace {

TEST(CpuPool, EveryItemRunsOnceInEveryJob) {
  for (int32_t threads : {1, 2, 3, 8}) {
    WorkerPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    std::vector<std::atomic<int>> hits(64);
    for (int rep = 0; rep < 2000; ++rep) {
      const int32_t n = 1 + rep % 37;
      for (int32_t i = 0; i < n; ++i) hits[i] = 0;
      std::atomic<int> bad_worker{0};
      auto f = [&](int32_t item, int32_t worker) {
        hits[item].fetch_add(1);
        if (worker < 0 || worker >= threads) bad_worker = 1;
      };
      pool.run(n, f);
      for (int32_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " job " << rep << " item " << i;
      ASSERT_EQ(bad_worker.load(), 0);
    }
  }
}

TEST(CpuPool, ZeroThreadsMeansEveryCore) {
  EXPECT_GE(WorkerPool::resolve(0), 1);
  EXPECT_EQ(WorkerPool::resolve(5), 5);
}

}  // namespace
}  // namespace dfsel
