// Argument checks shared by every backend: each failure names the argument and its value.
#pragma once

#include "plan.h"

namespace dfsel {

Status validate_desc(const dfsel_plan_desc* desc, PlanShape* shape);
Status validate_run(const dfsel_plan& plan, const dfsel_inputs* in, const dfsel_outputs* out);
// Bytes of one row of n elements of a tensor type, 0 for types a tensor cannot hold here.
size_t tensor_row_bytes(dfsel_type t, int64_t n);

}  // namespace dfsel
