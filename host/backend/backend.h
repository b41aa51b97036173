// Backend factories. The CUDA one exists in builds with DFSEL_WITH_CUDA, the NCCL exchange in
// builds with DFSEL_WITH_NCCL; the others answer DFSEL_UNSUPPORTED.
#pragma once

#include <memory>
#include <vector>

#include "host/plan/plan.h"

namespace dfsel {

// Workspace bytes of a validated description for a backend kind (CPU or CUDA).
Status workspace_bytes(dfsel_backend kind, const dfsel_plan_desc& desc, const PlanShape& shape,
                       size_t* bytes);

Status make_cpu_backend(const dfsel_plan_desc& desc, const PlanShape& shape,
                        std::unique_ptr<Backend>* out);
size_t cpu_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape);

Status make_cuda_backend(const dfsel_plan_desc& desc, const PlanShape& shape,
                         std::unique_ptr<Backend>* out);
Status cuda_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape, size_t* bytes);
Status cuda_device_count(int* n);
// Set-up helpers for host-side weight conversion: strided device rows to host, an owned
// device copy, and its release.
Status cuda_rows_to_host(const void* src, size_t pitch, size_t row_bytes, int64_t rows, int device, void* dst);
Status cuda_upload(const void* src, size_t bytes, int device, void** out);
void cuda_release(void* p, int device);

// Q4_K / Q6_K weights widened to BF16 at plan creation; the buffers live as long as the plan.
struct WidenedWeights {
  std::vector<std::vector<uint8_t>> host;
  std::vector<void*> device;
  int device_ordinal = 0;
  ~WidenedWeights();
};
Status widen_kquant_weights(dfsel_plan_desc* desc, bool on_device, WidenedWeights* keep);

// The NCCL exchange: wraps desc.nccl_comm after a set-up collective that checks every rank's
// config and vocabulary range. Every rank joins it, also one whose own checks failed (local),
// so that a mismatch fails on every rank instead of leaving the others waiting.
Status nccl_setup(const dfsel_plan_desc& desc, const Status& local, std::unique_ptr<Exchange>* out);
Status exchange_group_begin();
Status exchange_group_end();

}  // namespace dfsel
