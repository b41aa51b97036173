#include "host/backend/cpu_pool.h"

#include <sched.h>

namespace dfsel {

int32_t WorkerPool::resolve(int32_t n_threads) {
  if (n_threads > 0) return n_threads;
  // The cores this process may run on (a container or taskset may allow fewer than exist).
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) {
    const int n = CPU_COUNT(&set);
    if (n > 0) return n;
  }
  const unsigned hw = std::thread::hardware_concurrency();
  return hw > 0 ? (int32_t)hw : 1;
}

WorkerPool::WorkerPool(int32_t n_threads) {
  const int32_t n = resolve(n_threads);
  workers_.reserve((size_t)n - 1);
  try {
    for (int32_t i = 1; i < n; ++i) workers_.emplace_back([this, i] { worker_main(i); });
  } catch (...) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    wake_.notify_all();
    for (std::thread& t : workers_) t.join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
}

void WorkerPool::work_on_job(int32_t worker) {
  for (int32_t i = next_.fetch_add(1, std::memory_order_relaxed); i < n_items_;
       i = next_.fetch_add(1, std::memory_order_relaxed))
    fn_(ctx_, i, worker);
}

void WorkerPool::run_job(int32_t n_items, Fn fn, void* ctx) {
  if (n_items <= 0) return;
  if (workers_.empty() || n_items == 1) {
    for (int32_t i = 0; i < n_items; ++i) fn(ctx, i, 0);
    return;
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    fn_ = fn;
    ctx_ = ctx;
    n_items_ = n_items;
    next_.store(0, std::memory_order_relaxed);
    busy_ = (int32_t)workers_.size();
    ++generation_;
  }
  wake_.notify_all();
  work_on_job(0);
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [this] { return busy_ == 0; });
}

void WorkerPool::worker_main(int32_t worker) {
  uint64_t seen = 0;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
      if (stop_) return;
      seen = generation_;
    }
    work_on_job(worker);
    std::lock_guard<std::mutex> lock(mu_);
    if (--busy_ == 0) done_.notify_one();
  }
}

}  // namespace dfsel
