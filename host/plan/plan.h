// dfsel_plan: a validated, normalised description, the sizes every layer derives from it, its
// exchange and the backend that runs it. A step is three phases so that several plans driven
// by one thread can share one exchange (dfsel_run_group): select, exchange, finish.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "host/backend/backend.h"
#include "host/exchange/exchange.h"
#include "host/plan/group.h"
#include "host/plan/group_call.h"
#include "host/plan/live_plans.h"
#include "host/plan/one_call.h"
#include "host/plan/run_buffers.h"
#include "host/plan/widen_weights.h"
#include "host/status.h"

namespace dfsel {

// A group call's scratch, and the outputs of each plan with packed_row_stride resolved.
struct StepScratch : GroupScratch {
  std::vector<dfsel_outputs> outs;
  void size_for(int n) {
    GroupScratch::size_for(n);
    outs.resize(n);
  }
};

}  // namespace dfsel

struct dfsel_plan {
  static constexpr dfsel::PlanKind kKind = dfsel::PlanKind::kSelector;  // host/plan/live_plans.h
  dfsel_plan_desc desc;    // as given, with the backend resolved and block-type weights widened
  dfsel::RankSummary given{};  // desc as the caller gave it, for the group rule (create_plan.h)
  dfsel::PlanShape shape;
  std::unique_ptr<dfsel::WidenedWeights> widened;  // outlives the backend, which reads it
  std::unique_ptr<dfsel::Backend> backend;
  std::unique_ptr<dfsel::Exchange> exchange;
  std::string last_error;
  dfsel::OneCall in_use;         // held by the call on this plan now, if any (dfsel.h: threads)
  pid_t creator = 0;  // the process that created it (a CUDA plan does not run in a fork()ed child)
  dfsel::StepScratch scratch;  // host scratch of the steps this plan leads (run_group)
  // CPU plans: a digest of the W_h bytes the plan reads, taken at creation, so that an
  // in-process group call can see ranks holding different W_h (validate.h). 0: not taken
  // (CUDA plans, whose weights are device memory).
  uint64_t w_h_digest = 0;
};

namespace dfsel {

// The backend a description asks for, AUTO resolved by what this build and machine have.
Status resolve_backend(dfsel_backend asked, dfsel_backend* out);
// Workspace bytes of a validated description for a resolved backend kind (CPU or CUDA).
Status workspace_bytes(dfsel_backend kind, const dfsel_plan_desc& desc, const PlanShape& shape, size_t* bytes);
Status create_plan(const dfsel_plan_desc* desc, dfsel_plan** out);
// One step of n plans driven by this thread (host/plan/step.cpp).
Status run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                 void* const* streams);
// run_group's check that its plans describe one selector, are of one kind and, in process, are
// the whole group (plan.cpp); all receives the plans' summaries.
Status check_step(int n, dfsel_plan* const* plans, const dfsel_inputs* in, RankSummary* all);
// dfsel_plan_wait: the plan's last run completed, then what it found on the device.
Status wait_plan(dfsel_plan* plan, void* stream, int64_t timeout_ms);

}  // namespace dfsel
