#include "host/backend/cpu_pool.h"

#include <sched.h>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define DFSEL_LSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define DFSEL_LSAN 1
#endif
#ifdef DFSEL_LSAN
#include <sanitizer/lsan_interface.h>
#endif

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

WorkerPool::WorkerPool(int32_t n_threads) : s_(new Shared()), owner_(getpid()) {
  const int32_t n = resolve(n_threads);
  s_->workers.reserve((size_t)n - 1);
  try {
    for (int32_t i = 1; i < n; ++i) s_->workers.emplace_back([this, i] { worker_main(i); });
  } catch (...) {
    stop_and_join();
    throw;
  }
}

WorkerPool::~WorkerPool() {
  if (in_owner()) {
    stop_and_join();
    return;
  }
  // A fork()ed child: the threads the vector names and the waiters the condition variables
  // count live only in the parent. Joining, notifying or destroying them would wait forever.
  Shared* orphan = s_.release();
#ifdef DFSEL_LSAN
  __lsan_ignore_object(orphan);
#else
  (void)orphan;
#endif
}

bool WorkerPool::in_owner() const { return getpid() == owner_; }

void WorkerPool::stop_and_join() {
  {
    std::lock_guard<std::mutex> lock(s_->mu);
    s_->stop = true;
  }
  s_->wake.notify_all();
  for (std::thread& t : s_->workers) t.join();
}

void WorkerPool::work_on(const Job& job, int32_t worker) {
  Shared& s = *s_;
  uint64_t t = s.ticket.load(std::memory_order_acquire);
  for (;;) {
    if ((uint32_t)(t >> 32) != job.generation || (int64_t)(t & 0xffffffffu) >= job.n_items) return;
    if (!s.ticket.compare_exchange_weak(t, t + 1, std::memory_order_acq_rel)) continue;
    job.fn(job.ctx, (int32_t)(t & 0xffffffffu), worker);
    if (s.done.fetch_add(1, std::memory_order_acq_rel) + 1 == job.n_items) {
      std::lock_guard<std::mutex> lock(s.mu);
      s.finished.notify_one();
    }
    t = s.ticket.load(std::memory_order_acquire);
  }
}

void WorkerPool::run_job(int32_t n_items, Fn fn, void* ctx) {
  if (n_items <= 0) return;
  Shared& s = *s_;
  if (s.workers.empty() || n_items == 1 || !in_owner()) {
    for (int32_t i = 0; i < n_items; ++i) fn(ctx, i, 0);
    return;
  }
  Job job;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    job = Job{s.job.generation + 1, fn, ctx, n_items};
    s.job = job;
    s.done.store(0, std::memory_order_relaxed);
    s.ticket.store((uint64_t)job.generation << 32, std::memory_order_release);
  }
  s.wake.notify_all();
  work_on(job, 0);
  // What is left is being run by workers that took it: spin briefly, then sleep.
  for (int spins = 0; spins < 2000; ++spins) {
    if (s.done.load(std::memory_order_acquire) == n_items) return;
    std::this_thread::yield();
  }
  std::unique_lock<std::mutex> lock(s.mu);
  s.finished.wait(lock, [&] { return s.done.load(std::memory_order_acquire) == n_items; });
}

void WorkerPool::worker_main(int32_t worker) {
  Shared& s = *s_;
  uint32_t seen = 0;
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.wake.wait(lock, [&] { return s.stop || s.job.generation != seen; });
      if (s.stop) return;
      job = s.job;
      seen = job.generation;
    }
    work_on(job, worker);
  }
}

}  // namespace dfsel
