// DSpark plan creation: everything a run needs is decided here, once, for the CPU backend (host
// memory) or the CUDA backend (device memory on desc.device). NCCL plans agree with their peers
// through the set-up exchange every plan kind shares (host/exchange/group_rule.h).
#include <cinttypes>
#include <new>

#include "host/backend/device_memory.h"
#include "host/plan/create_plan.h"
#include "host/plan/dspark_plan.h"
#include "host/plan/plan.h"
#include "host/plan/validate.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

namespace {

// A valid description's backend, resolved, and whether it can exchange as asked; a CPU plan's
// d2t checked here; a CUDA plan's once its backend has checked the device (create_local).
Status dspark_backend_kind(const dfsel_dspark_plan_desc& desc, dfsel_backend* kind) {
  DFSEL_TRY(resolve_backend(desc.backend, kind));
  DFSEL_TRY(check_exchange(desc.nccl_comm, *kind));
  return *kind == DFSEL_BACKEND_CPU ? check_dspark_d2t(desc, *kind) : Status::success();
}

Status create_local(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan* plan) {
  DFSEL_TRY(validate_dspark_desc(desc, &plan->shape));
  dfsel_backend kind = DFSEL_BACKEND_CPU;
  DFSEL_TRY(dspark_backend_kind(*desc, &kind));
  plan->desc = *desc;
  plan->desc.backend = kind;
  dfsel_dspark_plan_desc& d = plan->desc;
  const bool on_device = kind == DFSEL_BACKEND_CUDA;
  if (on_device) {  // before widening, which reads quantised weights from the device
    DFSEL_TRY(check_device_readable(d.w1.data, d.device, "w1.data"));
    DFSEL_TRY(check_device_readable(d.w2.data, d.device, "w2.data"));
    if (d.w2_scale.data) DFSEL_TRY(check_device_readable(d.w2_scale.data, d.device, "w2_scale.data"));
    if (d.conf_w.data) DFSEL_TRY(check_device_readable(d.conf_w.data, d.device, "conf_w.data"));
    if (d.d2t) DFSEL_TRY(check_device_readable(d.d2t, d.device, "d2t"));
    if (d.workspace) DFSEL_TRY(check_device_readable(d.workspace, d.device, "workspace"));
  }
  if (is_widened_type(d.w1.type) || is_widened_type(d.w2.type) || (d.conf_w.data && is_widened_type(d.conf_w.type))) {
    plan->widened.reset(new WidenedWeights());
    DFSEL_TRY(widen_weight_tensor(&d.w1, on_device, d.device, plan->widened.get()));
    DFSEL_TRY(widen_weight_tensor(&d.w2, on_device, d.device, plan->widened.get()));
    if (d.conf_w.data) DFSEL_TRY(widen_weight_tensor(&d.conf_w, on_device, d.device, plan->widened.get()));
    DFSEL_TRY(validate_dspark_desc(&d, &plan->shape));
  }
  plan->exchange = make_in_process_exchange(kind);
  if (on_device) {
    DFSEL_TRY(make_cuda_dspark_backend(d, plan->shape, &plan->backend));
    DFSEL_TRY(check_dspark_finite_weights(d, kind));  // the device is known good now
    return check_dspark_d2t(d, kind);
  }
  DFSEL_TRY(check_dspark_finite_weights(d, kind));
  return make_cpu_dspark_backend(d, plan->shape, &plan->backend);
}

}  // namespace

RankSummary summarize_dspark(const dfsel_dspark_plan_desc& d) {
  RankSummary s = summarize_shared(d);
  s.kind = kDSparkPlan;
  s.n_target_vocab = d.config.n_target_vocab;
  s.markov_rank = d.config.markov_rank;
  s.n_draft = d.config.n_draft;
  s.sample_from_anchor = d.config.sample_from_anchor;
  s.w1_type = enum_value(d.w1.type);
  s.w2_type = enum_value(d.w2.type);
  // Presence only: a rank of one row cannot tell one scale from one per row, and need not.
  s.has_scale = d.w2_scale.data ? 1 : 0;
  s.conf_type = d.conf_w.data ? enum_value(d.conf_w.type) : -1;
  s.has_d2t = d.d2t ? 1 : 0;
  s.conf_bias = d.conf_bias;
  return s;
}

Status dspark_workspace_bytes(const dfsel_dspark_plan_desc* desc, size_t* bytes) {
  if (!bytes) return fail(DFSEL_INVALID_ARGUMENT, "bytes (the output pointer) is NULL");
  DSparkShape shape{};
  DFSEL_TRY(validate_dspark_desc(desc, &shape));
  dfsel_backend kind = DFSEL_BACKEND_CPU;
  DFSEL_TRY(dspark_backend_kind(*desc, &kind));
  // Weights of the widened types are read as the BF16 that creation widens them to (the
  // shape's W1 rows already are: widened_type).
  if (kind == DFSEL_BACKEND_CUDA) {
    dfsel_dspark_plan_desc d = *desc;
    if (is_widened_type(d.w2.type)) d.w2.type = DFSEL_TYPE_BF16, d.w2.nb[1] = row_bytes(DFSEL_TYPE_BF16, shape.R);
    return cuda_dspark_workspace_bytes(d, shape, bytes);
  }
  // SIZE_MAX when it does not fit the address space, as dfsel_workspace_size answers; plan
  // creation refuses it (host/backend/cpu_setup.h).
  *bytes = cpu_dspark_workspace_bytes(*desc, shape);
  return Status::success();
}

Status create_dspark_plan(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** out) {
  return create_plan_of_kind(desc, out, create_local, [](const dfsel_dspark_plan_desc& d) { return summarize_dspark(d); });
}

}  // namespace dfsel
