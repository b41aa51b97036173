// Q4_K / Q6_K weights widened to BF16 at plan creation (the kernels and the reference read
// F32, F16, BF16 and Q8_0 as stored); the buffers live as long as the plan.
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

// Rewrites *t, when it is Q4_K or Q6_K, to a BF16 copy kept in *keep (on `device` when
// on_device); other types are left as they are.
Status widen_kquant_tensor(dfsel_tensor* t, bool on_device, int device, WidenedWeights* keep);

// Rewrites the K-quant tensors of desc to BF16 copies kept in *keep (device copies when
// on_device, the description's tensors then being device memory).
Status widen_kquant_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep);

}  // namespace dfsel
