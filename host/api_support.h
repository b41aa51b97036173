// What every C entry point shares (host/api.cpp, host/dspark_api.cpp): a status becomes a
// dfsel_status and a message, no exception crosses the C ABI, and a call on plans holds them
// for its whole length (host/plan/one_call.h), the same way for every plan kind.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <new>

#include "host/plan/one_call.h"
#include "host/status.h"

namespace dfsel {

inline void copy_msg(const Status& s, char* msg, size_t msg_len) {
  if (!msg || msg_len == 0) return;
  const size_t n = std::min(msg_len - 1, s.msg.size());
  std::memcpy(msg, s.msg.data(), n);
  msg[n] = '\0';
}

// Runs f, turning an escaping exception into a status; `what` names the call.
template <class F>
Status guarded(const char* what, F f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "allocation failed during %s", what);
  } catch (...) {
    return fail(DFSEL_INTERNAL_ERROR, "unexpected exception during %s", what);
  }
}

// A call that answers in the caller's message buffer (a workspace size, a plan's creation): f
// runs guarded, and its message is copied to msg.
template <class F>
dfsel_status answer_in(char* msg, size_t msg_len, const char* what, F f) {
  const Status s = guarded(what, f);
  copy_msg(s, msg, msg_len);
  return s.code;
}

// Keeps s as the plan's last error; a failure to store the message must not escape either.
template <class Plan>
dfsel_status record(Plan* plan, const Status& s) {
  if (plan) {
    try {
      plan->last_error = s.msg;
    } catch (...) {
      plan->last_error.clear();
    }
  }
  return s.code;
}

// A CUDA plan in a fork()ed child of the process that created it: CUDA does not survive fork
// (the child's calls would fail or hang in the driver), so the child neither runs it nor frees
// its device memory (the parent's, or no one's).
template <class Plan>
bool cuda_plan_in_child(const Plan& plan) {
  return plan.desc.backend == DFSEL_BACKEND_CUDA && plan.creator != getpid();
}

template <class Plan>
Status refuse_cuda_in_child(int n, Plan* const* plans) {
  for (int i = 0; i < n; ++i)
    if (plans[i] && cuda_plan_in_child(*plans[i]))
      return fail(DFSEL_UNSUPPORTED, "plans[%d] is a CUDA plan made by process %d, and this is its fork()ed child %d, "
                  "where CUDA cannot run; create the child's plans in the child", i, (int)plans[i]->creator,
                  (int)getpid());
  return Status::success();
}

// A call on plans[0..n) (run, run_group, wait): f runs guarded with every plan claimed, and its
// outcome is recorded in each. A plan another call holds is refused with DFSEL_BUSY, nothing
// run and no message recorded: the plan's last_error belongs to the call that holds it.
template <class Plan, class F>
dfsel_status call_on_plans(int n, Plan* const* plans, const char* what, F f) {
  if (!plans || n <= 0) return guarded(what, f).code;  // f refuses the arguments
  const PlanClaims<Plan> claims(n, plans);
  if (claims.stale() >= 0) return DFSEL_INVALID_ARGUMENT;  // nothing to record the message in
  if (!claims.ok()) return DFSEL_BUSY;
  Status s = refuse_cuda_in_child(n, plans);
  if (s.ok()) s = guarded(what, f);
  for (int i = 0; i < n; ++i) record(plans[i], s);
  return s.code;
}

// A run of one plan (dfsel_plan_run, dfsel_dspark_plan_run): a group of one on one stream,
// through the kind's group call.
template <class Plan, class Inputs, class Outputs, class RunGroup>
dfsel_status run_one_plan(Plan* plan, const Inputs* in, const Outputs* out, void* stream, RunGroup run_group) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  void* streams[1] = {stream};
  return run_group(1, &plan, in, out, streams);
}

// A handle that is not a live plan of the kind answers AUTO.
template <class Plan>
dfsel_backend plan_backend(const Plan* plan) {
  if (!plan) return DFSEL_BACKEND_AUTO;
  const LivePlansLock live;
  return live.is_live(plan, Plan::kKind) ? plan->desc.backend : DFSEL_BACKEND_AUTO;
}

// A handle that is not a live plan of the kind answers what it is instead.
template <class Plan>
const char* plan_last_error(const Plan* plan) {
  if (!plan) return "plan is NULL";
  const LivePlansLock live;
  return live.is_live(plan, Plan::kKind) ? plan->last_error.c_str() : live.what_is(plan);
}

// A plan that another thread's call holds is left alive (DFSEL_BUSY) rather than freed under
// it; a handle that is not a live plan of the kind (destroyed already, the other kind) is
// refused and not read.
template <class Plan>
dfsel_status destroy_plan(Plan* plan) {
  if (!plan) return DFSEL_SUCCESS;
  {
    LivePlansLock live;
    if (!live.is_live(plan, Plan::kKind)) return DFSEL_INVALID_ARGUMENT;
    if (!plan->in_use.try_claim()) return DFSEL_BUSY;
    live.remove(plan);
  }
  if (cuda_plan_in_child(*plan)) {  // left to the driver, which only the parent has
    (void)plan->backend.release();
    (void)plan->exchange.release();
    (void)plan->widened.release();
  }
  delete plan;
  return DFSEL_SUCCESS;
}

}  // namespace dfsel
