// The in-process exchange on the host: every rank of the group is driven by this thread, and
// all of them have selected before any exchanges, so the copies read finished records.
#include <cstring>

#include "host/exchange/exchange.h"

namespace dfsel {

std::unique_ptr<Exchange> make_device_exchange();  // in_process_cuda.cu

namespace {

class HostExchange final : public Exchange {
 public:
  bool is_nccl() const override { return false; }
  Status all_gather(const StepRank* ranks, int n, int self, size_t bytes) override {
    uint8_t* recv = static_cast<uint8_t*>(ranks[self].at.recv);
    if (n == 1 && recv == ranks[self].at.send) return Status::success();  // one rank reads its own
    for (int r = 0; r < n; ++r) std::memcpy(recv + (size_t)r * bytes, ranks[r].at.send, bytes);
    return Status::success();
  }
};

}  // namespace

std::unique_ptr<Exchange> make_in_process_exchange(dfsel_backend kind) {
  if (kind == DFSEL_BACKEND_CUDA) return make_device_exchange();
  return std::unique_ptr<Exchange>(new HostExchange());
}

}  // namespace dfsel
