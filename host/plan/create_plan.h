// Plan creation for either plan kind (dfsel_plan_create, dfsel_dspark_plan_create): the plan
// object, its own checks and set-up, and for a rank of an NCCL communicator the set-up exchange
// in which the ranks compare their summaries (host/exchange/group_rule.h). Every rank joins that
// exchange, also one whose own checks failed, so that its peers are told instead of waiting.
#pragma once

#include <unistd.h>

#include <memory>
#include <new>

#include "host/exchange/exchange.h"
#include "host/plan/group.h"
#include "host/plan/live_plans.h"
#include "host/plan/plan_checks.h"
#include "host/status.h"

namespace dfsel {

// create_local(desc, plan): the plan's own checks and set-up; summarize(desc): its RankSummary.
// The summary is taken here, once, of the description as the caller gave it: creation widens
// block-type weights to BF16 in the plan's own copy, and a Q4_K rank beside a BF16 one is still
// another selector. The NCCL set-up exchanges this summary and an in-process group call compares
// the plans' (host/plan/group_call.h), so both exchanges judge the same types.
template <class Plan, class Desc, class CreateLocal, class Summarize>
Status create_plan_of_kind(const Desc* desc, Plan** out, CreateLocal create_local, Summarize summarize) {
  if (!out) return fail(DFSEL_INVALID_ARGUMENT, "plan (the output pointer) is NULL");
  *out = nullptr;
  std::unique_ptr<Plan> plan(new (std::nothrow) Plan());
  if (!plan) return fail(DFSEL_OUT_OF_MEMORY, "the plan object could not be allocated");
  plan->creator = getpid();
  if (desc) plan->given = summarize(*desc);
  Status local = create_local(desc, plan.get());
  // Entered among the live plans before the peers are told it exists (host/plan/live_plans.h).
  if (local.ok()) local = add_live_plan(plan.get(), Plan::kKind);
  Status agreed = Status::success();
  if (desc && desc->nccl_comm && enum_value(desc->backend) != DFSEL_BACKEND_CPU)
    agreed = make_nccl_exchange(desc->nccl_comm, plan->given, local, &plan->exchange);
  if (!agreed.ok()) {
    if (local.ok()) remove_live_plan(plan.get());
    return agreed;
  }
  DFSEL_TRY(local);
  *out = plan.release();
  return Status::success();
}

}  // namespace dfsel
