// One exchange among the plans this thread drives in a call (SPEC section 4.4): their
// endpoints in shard-rank order, so that the in-process exchange puts each rank at its slot,
// and, for several NCCL ranks, one group call around their all-gathers. Shared by the plan
// kinds, whose plans all hold desc.shard, a backend with an endpoint and an exchange.
#pragma once

#include <stddef.h>

#include <algorithm>
#include <vector>

#include "host/exchange/exchange.h"

namespace dfsel {

template <class Plan>
Status exchange_round(int n, Plan* const* plans, void* const* streams, size_t bytes, std::vector<int>& order,
                      std::vector<StepRank>& ranks) {
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.begin() + n,
            [&](int a, int b) { return plans[a]->desc.shard.rank < plans[b]->desc.shard.rank; });
  for (int i = 0; i < n; ++i)
    ranks[i] = StepRank{plans[order[i]]->backend->endpoint(), streams ? streams[order[i]] : nullptr};
  Exchange& group = *plans[0]->exchange;
  if (n > 1) DFSEL_TRY(group.group_begin());
  for (int i = 0; i < n; ++i) {
    const Status s = plans[order[i]]->exchange->all_gather(ranks.data(), n, i, bytes);
    if (!s.ok()) {
      if (n > 1) group.group_end();
      return s;
    }
  }
  if (n > 1) DFSEL_TRY(group.group_end());
  return Status::success();
}

}  // namespace dfsel
