// What every group call (dfsel_run_group, dfsel_dspark_run_group) keeps and checks: its
// scratch, its arguments, and that its plans make one group: one kind of exchange and backend, the same blocks, and (in
// process) the whole group by the rule the NCCL set-up applies (host/exchange/group_rule.h).
#pragma once

#include <vector>

#include "host/exchange/exchange.h"
#include "host/plan/group.h"
#include "host/plan/run_buffers.h"
#include "host/status.h"

namespace dfsel {

// What a group call of n plans needs on the host, kept by the first plan of the call and
// reused, so that runs allocate nothing once a group of that size has run.
struct GroupScratch {
  std::vector<RankSummary> summaries;
  std::vector<int> order;
  std::vector<StepRank> ranks;
  std::vector<RunBuffers> buffers;  // what each plan of the call touches
  void size_for(int n) {
    summaries.resize(n);
    order.resize(n);
    ranks.resize(n);
    buffers.resize(n);
  }
};

template <class Plan, class Inputs, class Outputs>
Status check_group_call(int n, Plan* const* plans, const Inputs* in, const Outputs* out) {
  if (n < 1) return fail(DFSEL_INVALID_ARGUMENT, "n = %d plans; at least one is needed", n);
  if (!plans) return fail(DFSEL_INVALID_ARGUMENT, "plans is NULL");
  if (!in) return fail(DFSEL_INVALID_ARGUMENT, "inputs is NULL");
  if (!out) return fail(DFSEL_INVALID_ARGUMENT, "outputs is NULL");
  for (int i = 0; i < n; ++i) {
    if (!plans[i]) return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] is NULL", i);
    // One plan twice would select into one send buffer twice and exchange with itself.
    for (int j = 0; j < i; ++j)
      if (plans[j] == plans[i])
        return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] and plans[%d] are the same plan; a plan may appear once in a group",
                    j, i);
  }
  return Status::success();
}

// all receives every plan's summary as its description was given (plans[i]->given, taken at
// creation before block types were widened: host/plan/create_plan.h).
template <class Plan, class Inputs>
Status check_one_group(int n, Plan* const* plans, const Inputs* in, RankSummary* all) {
  const Plan& p0 = *plans[0];
  const bool nccl = p0.exchange->is_nccl();
  for (int i = 0; i < n; ++i) {
    const Plan& p = *plans[i];
    if (p.exchange->is_nccl() != nccl)
      return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] %s an NCCL communicator but plans[0] %s", i,
                  nccl ? "has no" : "has", nccl ? "has" : "has none");
    if (p.backend->kind() != p0.backend->kind())
      return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] runs on another backend than plans[0]", i);
    if (in[i].n_blocks != in[0].n_blocks)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].n_blocks = %d differs from inputs[0].n_blocks = %d", i,
                  in[i].n_blocks, in[0].n_blocks);
  }
  for (int i = 0; i < n; ++i) all[i] = plans[i]->given;
  // NCCL: the set-up checked the whole group; the plans of one call must still agree.
  if (nccl) return check_same_selector(all, n, "plans");
  if (n != p0.desc.shard.n_ranks)
    return fail(DFSEL_INVALID_ARGUMENT, "%d plans given for a group of shard.n_ranks = %d without an NCCL communicator; "
                "pass every rank of the group", n, p0.desc.shard.n_ranks);
  return check_group(all, n, "plans");
}

}  // namespace dfsel
