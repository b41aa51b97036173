// The fixed-size records one rank contributes to the all-gather (SPEC section 4.3).
// Its size depends on the run's drafted rows, K and the codebook row size, never on V.
//
//   cands   [n_drafted][K] CandRec       local top-K with global ids, in candidate order
//   rows    [n_drafted][K][2][row_pad]   sharded placement only: e_prev row, e_next row of
//                                        each local candidate, bytes as stored
//   anchor  [n_blocks] { int32 owned; pad; e_prev row }  sharded only: written by the owner
//   agree   [n_blocks] AgreeRecord                       several ranks (CUDA plans): what the
//                                                        rank was given (agree_record.cuh)
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "hd.cuh"
#include "order.cuh"

namespace dfsel {

DFSEL_HD size_t align16(size_t x) { return (x + 15) & ~(size_t)15; }

struct ExchangeLayout {
  int32_t k;
  int32_t n_drafted;
  int32_t n_blocks;
  int32_t sharded;
  size_t row_pad;     // one codebook row, padded to 16 bytes
  size_t rows_off;
  size_t anchor_off;
  size_t anchor_stride;
  size_t agree_off;   // 0: no agree section
  size_t bytes;       // per rank, a multiple of 16
};

DFSEL_HD ExchangeLayout make_exchange_layout(int k, int n_blocks, int block_size, bool sharded,
                                             size_t codebook_row_bytes, bool agree = false) {
  ExchangeLayout l;
  l.k = k;
  l.n_blocks = n_blocks;
  l.n_drafted = n_blocks * (block_size - 1);
  l.sharded = sharded ? 1 : 0;
  l.row_pad = align16(codebook_row_bytes);
  const size_t cand_bytes = align16((size_t)l.n_drafted * k * sizeof(CandRec));
  l.rows_off = cand_bytes;
  const size_t rows_bytes = sharded ? (size_t)l.n_drafted * k * 2 * l.row_pad : 0;
  l.anchor_off = l.rows_off + rows_bytes;
  l.anchor_stride = 16 + l.row_pad;
  const size_t end = l.anchor_off + (sharded ? (size_t)n_blocks * l.anchor_stride : 0);
  l.agree_off = agree ? end : 0;
  l.bytes = end + (agree ? (size_t)n_blocks * 16 : 0);
  return l;
}

DFSEL_HD CandRec* layout_cands(const ExchangeLayout&, void* base) { return (CandRec*)base; }

// which = 0: e_prev row, 1: e_next row of local candidate (d, j).
DFSEL_HD uint8_t* layout_row(const ExchangeLayout& l, void* base, int d, int j, int which) {
  return (uint8_t*)base + l.rows_off + (((size_t)d * l.k + j) * 2 + which) * l.row_pad;
}

DFSEL_HD int32_t* layout_anchor_owned(const ExchangeLayout& l, void* base, int b) {
  return (int32_t*)((uint8_t*)base + l.anchor_off + (size_t)b * l.anchor_stride);
}

DFSEL_HD uint8_t* layout_anchor_row(const ExchangeLayout& l, void* base, int b) {
  return (uint8_t*)base + l.anchor_off + (size_t)b * l.anchor_stride + 16;
}

}  // namespace dfsel
