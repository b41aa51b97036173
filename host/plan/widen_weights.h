// Weights of the block types but Q8_0 (Q4_0 .. Q5_1, Q2_K .. Q6_K) widened to BF16 at plan
// creation (the kernels and the reference read F32, F16, BF16 and Q8_0 as stored); the
// buffers live as long as the plan.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel {

struct WidenedWeights {
  std::vector<std::vector<uint16_t>> host;
  std::vector<void*> device;
  int device_ordinal = 0;
  ~WidenedWeights();
};

// Rewrites *t, when its type is one of those (is_widened_type), to a BF16 copy kept in *keep
// (on `device` when on_device); other types are left as they are.
Status widen_weight_tensor(dfsel_tensor* t, bool on_device, int device, WidenedWeights* keep);

// Rewrites the tensors of desc of those types to BF16 copies kept in *keep (device copies when
// on_device, the description's tensors then being device memory).
Status widen_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep);

}  // namespace dfsel
