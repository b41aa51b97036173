// A plan of any kind serves one call at a time (dfsel.h, Threads; dspark.h). A call claims
// every plan it names for its whole length, the recording of its message included, and a plan
// that another call holds is refused with DFSEL_BUSY instead of being waited for: two calls at
// once on one plan would share its workspace and its CPU workers (a deadlock, or results mixed
// between the calls), and a caller that makes them has a bug to be told of. A claim is one
// atomic exchange. The C entry points take claims through host/api_support.h.
//
// Before it claims, a call looks its plans up among the live plans (host/plan/live_plans.h),
// under the registry's lock: a handle already destroyed, or of the other plan kind, is refused
// (DFSEL_INVALID_ARGUMENT) without being read, and no destruction can free a plan between its
// lookup and its claim.
#pragma once

#include <atomic>

#include "host/plan/live_plans.h"

namespace dfsel {

class OneCall {
 public:
  bool try_claim() { return !held_.exchange(true, std::memory_order_acquire); }
  void release() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};

// The claims of one call on the distinct, non-NULL plans it names: all of them or none (a plan
// named twice is claimed once; the call itself refuses the repetition). Plan is any plan kind
// with a OneCall member in_use and its PlanKind kKind. Released when the holder goes out of
// scope. A plan that is not live (stale() names the first) is neither read nor claimed.
template <class Plan>
class PlanClaims {
 public:
  PlanClaims(int n, Plan* const* plans) : plans_(plans) {
    const LivePlansLock live;
    for (int i = 0; i < n; ++i)
      if (plans_[i] && !live.is_live(plans_[i], Plan::kKind)) {
        stale_ = i;
        return;
      }
    for (; held_ < n; ++held_) {
      if (!counts(held_)) continue;
      if (!plans_[held_]->in_use.try_claim()) {
        release();
        return;
      }
    }
    ok_ = true;
  }
  ~PlanClaims() { release(); }
  PlanClaims(const PlanClaims&) = delete;
  PlanClaims& operator=(const PlanClaims&) = delete;

  bool ok() const { return ok_; }
  // The index of the first plan that is not a live plan of this kind, or -1.
  int stale() const { return stale_; }

 private:
  // Whether plans[i] is claimed on its own account: not NULL, not named before.
  bool counts(int i) const {
    if (!plans_[i]) return false;
    for (int j = 0; j < i; ++j)
      if (plans_[j] == plans_[i]) return false;
    return true;
  }
  void release() {
    for (int i = 0; i < held_; ++i)
      if (counts(i)) plans_[i]->in_use.release();
    held_ = 0;
  }

  Plan* const* plans_;
  int held_ = 0;
  bool ok_ = false;
  int stale_ = -1;
};

}  // namespace dfsel
