// The group rule: the ranks of one group describe one selector, checked on what each rank says
// of itself (RankSummary). It sits in the exchange layer, below the plans: the NCCL set-up
// judges the table its all-gather brings by it (nccl_exchange.cpp), and an in-process group
// call its plans (host/plan/group_call.h). How a plan describes itself is host/plan/group.h.
#pragma once

#include <stdint.h>

#include "host/status.h"

namespace dfsel {

// What one rank says of itself: plain data, exchanged as bytes by the NCCL set-up. A field
// is written in three places that say different things of it: here (the bytes exchanged),
// fields_of in group_rule.cpp (whether ranks must agree on it, and its name in the message),
// and where a description fills it (summarize_shared and summarize, host/plan/group.h;
// summarize_dspark): a new field needs all three.
struct RankSummary {
  int32_t shard_rank, shard_n_ranks;
  int32_t top_k, codebook_rank, block_size, max_blocks, placement, cb_type, w_type;
  int64_t n_vocab, n_embd, v_begin, v_end;
  float logit_scale, softcap;
  // DSpark plans (kind kDSparkPlan, dspark.h): the rest of their description; 0 for DFlash2.
  int32_t kind, markov_rank, n_draft, sample_from_anchor, w1_type, w2_type, has_scale, conf_type, has_d2t;
  int64_t n_target_vocab;
  float conf_bias;
};

constexpr int32_t kDSparkPlan = 1;

// all[i] is the summary of the rank called who[i] in messages ("plans", "communicator rank").
// check_same_selector compares everything but the shard; check_group the whole rule.
Status check_same_selector(const RankSummary* all, int n, const char* who);
Status check_group(const RankSummary* all, int n, const char* who);

}  // namespace dfsel
