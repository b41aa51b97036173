// Where each codebook row of the lattice comes from (SPEC section 4.6), for the CPU
// backend and the kernels alike. Replicated: every rank reads its own full codebooks by token
// id. Sharded: the owner of a candidate shipped its E_prev and E_next rows inside its record,
// and the owner of the anchor shipped the anchor's E_prev row (the lowest rank that flags it).
// A merged candidate is found by its record index q in [0, S*K): rank q / K, slot q % K.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "exchange_layout.cuh"
#include "hd.cuh"

namespace dfsel {

// Sender side: whether this rank's range holds token id.
DFSEL_HD bool owns_token(int64_t v_begin, int64_t v_end, int64_t id) { return id >= v_begin && id < v_end; }

struct RowSource {
  const uint8_t* recv;    // n_ranks records, rank r's at recv + r * layout.bytes
  ExchangeLayout layout;
  int32_t n_ranks;
  const uint8_t* e_prev;  // replicated codebooks {R, V}, row v at base + v * stride
  const uint8_t* e_next;
  size_t stride;
  int64_t n_vocab;
};

DFSEL_HD uint8_t* rank_records(const RowSource& s, int r) {
  return (uint8_t*)s.recv + (size_t)r * s.layout.bytes;
}

// Record q of drafted row d.
DFSEL_HD CandRec record_at(const RowSource& s, int d, int q) {
  const int k = s.layout.k;
  return layout_cands(s.layout, rank_records(s, q / k))[(size_t)d * k + q % k];
}

// A replicated row by id; null (read as zeros) outside the vocabulary.
DFSEL_HD const uint8_t* book_row(const RowSource& s, const uint8_t* base, int64_t id) {
  return id >= 0 && id < s.n_vocab ? base + (size_t)id * s.stride : nullptr;
}

// The codebook row (which = 0: E_prev, 1: E_next) of the merged candidate of drafted row d
// whose record index is q and whose token id is id.
DFSEL_HD const uint8_t* candidate_row(const RowSource& s, int d, int q, int32_t id, int which) {
  if (!s.layout.sharded) return book_row(s, which ? s.e_next : s.e_prev, id);
  const int k = s.layout.k;
  return layout_row(s.layout, rank_records(s, q / k), d, q % k, which);
}

// Sharded: the lowest rank that ships block b's anchor row, n_ranks if none does.
DFSEL_HD int anchor_owner(const RowSource& s, int b) {
  for (int r = 0; r < s.n_ranks; ++r)
    if (*layout_anchor_owned(s.layout, rank_records(s, r), b) == 1) return r;
  return s.n_ranks;
}

// The E_prev row of block b's anchor (owner from anchor_owner when sharded); null if none.
DFSEL_HD const uint8_t* anchor_row(const RowSource& s, int b, int32_t anchor, int owner) {
  if (!s.layout.sharded) return book_row(s, s.e_prev, anchor);
  return owner < s.n_ranks ? layout_anchor_row(s.layout, rank_records(s, owner), b) : nullptr;
}

// Predecessors of position p: the anchor alone at p = 1 (its row of scores stands for every
// lattice row i there), the K candidates of p - 1 after it.
DFSEL_HD int predecessor_count(int p, int k) { return p == 1 ? 1 : k; }
DFSEL_HD int scored_row(int p, int i) { return p == 1 ? 0 : i; }

}  // namespace dfsel
