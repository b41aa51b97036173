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

void WorkerPool::work_on(const Job& job, int32_t worker) {
  uint64_t t = ticket_.load(std::memory_order_acquire);
  for (;;) {
    if ((uint32_t)(t >> 32) != job.generation || (int64_t)(t & 0xffffffffu) >= job.n_items) return;
    if (!ticket_.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    job.fn(job.ctx, (int32_t)(t & 0xffffffffu), worker);
    if (done_.fetch_add(1, std::memory_order_acq_rel) + 1 == job.n_items) {
      std::lock_guard<std::mutex> lock(mu_);
      finished_.notify_one();
    }
    t = ticket_.load(std::memory_order_acquire);
  }
}

void WorkerPool::run_job(int32_t n_items, Fn fn, void* ctx) {
  if (n_items <= 0) return;
  if (workers_.empty() || n_items == 1) {
    for (int32_t i = 0; i < n_items; ++i) fn(ctx, i, 0);
    return;
  }
  Job job;
  {
    std::lock_guard<std::mutex> lock(mu_);
    job = Job{job_.generation + 1, fn, ctx, n_items};
    job_ = job;
    done_.store(0, std::memory_order_relaxed);
    ticket_.store((uint64_t)job.generation << 32, std::memory_order_release);
  }
  wake_.notify_all();
  work_on(job, 0);
  // What is left is being run by workers that took it: spin briefly, then sleep.
  for (int spins = 0; spins < 2000; ++spins) {
    if (done_.load(std::memory_order_acquire) == n_items) return;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(mu_);
  finished_.wait(lock, [&] { return done_.load(std::memory_order_acquire) == n_items; });
}

void WorkerPool::worker_main(int32_t worker) {
  uint32_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      wake_.wait(lock, [&] { return stop_ || job_.generation != seen; });
      if (stop_) return;
      job = job_;
      seen = job.generation;
    }
    work_on(job, worker);
  }
}

}  // namespace dfsel
