// What a rank of a DFlash2 group was given for one block, carried in its records (the agree
// section of exchange_layout.cuh) so that every rank can see that every other was given the
// same: the anchor, and digests (digest.cuh) of the run's scalars, of the hidden rows the
// block reads and of the plan's W_h. CUDA plans write it (kernels/agree_records.cuh) and the
// lattice compares it; an in-process group of CPU plans compares the inputs themselves first.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "exchange_layout.cuh"
#include "hd.cuh"

namespace dfsel {

struct AgreeRecord {
  int32_t anchor;
  uint32_t scalars;  // digest_fold(digest_scalars(temperature, p_min, seed, n_blocks))
  uint32_t hidden;   // digest_fold of the block's drafted rows (row p - 1 at k = p - 1) and type
  uint32_t weights;  // digest_fold(matrix_digest of W_h), taken at plan creation
};
static_assert(sizeof(AgreeRecord) == 16, "records are exchanged as raw bytes");

DFSEL_HD AgreeRecord* layout_agree(const ExchangeLayout& l, void* base, int b) {
  return (AgreeRecord*)((uint8_t*)base + l.agree_off) + b;
}

// Which fields of two records differ: a mask of these.
enum : uint32_t { kAgreeAnchor = 1, kAgreeScalars = 2, kAgreeHidden = 4, kAgreeWeights = 8 };

DFSEL_HD uint32_t agree_diff(const AgreeRecord& a, const AgreeRecord& b) {
  return (a.anchor != b.anchor ? kAgreeAnchor : 0u) | (a.scalars != b.scalars ? kAgreeScalars : 0u) |
         (a.hidden != b.hidden ? kAgreeHidden : 0u) | (a.weights != b.weights ? kAgreeWeights : 0u);
}

// The first rank (of n, rank r's records at recv + r * l.bytes) whose record of block b
// differs from rank 0's, and how (*diff); n when every rank agrees.
DFSEL_HD int first_disagreeing_rank(const ExchangeLayout& l, const uint8_t* recv, int n, int b, uint32_t* diff) {
  const AgreeRecord r0 = *layout_agree(l, (void*)recv, b);
  for (int r = 1; r < n; ++r) {
    const uint32_t d = agree_diff(r0, *layout_agree(l, (void*)(recv + (size_t)r * l.bytes), b));
    if (d) {
      *diff = d;
      return r;
    }
  }
  *diff = 0;
  return n;
}

}  // namespace dfsel
