// The exchange step of DESIGN section 3: an all-gather of equal-sized records. The in-process
// exchange (several shards driven by one thread) lives in the backends; NcclExchange in
// host/nccl/ wraps the caller's communicator.
#pragma once

#include <cstddef>

#include "host/status.h"

namespace dfsel {

class Exchange {
 public:
  virtual ~Exchange() = default;
  // recv receives n_ranks * bytes, rank r's contribution at recv + r * bytes. Enqueued on stream.
  virtual Status all_gather(const void* send, void* recv, size_t bytes, void* stream) = 0;
  // An error the communicator has reported asynchronously (a failed peer), or success.
  virtual Status health() = 0;
  virtual int n_ranks() const = 0;
  virtual int rank() const = 0;
};

}  // namespace dfsel
