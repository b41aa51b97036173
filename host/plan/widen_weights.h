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

// Rewrites the K-quant tensors of desc to BF16 copies kept in *keep (device copies when
// on_device, the description's tensors then being device memory).
Status widen_kquant_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep);

}  // namespace dfsel
