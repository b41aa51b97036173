// The rule that the ranks of one group describe one selector (SPEC section 4.7): the same
// config, placement and weight types on every rank, distinct shard ranks 0..n-1, and
// vocabulary ranges that tile [0, V). The NCCL set-up checks it on the table its all-gather
// brings; an in-process group (dfsel_run_group without a communicator) on its plans.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/plan/plan_checks.h"
#include "host/status.h"

namespace dfsel {

// What one rank says of itself: plain data, exchanged as bytes by the NCCL set-up.
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

// The fields every plan kind's summary has, from a description of either kind (each has a
// shard, a placement, and a config with n_vocab, n_embd, max_blocks, logit_scale, softcap).
// A summary is made of a description that may have failed its own checks (every rank of a
// communicator joins the set-up): its enums are read as the ints stored (enum_value).
template <class Desc>
RankSummary summarize_shared(const Desc& d) {
  RankSummary s{};
  s.shard_rank = d.shard.rank;
  s.shard_n_ranks = d.shard.n_ranks;
  s.v_begin = d.shard.v_begin;
  s.v_end = d.shard.v_end;
  s.placement = enum_value(d.placement);
  s.n_vocab = d.config.n_vocab;
  s.n_embd = d.config.n_embd;
  s.max_blocks = d.config.max_blocks;
  s.logit_scale = d.config.logit_scale;
  s.softcap = d.config.softcap;
  return s;
}

RankSummary summarize(const dfsel_plan_desc& desc);

// all[i] is the summary of the rank called who[i] in messages ("plans", "communicator rank").
// check_same_selector compares everything but the shard; check_group the whole rule.
Status check_same_selector(const RankSummary* all, int n, const char* who);
Status check_group(const RankSummary* all, int n, const char* who);

}  // namespace dfsel
