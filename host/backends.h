// Backend factories. The CUDA one exists in builds with DFSEL_WITH_CUDA, the NCCL exchange in
// builds with DFSEL_WITH_NCCL; the others answer DFSEL_UNSUPPORTED.
#pragma once

#include <memory>

#include "plan.h"

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

// The NCCL exchange: wraps desc.nccl_comm after a set-up collective that checks every rank's
// config and vocabulary range. Every rank joins it, also one whose own checks failed (local),
// so that a mismatch fails on every rank instead of leaving the others waiting.
Status nccl_setup(const dfsel_plan_desc& desc, const Status& local, std::unique_ptr<Exchange>* out);
Status exchange_group_begin();
Status exchange_group_end();

}  // namespace dfsel
