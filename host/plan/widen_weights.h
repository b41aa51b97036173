// Weights of the block types but Q8_0 (Q4_0 .. Q5_1, Q2_K .. Q6_K) widened to BF16 at plan
// creation (the kernels and the reference read F32, F16, BF16 and Q8_0 as stored); the
// buffers live as long as the plan.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"
#include "host/status.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

struct WidenedWeights {
  std::vector<std::vector<uint16_t>> host;
  std::vector<void*> device;
  int device_ordinal = 0;
  ~WidenedWeights();
};

// The type a weight of type t is computed as once the plan is created: what sizes every buffer
// that holds its rows (a sharded codebook's or W1's rows in the exchanged records), so that a
// workspace sized before creation fits the plan created.
inline dfsel_type widened_type(dfsel_type t) { return is_widened_type(t) ? DFSEL_TYPE_BF16 : t; }

// Rewrites *t, when its type is one of those (is_widened_type), to a BF16 copy kept in *keep
// (on `device` when on_device); other types are left as they are.
Status widen_weight_tensor(dfsel_tensor* t, bool on_device, int device, WidenedWeights* keep);

// Rewrites the tensors of desc of those types to BF16 copies kept in *keep (device copies when
// on_device, the description's tensors then being device memory).
Status widen_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep);

}  // namespace dfsel
