// DSpark plan creation: everything a run needs is decided here, once. The CPU backend runs the
// chain; this version's CUDA backend refuses it. NCCL plans agree with their peers through the
// set-up exchange every plan kind shares (host/exchange/group_rule.h).
#include <cinttypes>
#include <new>

#include "host/plan/create_plan.h"
#include "host/plan/dspark_plan.h"
#include "host/plan/plan.h"
#include "host/plan/validate.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

namespace {

constexpr const char* kNoCudaChain =
    "the CUDA backend does not run DSpark plans in this version of dfsel; use backend = CPU with host memory";

// What this version runs a valid description on: the CPU backend, in process.
Status check_backend(const dfsel_dspark_plan_desc& d, dfsel_backend kind) {
  if (kind == DFSEL_BACKEND_CUDA) return fail(DFSEL_UNSUPPORTED, "%s", kNoCudaChain);
  return check_exchange(d.nccl_comm, kind);
}

Status create_local(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan* plan) {
  DFSEL_TRY(validate_dspark_desc(desc, &plan->shape));
  plan->desc = *desc;
  DFSEL_TRY(resolve_backend(desc->backend, &plan->desc.backend));
  DFSEL_TRY(check_backend(*desc, plan->desc.backend));
  dfsel_dspark_plan_desc& d = plan->desc;
  if (is_kquant(d.w1.type) || is_kquant(d.w2.type) || (d.conf_w.data && is_kquant(d.conf_w.type))) {
    plan->widened.reset(new WidenedWeights());
    DFSEL_TRY(widen_kquant_tensor(&d.w1, false, d.device, plan->widened.get()));
    DFSEL_TRY(widen_kquant_tensor(&d.w2, false, d.device, plan->widened.get()));
    if (d.conf_w.data) DFSEL_TRY(widen_kquant_tensor(&d.conf_w, false, d.device, plan->widened.get()));
    DFSEL_TRY(validate_dspark_desc(&d, &plan->shape));
  }
  plan->exchange = make_in_process_exchange(d.backend);
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
  DFSEL_TRY(resolve_backend(desc->backend, &kind));
  DFSEL_TRY(check_backend(*desc, kind));
  // SIZE_MAX when it does not fit the address space, as dfsel_workspace_size answers; plan
  // creation refuses it (host/backend/cpu_setup.h).
  *bytes = cpu_dspark_workspace_bytes(*desc, shape);
  return Status::success();
}

Status create_dspark_plan(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** out) {
  return create_plan_of_kind(desc, out, create_local, [](const dfsel_dspark_plan_desc& d) { return summarize_dspark(d); });
}

}  // namespace dfsel
