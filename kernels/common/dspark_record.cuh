// What one rank contributes to each exchange of a DSpark step (docs/dspark.md, On shards): one
// fixed-size record per block, so an exchange carries n_blocks * stride bytes, whatever V is.
//
//   record  { norm_lo, norm_hi, key, draft_id, target_id, logit, row_max, flags,
//             anchor, inputs }                                                    48 bytes
//   w1 row  sharded W1 only: the W1 row of target_id (of the anchor at exchange 0), as stored
//
// Exchange 0 (sharded W1 only) carries the anchors' W1 rows from their owners. Exchange k in
// 1..N carries step k's local best, the shard's largest l and, when sampling, the shard's part
// of step k - 1's normaliser; exchange N + 1 (sampling only) the part of step N's.
#pragma once

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "dfsel/dspark.h"
#include "digest.cuh"
#include "dspark_math.cuh"
#include "exchange_layout.cuh"
#include "hd.cuh"
#include "order.cuh"

namespace dfsel {

struct DSparkRecord {
  uint64_t norm_lo, norm_hi;  // this shard's part of a normaliser (NormSum)
  float key;                  // what the step ranks by: l (greedy) or markov_sample_key
  int32_t draft_id;           // the shard's best draft id; -1 when the block drafts no more
  int32_t target_id;          // its target id (d2t), the next step's predecessor
  float logit;                // l at draft_id
  float row_max;              // the largest l of the shard (NaN skipped), -inf if none
  int32_t flags;              // kRecordAnchorRow: the w1 row after the record is the anchor's
  // What every rank must have been given alike for this block: its anchor, and a digest of
  // the run's scalars and the block's hidden rows (below). A rank whose values differ from
  // another's fails the run on every rank (dspark_inputs_agree).
  int32_t anchor;
  uint32_t inputs;
};
static_assert(sizeof(DSparkRecord) == 48, "records are exchanged as raw bytes");

constexpr int32_t kRecordAnchorRow = 1;

// A record that carries nothing: no candidate, no normaliser part, no row.
DFSEL_HD DSparkRecord empty_dspark_record() { return DSparkRecord{0, 0, 0.0f, -1, -1, 0.0f, -INFINITY, 0, 0, 0u}; }

// The digest of a run's inputs that the ranks of one chain must share, per block (digest.cuh):
// the run's scalars and, with a confidence head, the block's hidden rows as stored (the sum of
// digest_row over its N rows, the k-th read at k = 0 .. N - 1), their type, and conf_w's digest
// taken at plan creation. Folded to 32 bits for the record.
DFSEL_HD uint32_t dspark_inputs_word(uint64_t scalars, bool conf, uint64_t hidden_rows, int32_t hidden_type,
                                     uint64_t conf_w_digest) {
  uint64_t h = scalars;
  if (conf) h += hidden_rows + digest_term(kDigestType, (uint32_t)hidden_type) + digest_term(kDigestWeights, conf_w_digest);
  return digest_fold(h);
}

struct DSparkLayout {
  int32_t n_blocks;
  size_t row_bytes;  // one W1 row as stored; 0 with replicated W1
  size_t stride;     // record plus row, a multiple of 16
  size_t bytes;      // per rank and exchange
};

DFSEL_HD DSparkLayout make_dspark_layout(int n_blocks, bool sharded_w1, size_t w1_row_bytes) {
  DSparkLayout l;
  l.n_blocks = n_blocks;
  l.row_bytes = sharded_w1 ? w1_row_bytes : 0;
  l.stride = align16(sizeof(DSparkRecord)) + align16(l.row_bytes);
  l.bytes = (size_t)n_blocks * l.stride;
  return l;
}

DFSEL_HD DSparkRecord* dspark_record(const DSparkLayout& l, void* base, int b) {
  return (DSparkRecord*)((uint8_t*)base + (size_t)b * l.stride);
}

DFSEL_HD uint8_t* dspark_record_row(const DSparkLayout& l, void* base, int b) {
  return (uint8_t*)base + (size_t)b * l.stride + align16(sizeof(DSparkRecord));
}

// Whether every rank's record of block b carries the same anchor and inputs digest; *rank is the
// first rank that differs from rank 0 (every rank finds the same).
DFSEL_HD bool dspark_inputs_agree(const DSparkLayout& l, const uint8_t* recv, int n, int b, int* rank) {
  const DSparkRecord* r0 = dspark_record(l, (void*)recv, b);
  for (int r = 1; r < n; ++r) {
    const DSparkRecord* x = dspark_record(l, (void*)(recv + (size_t)r * l.bytes), b);
    if (x->anchor != r0->anchor || x->inputs != r0->inputs) {
      *rank = r;
      return false;
    }
  }
  return true;
}

// Block b's records of n ranks (rank r's at recv + r * l.bytes) merged the same way on every
// rank: the best key by the candidate order (value, then lowest draft id; NaN last), the
// largest row maximum, the normaliser parts summed (exactly), and the lowest rank that ships
// the anchor's row. winner < 0 when no rank has a candidate.
struct DSparkMerged {
  int winner;
  int anchor_rank;
  float row_max;
  NormSum norm;
};

DFSEL_HD DSparkMerged merge_dspark_records(const DSparkLayout& l, const uint8_t* recv, int n, int b) {
  DSparkMerged m;
  m.winner = -1;
  m.anchor_rank = -1;
  m.row_max = -INFINITY;
  m.norm.lo = m.norm.hi = 0;
  uint64_t best = 0;
  for (int r = 0; r < n; ++r) {
    const DSparkRecord* rec = dspark_record(l, (void*)(recv + (size_t)r * l.bytes), b);
    if (rec->draft_id >= 0) {
      const uint64_t key = cand_key(rec->key, rec->draft_id);
      if (m.winner < 0 || key > best) m.winner = r, best = key;
    }
    if (rec->row_max > m.row_max) m.row_max = rec->row_max;
    norm_add(&m.norm, rec->norm_lo, rec->norm_hi);
    if (m.anchor_rank < 0 && (rec->flags & kRecordAnchorRow)) m.anchor_rank = r;
  }
  return m;
}

// A block's chain between exchanges, as every backend keeps it.
struct DSparkChainState {
  int32_t drafting;  // 1 while the block drafts (0: stopped by p_min, or a bad anchor)
  int32_t emitted;   // it emitted the last merged step: that step's normaliser is pending
  float last_max;    // that step's merged row maximum
  float last_logit;  // and l at its chosen id
};

// Output cell of step k (1..N) of block b, and a cell as a run starts (dspark.h: tokens and
// draft ids -1, the rest 0).
DFSEL_HD size_t dspark_cell(int b, int N, int k) { return (size_t)b * N + (k - 1); }

DFSEL_HD void clear_dspark_cell(const dfsel_dspark_outputs& out, size_t at) {
  out.tokens[at] = -1;
  if (out.draft_ids) out.draft_ids[at] = -1;
  if (out.logits) out.logits[at] = 0.0f;
  if (out.probs) out.probs[at] = 0.0f;
  if (out.log_norm) out.log_norm[at] = 0.0f;
  if (out.confidence) out.confidence[at] = 0.0f;
}

// Whether a merged winner's target id can index W1 (rows [0, n_target_vocab)). d2t is checked
// whole at plan creation and read in place at every run, so a map changed since is caught
// here, on the one entry a step uses, before its W1 row is read (dspark.h).
DFSEL_HD bool dspark_target_in_range(int32_t target_id, int64_t n_target_vocab) {
  return target_id >= 0 && (int64_t)target_id < n_target_vocab;
}

// Exchange x >= 1 of block b, merged (m), into its outputs and state, the same on every rank
// and backend: step x - 1's probability and log-normaliser once its normaliser is whole
// (sampling), then step x's token, draft id and l if the block still drafts. Returns the
// winning rank's records (its target id is the next step's predecessor; with sharded W1 its
// row is the next W1 row), or null when the block emits nothing at x. With out null only the
// state moves: the CTAs of the one-launch chain that are not its writer keep their own copy.
DFSEL_HD const uint8_t* take_dspark_exchange(const DSparkMerged& m, const DSparkLayout& l, const uint8_t* recv, int b,
                                             int x, int N, float temperature, DSparkChainState* st,
                                             const dfsel_dspark_outputs* out) {
  if (out && x >= 2 && st->emitted && temperature > 0.0f) {
    const size_t at = dspark_cell(b, N, x - 1);
    if (out->probs) out->probs[at] = markov_prob(st->last_logit, st->last_max, temperature, m.norm);
    if (out->log_norm) out->log_norm[at] = markov_log_norm(st->last_max, temperature, m.norm);
  }
  st->emitted = 0;
  if (x > N || !st->drafting || m.winner < 0) return nullptr;
  const uint8_t* from = recv + (size_t)m.winner * l.bytes;
  const DSparkRecord& w = *dspark_record(l, (void*)from, b);
  if (out) {
    const size_t at = dspark_cell(b, N, x);
    out->tokens[at] = w.target_id;
    if (out->draft_ids) out->draft_ids[at] = w.draft_id;
    if (out->logits) out->logits[at] = w.logit;
    out->n_emitted[b] += 1;
  }
  *st = DSparkChainState{1, 1, m.row_max, w.logit};
  return from;
}

}  // namespace dfsel
