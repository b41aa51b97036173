// dfsel_dspark_plan: a validated DSpark description, the sizes derived from it, its exchange
// and the backend that runs it (dspark.h). A run is a sequence of exchanges; between them
// every plan driven by this thread sends and receives its records (host/plan/dspark_step.cpp).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <vector>

#include "dfsel/dspark.h"
#include "host/backend/dspark_backend.h"
#include "host/exchange/exchange.h"
#include "host/plan/group.h"
#include "host/plan/group_call.h"
#include "host/plan/live_plans.h"
#include "host/plan/one_call.h"
#include "host/plan/run_buffers.h"
#include "host/plan/widen_weights.h"
#include "host/status.h"

struct dfsel_dspark_plan {
  static constexpr dfsel::PlanKind kKind = dfsel::PlanKind::kDSpark;  // host/plan/live_plans.h
  dfsel_dspark_plan_desc desc;  // as given, the backend resolved and block-type weights widened
  dfsel::RankSummary given{};   // desc as the caller gave it, for the group rule (create_plan.h)
  dfsel::DSparkShape shape;
  std::unique_ptr<dfsel::WidenedWeights> widened;  // outlives the backend, which reads it
  std::unique_ptr<dfsel::DSparkBackend> backend;
  std::unique_ptr<dfsel::Exchange> exchange;
  std::string last_error;
  pid_t creator = 0;  // the process that created it (a CUDA plan does not run in a fork()ed child)
  dfsel::GroupScratch scratch;  // host scratch of the runs this plan leads
  dfsel::OneCall in_use;  // held by the call on this plan now, if any (dspark.h, as dfsel.h: threads)
};

namespace dfsel {

// Everything but d2t's values, which live where the backend does: check_dspark_d2t reads them,
// on the host for the CPU backend, from desc.device for the CUDA backend (once a backend has
// checked the device).
Status validate_dspark_desc(const dfsel_dspark_plan_desc* desc, DSparkShape* shape);
Status check_dspark_d2t(const dfsel_dspark_plan_desc& desc, dfsel_backend kind);
// Every value of w2_scale and conf_w finite (a NaN scale made every logit NaN, a NaN weight every
// confidence, which never stops a block), read where the backend's memory is, as d2t is.
Status check_dspark_finite_weights(const dfsel_dspark_plan_desc& desc, dfsel_backend kind);
// What a plan itself holds for every run: its weights and d2t (read) and a caller-owned
// workspace (written). Plan creation refuses a workspace over a weight by check_run_buffers.
void list_dspark_plan_buffers(const dfsel_dspark_plan_desc& desc, RunBuffers* bufs);
// One plan's part of a run (inputs and outputs not NULL: check_group_call saw to that).
Status validate_dspark_run(const dfsel_dspark_plan& plan, const dfsel_dspark_inputs& in,
                           const dfsel_dspark_outputs& out);
// The plans of one group call (each validated): no plan writes what another plan of the call
// reads or writes (dspark.h). scratch holds n lists.
Status validate_dspark_group_aliasing(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                      const dfsel_dspark_outputs* out, RunBuffers* scratch);
RankSummary summarize_dspark(const dfsel_dspark_plan_desc& desc);

Status create_dspark_plan(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** out);
Status dspark_workspace_bytes(const dfsel_dspark_plan_desc* desc, size_t* bytes);
// One chain of n plans driven by this thread (host/plan/dspark_step.cpp).
Status run_dspark_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                        const dfsel_dspark_outputs* out, void* const* streams);
Status wait_dspark_plan(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms);

}  // namespace dfsel
