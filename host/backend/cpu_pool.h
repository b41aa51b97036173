// The CPU backend's workers: a fixed set of threads made when the plan is created and joined
// when it is destroyed, so that a run creates no thread and allocates nothing. A run hands
// the pool a job of n independent items; the caller's thread works on it too and returns when
// every item is done. Items are taken in order from one counter, so big items listed first
// balance the load. The caller waits only for items a worker has taken, never for a worker
// to wake up: on a busy machine a worker that is late finds the job done and goes back to
// sleep (its ticket carries the job's number, so it cannot take an item of a later job).
//
// A fork()ed child has none of the workers: only the thread that forked is copied. The pool
// remembers the process that made it; in another process (a child) a job runs on the caller's
// thread alone (the same results: they never depend on the thread count), and destruction
// joins nothing and leaves the workers' shared state as the fork copied it (its mutex may be
// held, its condition variables count waiters that will never come back), a few hundred bytes.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace dfsel {

class WorkerPool {
 public:
  // n_threads counts the caller's thread: n_threads - 1 workers are started (0: one per core).
  // Throws std::system_error when a thread cannot be started (plan creation reports it).
  explicit WorkerPool(int32_t n_threads);
  ~WorkerPool();
  WorkerPool(const WorkerPool&) = delete;
  WorkerPool& operator=(const WorkerPool&) = delete;

  int32_t size() const { return (int32_t)s_->workers.size() + 1; }

  // Calls f(item, worker) for every item in [0, n_items), spread over the pool; worker in
  // [0, size()) names the thread (0: the caller's), for per-thread scratch. Returns when all
  // are done.
  template <class F>
  void run(int32_t n_items, F& f) {
    run_job(n_items, [](void* ctx, int32_t item, int32_t worker) { (*static_cast<F*>(ctx))(item, worker); }, &f);
  }

  // Whether this process is the one that made the pool (not a fork()ed child of it).
  bool in_owner() const;

  // Threads a description's n_threads resolves to.
  static int32_t resolve(int32_t n_threads);

 private:
  using Fn = void (*)(void* ctx, int32_t item, int32_t worker);
  struct Job {
    uint32_t generation;
    Fn fn;
    void* ctx;
    int32_t n_items;
  };
  // What the workers share with the caller; in a child, left as the fork copied it.
  struct Shared {
    std::vector<std::thread> workers;
    std::mutex mu;
    std::condition_variable wake, finished;
    Job job{0, nullptr, nullptr, 0};  // the current job; generation bumped for each
    bool stop = false;
    std::atomic<uint64_t> ticket{0};  // job generation << 32 | next item to take
    std::atomic<int32_t> done{0};     // items of the current job completed
  };
  void run_job(int32_t n_items, Fn fn, void* ctx);
  void work_on(const Job& job, int32_t worker);
  void worker_main(int32_t worker);
  void stop_and_join();

  std::unique_ptr<Shared> s_;
  pid_t owner_;  // the process that made the pool and its workers
};

}  // namespace dfsel
