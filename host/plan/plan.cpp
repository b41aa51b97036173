// Plan creation and the step: everything a run needs is decided here, once; a run validates
// its inputs, then only drives the phases.
#include "host/plan/plan.h"

#include <algorithm>
#include <chrono>
#include <new>
#include <thread>
#include <vector>

#include "host/backend/device_memory.h"
#include "host/plan/create_plan.h"
#include "host/plan/group.h"
#include "host/plan/group_call.h"
#include "host/plan/validate.h"
#include "kernels/common/numeric.cuh"
#include "kernels/common/packed_row.cuh"

namespace dfsel {

namespace {

// The plan's own checks and set-up; NCCL plans then agree with their peers.
Status create_local(const dfsel_plan_desc* desc, dfsel_plan* plan) {
  DFSEL_TRY(validate_desc(desc, &plan->shape));
  plan->desc = *desc;
  DFSEL_TRY(resolve_backend(desc->backend, &plan->desc.backend));
  const bool on_device = plan->desc.backend == DFSEL_BACKEND_CUDA;
  if (on_device) {  // before widening, which reads quantised weights from the device
    DFSEL_TRY(check_device_readable(desc->e_prev.data, desc->device, "e_prev.data"));
    DFSEL_TRY(check_device_readable(desc->e_next.data, desc->device, "e_next.data"));
    DFSEL_TRY(check_device_readable(desc->w_h.data, desc->device, "w_h.data"));
    if (desc->workspace) DFSEL_TRY(check_device_readable(desc->workspace, desc->device, "workspace"));
  }
  if (is_widened_type(desc->e_prev.type) || is_widened_type(desc->w_h.type)) {
    plan->widened.reset(new WidenedWeights());
    DFSEL_TRY(widen_weights(&plan->desc, on_device, plan->widened.get()));
    DFSEL_TRY(validate_desc(&plan->desc, &plan->shape));
  }
  DFSEL_TRY(check_exchange(desc->nccl_comm, plan->desc.backend));
  if (!desc->nccl_comm) plan->exchange = make_in_process_exchange(plan->desc.backend);
  if (on_device) return make_cuda_backend(plan->desc, plan->shape, &plan->backend);
  DFSEL_TRY(make_cpu_backend(plan->desc, plan->shape, &plan->backend));
  // Host memory, read once, after every check (a description refused reads nothing): validate.h.
  plan->w_h_digest = weight_digest(plan->desc.w_h);
  return Status::success();
}

}  // namespace

// The plans of one step must describe one selector and be of one kind; an in-process group
// must be the whole group, by the same rule the NCCL set-up applies (host/exchange/group_rule.h).
Status check_step(int n, dfsel_plan* const* plans, const dfsel_inputs* in, RankSummary* all) {
  return check_one_group(n, plans, in, all);
}

Status resolve_backend(dfsel_backend asked, dfsel_backend* out) {
  int n = 0;
  const Status cs = cuda_device_count(&n);
  if (asked == DFSEL_BACKEND_CPU) {
    *out = DFSEL_BACKEND_CPU;
  } else if (asked == DFSEL_BACKEND_CUDA) {
    if (cs.code == DFSEL_UNSUPPORTED) return fail(DFSEL_UNSUPPORTED, "backend = CUDA but this build of dfsel has no CUDA backend");
    if (n == 0) return fail(DFSEL_NO_DEVICE, "backend = CUDA but no CUDA device is present (%s)", cs.msg.c_str());
    *out = DFSEL_BACKEND_CUDA;
  } else {
    *out = n > 0 ? DFSEL_BACKEND_CUDA : DFSEL_BACKEND_CPU;
  }
  return Status::success();
}

Status workspace_bytes(dfsel_backend kind, const dfsel_plan_desc& desc, const PlanShape& shape, size_t* bytes) {
  if (kind == DFSEL_BACKEND_CUDA) return cuda_workspace_bytes(desc, shape, bytes);
  *bytes = cpu_workspace_bytes(desc, shape);
  return Status::success();
}

Status create_plan(const dfsel_plan_desc* desc, dfsel_plan** out) {
  return create_plan_of_kind(desc, out, create_local, [](const dfsel_plan_desc& d) { return summarize(d); });
}

}  // namespace dfsel
