#include "host/exchange/group_rule.h"

#include <algorithm>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>

#include "dfsel/dfsel.h"

namespace dfsel {

namespace {

enum Kind { kInt, kType, kFloat };
struct Field {
  const char* name;
  Kind kind;
  int64_t x, y;
};

int64_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (int64_t)u;
}

template <size_t N>
int put(const Field (&d)[N], Field* f) {
  std::copy(std::begin(d), std::end(d), f);
  return (int)N;
}

// The fields two ranks of one group must share: those of every plan kind, then the kind's own.
// Floats compare as bits: the ranks must compute the same transform, so even -0 against +0 is
// a difference.
int fields_of(const RankSummary& a, const RankSummary& b, Field* f) {
  if (a.kind != b.kind) {
    f[0] = Field{"plan kind (0 DFlash2, 1 DSpark)", kInt, a.kind, b.kind};
    return 1;
  }
  const Field shared[] = {
      {"config.n_vocab", kInt, a.n_vocab, b.n_vocab},
      {"config.n_embd", kInt, a.n_embd, b.n_embd},
      {"config.max_blocks", kInt, a.max_blocks, b.max_blocks},
      {"placement", kInt, a.placement, b.placement},
      {"config.logit_scale", kFloat, bits(a.logit_scale), bits(b.logit_scale)},
      {"config.softcap", kFloat, bits(a.softcap), bits(b.softcap)},
  };
  const int n = put(shared, f);
  if (a.kind == kDSparkPlan) {
    const Field d[] = {
        {"config.n_target_vocab", kInt, a.n_target_vocab, b.n_target_vocab},
        {"config.markov_rank", kInt, a.markov_rank, b.markov_rank},
        {"config.n_draft", kInt, a.n_draft, b.n_draft},
        {"config.sample_from_anchor", kInt, a.sample_from_anchor, b.sample_from_anchor},
        {"w1.type", kType, a.w1_type, b.w1_type},
        {"w2.type", kType, a.w2_type, b.w2_type},
        {"w2_scale (1: given)", kInt, a.has_scale, b.has_scale},
        {"conf_w.type (-1: no confidence head)", kInt, a.conf_type, b.conf_type},
        {"d2t (1: given)", kInt, a.has_d2t, b.has_d2t},
        {"conf_bias", kFloat, bits(a.conf_bias), bits(b.conf_bias)},
    };
    return n + put(d, f + n);
  }
  const Field d[] = {
      {"config.codebook_rank", kInt, a.codebook_rank, b.codebook_rank},
      {"config.top_k", kInt, a.top_k, b.top_k},
      {"config.block_size", kInt, a.block_size, b.block_size},
      {"e_prev.type", kType, a.cb_type, b.cb_type},
      {"w_h.type", kType, a.w_type, b.w_type},
  };
  return n + put(d, f + n);
}

// The first field in which b differs from a, written to buf, or nullptr.
const char* first_difference(const RankSummary& a, const RankSummary& b, char* buf, size_t len) {
  Field fields[16];
  const int n = fields_of(a, b, fields);
  for (int i = 0; i < n; ++i) {
    const Field& f = fields[i];
    if (f.x == f.y) continue;
    if (f.kind == kType) {
      std::snprintf(buf, len, "%s = %s, against %s", f.name, dfsel_type_name((dfsel_type)f.y),
                    dfsel_type_name((dfsel_type)f.x));
    } else if (f.kind == kFloat) {
      float x, y;
      const uint32_t ux = (uint32_t)f.x, uy = (uint32_t)f.y;
      std::memcpy(&x, &ux, 4);
      std::memcpy(&y, &uy, 4);
      std::snprintf(buf, len, "%s = %g, against %g", f.name, y, x);
    } else {
      std::snprintf(buf, len, "%s = %" PRId64 ", against %" PRId64, f.name, f.y, f.x);
    }
    return buf;
  }
  return nullptr;
}

}  // namespace

Status check_same_selector(const RankSummary* all, int n, const char* who) {
  for (int i = 1; i < n; ++i) {
    char buf[160];
    if (const char* d = first_difference(all[0], all[i], buf, sizeof buf))
      return fail(DFSEL_INVALID_ARGUMENT, "%s[%d] describes another selector than %s[0]: %s", who, i, who, d);
  }
  return Status::success();
}

// Runs on every in-process step, so it allocates nothing: the checks are O(n^2) over the
// group's few ranks instead of sorting a copy.
Status check_group(const RankSummary* all, int n, const char* who) {
  for (int i = 0; i < n; ++i) {
    const RankSummary& s = all[i];
    if (s.shard_n_ranks != n)
      return fail(DFSEL_INVALID_ARGUMENT, "%s[%d] has shard.n_ranks = %d in a group of %d ranks", who, i, s.shard_n_ranks, n);
    bool taken = s.shard_rank < 0 || s.shard_rank >= n;
    for (int j = 0; j < i && !taken; ++j) taken = all[j].shard_rank == s.shard_rank;
    if (taken)
      return fail(DFSEL_INVALID_ARGUMENT, "%s[%d] has shard.rank = %d, which another rank of the group has too", who, i,
                  s.shard_rank);
  }
  DFSEL_TRY(check_same_selector(all, n, who));
  // The ranges in order of their first token (ties by position) must follow each other from 0.
  int64_t at = 0, prev_begin = INT64_MIN;
  int prev = -1;
  for (int k = 0; k < n; ++k) {
    int next = -1;
    for (int i = 0; i < n; ++i) {
      const int64_t b = all[i].v_begin;
      if (b < prev_begin || (b == prev_begin && i <= prev)) continue;  // already visited
      if (next < 0 || b < all[next].v_begin) next = i;
    }
    const RankSummary& s = all[next];
    if (s.v_begin != at)
      return fail(DFSEL_INVALID_ARGUMENT, "the ranks' vocabulary ranges leave %s at token %" PRId64 " (%s[%d] has [%" PRId64
                  ", %" PRId64 "))", s.v_begin > at ? "a gap" : "an overlap", std::min(at, s.v_begin), who, next,
                  s.v_begin, s.v_end);
    at = s.v_end;
    prev_begin = s.v_begin;
    prev = next;
  }
  if (at != all[0].n_vocab)
    return fail(DFSEL_INVALID_ARGUMENT, "the ranks' vocabulary ranges end at %" PRId64 ", not at n_vocab = %" PRId64, at,
                all[0].n_vocab);
  return Status::success();
}

}  // namespace dfsel
