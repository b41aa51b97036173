// Argument checks shared by every backend: each failure names the argument and its value.
#pragma once

#include "host/plan/plan.h"
#include "host/plan/plan_checks.h"
#include "host/plan/run_buffers.h"
#include "host/status.h"

namespace dfsel {

Status validate_desc(const dfsel_plan_desc* desc, PlanShape* shape);
// What a plan itself holds for every run: its weights (read) and a caller-owned workspace
// (written). Plan creation refuses a workspace over a weight by check_run_buffers on these.
void list_plan_buffers(const dfsel_plan_desc& desc, RunBuffers* bufs);
// One plan's part of a run (inputs and outputs not NULL: check_group_call saw to that).
Status validate_run(const dfsel_plan& plan, const dfsel_inputs& in, const dfsel_outputs& out);
// The plans of one group call (each already validated): no plan writes what another plan of
// the call reads or writes (dfsel.h). scratch holds n lists.
Status validate_group_aliasing(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                               RunBuffers* scratch);
// The ranks of an in-process group of CPU plans (inputs in host memory, each plan already
// validated, n_blocks equal) were given the same per-run inputs: anchors, the hidden rows a
// run reads (type and bits), temperature, p_min and seed (bits). Each rank's logits are its
// own slice and are not compared. The first difference is named with its rank.
Status validate_group_inputs(int n, const dfsel_plan* const* plans, const dfsel_inputs* in);
// A digest of the bytes of matrix t's rows (never 0), for weights every rank of a group holds
// whole: W_h (dfsel_plan::w_h_digest). Equal bytes give equal digests.
uint64_t weight_digest(const dfsel_tensor& t);
// The CPU plans of an in-process group hold W_h of the same bytes (by their digests); the
// first plan that does not is named.
Status validate_group_weights(int n, const dfsel_plan* const* plans);

}  // namespace dfsel
