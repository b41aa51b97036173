// The exchange step of SPEC section 4.4: an all-gather of equal-sized records among the ranks
// of one group. Every plan holds one: NcclExchange over the caller's communicator, or the
// in-process exchange between the plans of a group driven by one thread (dfsel_run_group).
#pragma once

#include <stddef.h>

#include <memory>

#include "dfsel/dfsel.h"
#include "host/backend/backend.h"
#include "host/status.h"

namespace dfsel {

// One rank of this thread's part of a step.
struct StepRank {
  Endpoint at;
  void* stream;
};

class Exchange {
 public:
  virtual ~Exchange() = default;
  // True for the NCCL exchange: its group may be spread over processes and threads, the set-up
  // checked the whole group, and its communicator can fail asynchronously (health). False for
  // an in-process exchange, whose one call must drive every rank of the group.
  virtual bool is_nccl() const = 0;
  // Around this thread's all-gathers of one step (NCCL: one group call).
  virtual Status group_begin() { return Status::success(); }
  virtual Status group_end() { return Status::success(); }
  // Fills ranks[self]'s receive buffer with every rank's `bytes` of records, rank r's at
  // recv + r * bytes. ranks are this thread's ranks of the step in shard-rank order (for the
  // in-process exchange, the whole group). Enqueued on ranks[self].stream.
  virtual Status all_gather(const StepRank* ranks, int n, int self, size_t bytes) = 0;
  // An error the communicator has reported asynchronously (a failed peer), or success.
  virtual Status health() { return Status::success(); }
};

// The in-process exchange for a backend kind (host copies, or device copies ordered by the
// peers' ready events).
std::unique_ptr<Exchange> make_in_process_exchange(dfsel_backend kind);

// The NCCL exchange of a plan of any kind: wraps nccl_comm after a set-up collective that checks
// every rank's summary (`mine`, host/exchange/group_rule.h). Every rank joins it, also one whose own
// checks failed (local), so that a failure on one rank fails every rank instead of leaving
// them waiting.
struct RankSummary;
Status make_nccl_exchange(void* nccl_comm, const RankSummary& mine, const Status& local, std::unique_ptr<Exchange>* out);

}  // namespace dfsel
