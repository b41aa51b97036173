// A backend runs one plan's phases on its memory: the CPU backend on the host, the CUDA
// backend on one device. Plan creation validates and sizes everything (PlanShape); the phases
// only compute or enqueue, and never allocate.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <memory>

#include "dfsel/dfsel.h"
#include "host/backend/plan_shape.h"
#include "host/status.h"

namespace dfsel {

// What the exchange needs of a backend: its buffers, where they live and, for a device, the
// event that marks its records ready for the peers of an in-process group.
struct Endpoint {
  void* send;
  void* recv;
  int device;   // -1: host memory
  void* ready;  // a cudaEvent_t recorded after select, or null
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual dfsel_backend kind() const = 0;
  virtual Endpoint endpoint() = 0;
  // follows_select: the work last enqueued on stream is another plan's select of the same call
  // (plans of one group sharing a stream), so this one may start beside it.
  virtual Status select(const dfsel_inputs& in, void* stream, bool follows_select) = 0;
  // Outputs have packed_row_stride resolved (validate_run).
  virtual Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void* stream) = 0;
  // Whether the work enqueued on stream has completed (a failed stream is an error).
  virtual Status query(void* stream, bool* done) = 0;
  // Blocks until the work enqueued on stream has completed.
  virtual Status wait(void* stream) = 0;
  // Errors the last run found on the device; call once it has completed.
  virtual Status report() = 0;
};

// query, wait and report for a backend of any plan kind whose runs complete before they return
// (the CPU's): nothing is left in flight and errors come back from the run itself.
template <class Base>
class CompletesInRun : public Base {
 public:
  Status query(void*, bool* done) override {
    *done = true;
    return Status::success();
  }
  Status wait(void*) override { return Status::success(); }
  Status report() override { return Status::success(); }
};

// The CUDA factories exist in builds with DFSEL_WITH_CUDA; the others answer DFSEL_UNSUPPORTED.
Status make_cpu_backend(const dfsel_plan_desc& desc, const PlanShape& shape, std::unique_ptr<Backend>* out);
size_t cpu_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape);
Status make_cuda_backend(const dfsel_plan_desc& desc, const PlanShape& shape, std::unique_ptr<Backend>* out);
Status cuda_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape, size_t* bytes);
Status cuda_device_count(int* n);

}  // namespace dfsel
