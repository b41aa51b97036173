// dfsel_plan: a validated description plus the backend that runs it. A step is three phases
// so that several plans driven by one thread can share one exchange (dfsel_run_group):
// select (local top-K, gate, records), exchange, finish (merge, lattice, walk).
#pragma once

#include <memory>
#include <string>

#include "dfsel/dfsel.h"
#include "host/exchange/exchange.h"
#include "kernels/common/exchange_layout.cuh"
#include "host/status.h"

namespace dfsel {

struct WidenedWeights;

class Backend {
 public:
  virtual ~Backend() = default;
  virtual dfsel_backend kind() const = 0;
  virtual Status select(const dfsel_inputs& in, void* stream) = 0;
  virtual void* send_buffer() = 0;
  virtual void* recv_buffer() = 0;
  virtual Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void* stream) = 0;
  // Whether the work enqueued on stream has completed (a failed stream is an error).
  virtual Status query(void* stream, bool* done) = 0;
  // Blocks until the work enqueued on stream has completed.
  virtual Status wait(void* stream) = 0;
  // Errors the last run found on the device; call once it has completed.
  virtual Status report() = 0;
  // In-process exchange between the plans of one group, all of this backend's kind.
  virtual Status local_exchange(Backend* const* group, int n, size_t bytes, void* const* streams) = 0;
};

// Sizes every backend derives from a validated description.
struct PlanShape {
  int32_t k, R, block_size, L;
  int64_t n_vocab, n_embd, v_begin, v_end;
  size_t cb_row_bytes;
  bool sharded;
  ExchangeLayout layout_for(int32_t n_blocks) const {
    return make_exchange_layout(k, n_blocks, block_size, sharded, cb_row_bytes);
  }
};

}  // namespace dfsel

struct dfsel_plan {
  dfsel_plan_desc desc;
  dfsel::PlanShape shape;
  std::unique_ptr<dfsel::Exchange> exchange;  // NCCL; null for the in-process exchange
  std::unique_ptr<dfsel::WidenedWeights> widened;  // K-quant weights as BF16; outlives backend
  std::unique_ptr<dfsel::Backend> backend;
  std::string last_error;
};
