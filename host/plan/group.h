// The rule that the ranks of one group describe one selector (SPEC section 4.7): the same
// config, placement and weight types on every rank, distinct shard ranks 0..n-1, and
// vocabulary ranges that tile [0, V). The NCCL set-up checks it on the table its all-gather
// brings; an in-process group (dfsel_run_group without a communicator) on its plans. Both
// judge one summary per plan, taken at creation of the description as the caller gave it, before
// block-type weights were widened (host/plan/create_plan.h): a weight type is the caller's.
// The rule itself and RankSummary are host/exchange/group_rule.h, below both layers; here is
// what a plan says of itself to it.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/exchange/group_rule.h"
#include "host/plan/plan_checks.h"
#include "host/status.h"

namespace dfsel {

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

}  // namespace dfsel
