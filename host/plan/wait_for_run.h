// The wait of a plan of any kind (dfsel_plan_wait, dfsel_dspark_plan_wait): its last run
// completed, then what that run found on the device. Plans hold a backend (query, wait,
// report) and an exchange (health).
#pragma once

#include <chrono>
#include <thread>

#include "host/status.h"

namespace dfsel {

// Without a limit and without a communicator, the backend's blocking wait; otherwise polls
// the stream and the communicator until one finishes, fails or time runs out.
template <class Plan>
Status wait_for_run(Plan* plan, void* stream, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const bool nccl = plan->exchange->is_nccl();
  if (timeout_ms < 0 && !nccl) {
    DFSEL_TRY(plan->backend->wait(stream));
  } else {
    const Clock::time_point start = Clock::now();
    for (int polls = 0;; ++polls) {
      bool done = false;
      DFSEL_TRY(plan->backend->query(stream, &done));
      if (done) break;
      DFSEL_TRY(plan->exchange->health());
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (timeout_ms >= 0 && waited >= timeout_ms)
        return fail(DFSEL_TIMEOUT, "the plan's last run had not completed after %lld ms (timeout_ms = %lld)%s",
                    (long long)waited, (long long)timeout_ms,
                    nccl ? "; if a peer rank has failed, abort the communicator and destroy the plan" : "");
      // A step takes tens of microseconds: spin briefly before sleeping between polls.
      if (polls < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return plan->backend->report();
}

}  // namespace dfsel
