// One selector step of the plans driven by this thread (DESIGN section 3): validate, select on
// every plan, exchange, finish; and the wait that reports what a run found.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "host/plan/plan.h"
#include "host/plan/validate.h"
#include "kernels/common/packed_row.cuh"

namespace dfsel {

Status check_step(int n, dfsel_plan* const* plans, const dfsel_inputs* in, RankSummary* all);  // plan.cpp

namespace {

Status exchange(int n, dfsel_plan* const* plans, const dfsel_inputs* in, void* const* streams, StepScratch& sc) {
  // Ranks in shard-rank order, so that the in-process exchange puts each rank at its slot.
  std::vector<int>& order = sc.order;
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return plans[a]->desc.shard.rank < plans[b]->desc.shard.rank; });
  std::vector<StepRank>& ranks = sc.ranks;
  for (int i = 0; i < n; ++i) ranks[i] = StepRank{plans[order[i]]->backend->endpoint(), streams ? streams[order[i]] : nullptr};
  const size_t bytes = plans[0]->shape.layout_for(in[0].n_blocks).bytes;
  Exchange& group = *plans[0]->exchange;
  if (n > 1) DFSEL_TRY(group.group_begin());
  for (int i = 0; i < n; ++i) {
    const Status s = plans[order[i]]->exchange->all_gather(ranks.data(), n, i, bytes);
    if (!s.ok()) {
      if (n > 1) group.group_end();
      return s;
    }
  }
  if (n > 1) DFSEL_TRY(group.group_end());
  return Status::success();
}

}  // namespace

Status run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                 void* const* streams) {
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
  StepScratch& sc = plans[0]->scratch;
  sc.size_for(n);  // allocates only the first time a group of n plans runs
  std::vector<dfsel_outputs>& outs = sc.outs;
  std::copy(out, out + n, outs.begin());
  for (int i = 0; i < n; ++i) {
    Status s = validate_run(*plans[i], &in[i], &outs[i]);
    if (!s.ok()) {
      if (n > 1) s.msg = "plans[" + std::to_string(i) + "]: " + s.msg;
      return s;
    }
    outs[i].packed_row_stride = packed_stride(outs[i].packed_row_stride, plans[i]->shape.n_embd);
  }
  if (n > 1) DFSEL_TRY(validate_group_aliasing(n, plans, in, outs.data(), sc.buffers.data()));
  DFSEL_TRY(check_step(n, plans, in, sc.summaries.data()));
  auto stream_of = [&](int i) { return streams ? streams[i] : nullptr; };
  // A communicator that has reported an error would fail or hang the all-gather: refuse first.
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->exchange->health());
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->select(in[i], stream_of(i)));
  DFSEL_TRY(exchange(n, plans, in, streams, sc));
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->finish(in[i], outs[i], stream_of(i)));
  return Status::success();
}

// Without a limit and without a communicator, the backend's blocking wait; otherwise polls
// the stream and the communicator until one finishes, fails or time runs out.
Status wait_plan(dfsel_plan* plan, void* stream, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  const bool nccl = !plan->exchange->needs_whole_group();
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
