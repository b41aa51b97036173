// One selector step of the plans driven by this thread (SPEC section 4): validate, select on
// every plan, exchange, finish; and the wait that reports what a run found.
#include <algorithm>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "host/plan/exchange_round.h"
#include "host/plan/group_call.h"
#include "host/plan/plan.h"
#include "host/plan/wait_for_run.h"
#include "host/plan/validate.h"
#include "kernels/common/packed_row.cuh"

namespace dfsel {

Status run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                 void* const* streams) {
  DFSEL_TRY(check_group_call(n, plans, in, out));
  StepScratch& sc = plans[0]->scratch;
  sc.size_for(n);  // allocates only the first time a group of n plans runs
  std::vector<dfsel_outputs>& outs = sc.outs;
  std::copy(out, out + n, outs.begin());
  for (int i = 0; i < n; ++i) {
    Status s = validate_run(*plans[i], in[i], outs[i]);
    if (!s.ok()) {
      if (n > 1) s.msg = "plans[" + std::to_string(i) + "]: " + s.msg;
      return s;
    }
    outs[i].packed_row_stride = packed_stride(outs[i].packed_row_stride, plans[i]->shape.n_embd);
  }
  if (n > 1) DFSEL_TRY(validate_group_aliasing(n, plans, in, outs.data(), sc.buffers.data()));
  DFSEL_TRY(check_step(n, plans, in, sc.summaries.data()));
  // Ranks given different anchors, hidden rows or scalars would each walk another lattice and
  // draft tokens that match neither. CPU plans' inputs are in host memory: compared here,
  // before anything runs. CUDA plans' inputs are device memory and are not compared (dfsel.h).
  // The same for W_h, which every rank holds whole: CPU plans took a digest of it at creation.
  if (n > 1 && !plans[0]->exchange->is_nccl() && plans[0]->desc.backend == DFSEL_BACKEND_CPU) {
    DFSEL_TRY(validate_group_weights(n, plans));
    DFSEL_TRY(validate_group_inputs(n, plans, in));
  }
  auto stream_of = [&](int i) { return streams ? streams[i] : nullptr; };
  // A communicator that has reported an error would fail or hang the all-gather: refuse first.
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->exchange->health());
  for (int i = 0; i < n; ++i) {
    bool follows = false;  // an earlier plan of this call selected on the same stream
    for (int j = 0; j < i && !follows; ++j) follows = stream_of(j) == stream_of(i);
    DFSEL_TRY(plans[i]->backend->select(in[i], stream_of(i), follows));
  }
  DFSEL_TRY(exchange_round(n, plans, streams, plans[0]->shape.layout_for(in[0].n_blocks).bytes, sc.order, sc.ranks));
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->finish(in[i], outs[i], stream_of(i)));
  return Status::success();
}

Status wait_plan(dfsel_plan* plan, void* stream, int64_t timeout_ms) { return wait_for_run(plan, stream, timeout_ms); }

}  // namespace dfsel
