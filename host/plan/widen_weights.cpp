// Weights of the block types but Q8_0 (the smallest published drafts, and what llama-quantize
// writes) are widened to BF16 once, when the plan is created (host/gguf/dequant.h does the
// widening); the kernels and the reference read F32, F16, BF16 and Q8_0 as stored.
#include "host/plan/widen_weights.h"

#include <cstring>
#include <vector>

#include "host/backend/device_memory.h"
#include "host/gguf/dequant.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

Status widen_weight_tensor(dfsel_tensor* t, bool on_device, int device, WidenedWeights* keep) {
  if (!is_widened_type(t->type)) return Status::success();
  const int64_t cols = t->ne[0], rows = t->ne[1];
  const size_t src_row = row_bytes(t->type, cols);
  std::vector<uint8_t> src((size_t)rows * src_row);
  const uint8_t* base = static_cast<const uint8_t*>(t->data);
  if (on_device) {
    DFSEL_TRY(device_rows_to_host(base, t->nb[1], src_row, rows, device, src.data(), "copying quantised weights to the host"));
  } else {
    for (int64_t r = 0; r < rows; ++r) std::memcpy(&src[(size_t)r * src_row], base + (size_t)r * t->nb[1], src_row);
  }
  std::vector<uint16_t> out((size_t)rows * cols);
  gguf::widen_to_bf16(src.data(), t->type, rows, cols, src_row, out.data());
  const void* data = nullptr;
  if (on_device) {
    void* d = nullptr;
    DFSEL_TRY(device_upload(out.data(), out.size() * 2, device, &d));
    keep->device.push_back(d);
    keep->device_ordinal = device;
    data = d;
  } else {
    keep->host.push_back(std::move(out));
    data = keep->host.back().data();
  }
  t->data = data;
  t->type = DFSEL_TYPE_BF16;
  t->nb[0] = 2;
  t->nb[1] = (size_t)cols * 2;
  t->nb[2] = t->nb[3] = t->nb[1] * (size_t)rows;
  return Status::success();
}

WidenedWeights::~WidenedWeights() {
  for (void* p : device) device_release(p, device_ordinal);
}

Status widen_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep) {
  DFSEL_TRY(widen_weight_tensor(&desc->e_prev, on_device, desc->device, keep));
  DFSEL_TRY(widen_weight_tensor(&desc->e_next, on_device, desc->device, keep));
  DFSEL_TRY(widen_weight_tensor(&desc->w_h, on_device, desc->device, keep));
  return Status::success();
}

}  // namespace dfsel
