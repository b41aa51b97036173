// The in-process exchange between devices: rank r's receive buffer gathers every rank's send
// buffer on r's stream, after the peers' ready events (recorded at the end of their select):
// by one kernel where every rank is on r's device and the records are small, else by copies
// (peer copies across devices). Graph capture keeps the event edges.
#include <cuda_runtime.h>

#include "host/backend/cuda_status.h"
#include "host/exchange/exchange.h"
#include "kernels/gather_records.cuh"

namespace dfsel {

namespace {

class DeviceExchange final : public Exchange {
 public:
  bool is_nccl() const override { return false; }
  Status all_gather(const StepRank* ranks, int n, int self, size_t bytes) override {
    const Endpoint& me = ranks[self].at;
    uint8_t* recv = static_cast<uint8_t*>(me.recv);
    if (n == 1 && recv == me.send) return Status::success();  // one rank reads its own records
    DeviceGuard guard(me.device);
    cudaStream_t st = static_cast<cudaStream_t>(ranks[self].stream);
    // Every rank on this device, records small: one chained kernel gathers them all.
    bool local = n <= cuda::kGatherMaxRanks && bytes <= cuda::kGatherMaxBytes;
    for (int r = 0; r < n; ++r) local = local && ranks[r].at.device == me.device;
    if (local) {
      cuda::GatherRecordsArgs g{};
      g.recv = recv, g.n = n, g.bytes = bytes;
      for (int r = 0; r < n; ++r) {
        if (r != self)
          DFSEL_CUDA_TRY(cudaStreamWaitEvent(st, static_cast<cudaEvent_t>(ranks[r].at.ready), 0), "cudaStreamWaitEvent");
        g.send[r] = ranks[r].at.send;
      }
      DFSEL_CUDA_TRY(cuda::gather_records(g, st), "in-process exchange gather");
      return Status::success();
    }
    for (int r = 0; r < n; ++r) {
      const Endpoint& peer = ranks[r].at;
      if (r != self)
        DFSEL_CUDA_TRY(cudaStreamWaitEvent(st, static_cast<cudaEvent_t>(peer.ready), 0), "cudaStreamWaitEvent");
      if (peer.device == me.device) {
        DFSEL_CUDA_TRY(cudaMemcpyAsync(recv + (size_t)r * bytes, peer.send, bytes, cudaMemcpyDeviceToDevice, st),
                       "in-process exchange copy");
      } else {
        DFSEL_CUDA_TRY(cudaMemcpyPeerAsync(recv + (size_t)r * bytes, me.device, peer.send, peer.device, bytes, st),
                       "in-process exchange peer copy");
      }
    }
    return Status::success();
  }
};

}  // namespace

std::unique_ptr<Exchange> make_device_exchange() { return std::unique_ptr<Exchange>(new DeviceExchange()); }

}  // namespace dfsel
