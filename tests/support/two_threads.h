// Calls on one plan from two threads at once, for the tests of dfsel.h's Threads rule (which
// dspark.h's plans share): a plan serves one call at a time, refuses the call that finds it in
// use with DFSEL_BUSY, and never mixes two runs. Used by the thread_*_test.cpp files, which CI
// also runs under ThreadSanitizer.
#pragma once

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

struct Tally {
  std::atomic<int> ok{0}, busy{0}, wrong{0}, other{0};
};

// Runs worker(i) on two threads; a deadlock (two runs in one worker pool) fails the test at
// the deadline instead of hanging the suite.
inline void on_two_threads(const std::function<void(int)>& worker, int seconds) {
  std::mutex mu;
  std::condition_variable cv;
  int finished = 0;
  std::vector<std::thread> threads;
  for (int i = 0; i < 2; ++i)
    threads.emplace_back([&, i] {
      worker(i);
      std::lock_guard<std::mutex> lock(mu);
      ++finished;
      cv.notify_all();
    });
  std::unique_lock<std::mutex> lock(mu);
  if (!cv.wait_for(lock, std::chrono::seconds(seconds), [&] { return finished == 2; })) {
    std::fprintf(stderr, "two calls did not finish in %d s: a deadlock\n", seconds);
    std::_Exit(1);
  }
  lock.unlock();
  for (std::thread& t : threads) t.join();
}

// One call on the shared plan by thread i into that thread's own outputs: its status, and in
// *same whether a successful run's outputs are the single-threaded result (then reset).
using PlanCall = std::function<dfsel_status(int thread, bool* same)>;

// Both threads call until each has had 20 successes and a refusal was seen (or 10 s passed):
// no success may carry another result, no call may fail otherwise, and the threads must meet.
inline void hammer_one_plan(const PlanCall& call) {
  Tally t;
  const auto stop = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  on_two_threads(
      [&](int thread) {
        int mine = 0;
        for (int i = 0; i < 100000 && std::chrono::steady_clock::now() < stop; ++i) {
          bool same = true;
          const dfsel_status st = call(thread, &same);
          if (st == DFSEL_BUSY) {
            ++t.busy;
          } else if (st != DFSEL_SUCCESS) {
            ++t.other;
          } else {
            ++mine;
            ++t.ok;
            if (!same) ++t.wrong;
          }
          if (mine >= 20 && t.busy > 0) break;
        }
      },
      60);
  EXPECT_EQ(t.wrong.load(), 0) << "runs that returned DFSEL_SUCCESS with another result";
  EXPECT_EQ(t.other.load(), 0);
  EXPECT_GT(t.busy.load(), 0) << "two threads on one plan never met";
  EXPECT_GT(t.ok.load(), 0);
}

}  // namespace dfsel::test
