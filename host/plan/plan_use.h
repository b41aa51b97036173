// One call at a time on a plan (dfsel.h, dspark.h): a call takes the plan's flag for as long as
// it runs, and a call that finds the flag taken by another thread is refused with a status
// instead of racing on the plan's buffers. Plans hold `std::atomic<bool> in_use`.
#pragma once

#include <atomic>

#include "host/status.h"

namespace dfsel {

// What a refused call leaves in the plan for the refused caller (plans hold
// `std::atomic<const char*> refusal`): the plan's last_error belongs to the call that holds it.
constexpr const char* kPlanInUse = "the plan was in use by a call of another thread; a plan runs one call at a time";

// Takes the flags of plans[0..n) (NULL entries skipped), or none of them: the refusal names
// the first plan that is taken already (and notes it in that plan), or that this call lists
// twice. A plan taken has its refusal note cleared.
template <class Plan>
Status take_plans(int n, Plan* const* plans) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < i; ++j)
      if (plans[i] && plans[j] == plans[i])
        return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] and plans[%d] are the same plan", j, i);
  for (int i = 0; i < n; ++i) {
    if (!plans[i] || !plans[i]->in_use.exchange(true, std::memory_order_acquire)) continue;
    for (int k = 0; k < i; ++k)
      if (plans[k]) plans[k]->in_use.store(false, std::memory_order_release);
    plans[i]->refusal.store(kPlanInUse, std::memory_order_release);
    return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] is in use by a call of another thread; a plan runs one call at a time", i);
  }
  for (int i = 0; i < n; ++i)
    if (plans[i]) plans[i]->refusal.store(nullptr, std::memory_order_relaxed);
  return Status::success();
}

template <class Plan>
void give_back_plans(int n, Plan* const* plans) {
  for (int i = 0; i < n; ++i)
    if (plans[i]) plans[i]->in_use.store(false, std::memory_order_release);
}

}  // namespace dfsel
