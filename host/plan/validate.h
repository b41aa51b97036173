// Argument checks shared by every backend: each failure names the argument and its value.
#pragma once

#include <cstring>

#include "host/plan/plan.h"
#include "host/plan/run_buffers.h"
#include "host/status.h"

namespace dfsel {

// The enums of a description come from C, where any int may be stored in them, but C++ may not
// load an enum outside its enumerators' range. Checks read the stored int, so that a value is
// known to be an enumerator before anything reads it as the enum.
template <typename E>
int enum_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "the C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

Status validate_desc(const dfsel_plan_desc* desc, PlanShape* shape);
// What a plan itself holds for every run: its weights (read) and a caller-owned workspace
// (written). Plan creation refuses a workspace over a weight by check_run_buffers on these.
void list_plan_buffers(const dfsel_plan_desc& desc, RunBuffers* bufs);
Status validate_run(const dfsel_plan& plan, const dfsel_inputs* in, const dfsel_outputs* out);
// The plans of one group call (each already validated): no plan writes what another plan of
// the call reads or writes (dfsel.h). scratch holds n lists.
Status validate_group_aliasing(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                               RunBuffers* scratch);

}  // namespace dfsel
