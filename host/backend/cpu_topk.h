// The CPU backend's top-K of one logits row: the same K candidates, in the same order, as
// ref::shard_topk (SPEC section 3), found in one pass without sorting the row.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/order.cuh"

namespace dfsel {

// The K best of row[0..n) (F32, F16 or BF16; k <= n) with ids offset by id_offset, in
// candidate order, into out[0..k). simd: the CPU has AVX2 (cpu_has_avx2_fma).
void row_topk(const void* row, dfsel_type type, int64_t n, int32_t k, int64_t id_offset, bool simd, CandRec* out);

}  // namespace dfsel

namespace dfsel {

// The global top-K of n records (ref::merge_candidates: out[r] is the record of rank r, src[r]
// its index), in one pass over the records instead of ranking each against all the others,
// which matters for many simulated shards (S * K records a row).
void merge_top_k(const CandRec* recs, int32_t n, int32_t k, CandRec* out, int32_t* src);

}  // namespace dfsel
