// The CPU reference selector: SPEC sections 2 to 5 in plain C++, the specification every GPU path
// is tested against. Each function is one step of the selector on host memory.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"
#include "kernels/common/order.cuh"
#include "kernels/common/row_map.cuh"
#include "kernels/common/walk.cuh"

namespace dfsel::ref {

// Top-K of each selected row of a logits shard {n_cols, *} (F32, F16, BF16), ids offset by
// id_offset, in candidate order. out: [n_rows][k]. Requires k <= n_cols.
void shard_topk(const dfsel_tensor& logits, RowMap map, int32_t n_rows, int32_t k,
                int64_t id_offset, CandRec* out);

// Global top-K of the S lists of K records each (recs: S*K records of one row). out: [k];
// src (optional) receives where each winner came from: src[j] is its index in recs.
void merge_candidates(const CandRec* recs, int32_t n_recs, int32_t k, CandRec* out,
                      int32_t* src = nullptr);

// g[s][r] = sum_e w_h[r][e] * h[row(s)][e] for selected rows; w_h {n_embd, R}.
void gate(const dfsel_tensor& w_h, const dfsel_tensor& hidden, RowMap map, int32_t n_rows,
          float* g);

// One codebook row (R elements as stored) as floats.
void load_row(const void* row, dfsel_type type, int32_t r, float* out);

// S[i][j] = u[j] + sum_r eprev[i][r] * g[r] * enext[j][r], r in order, for n_prev rows i.
void score_lattice(const float* eprev_rows, int32_t n_prev, const float* g,
                   const float* enext_rows, const float* u, int32_t k, int32_t r, float* s);

// The walk of one block over its L lattices (SPEC section 5): lattice [L][K][K], cands [L][K].
// Greedy when w.temperature <= 0, else sampling with philox_uniform(seed, block, p). q
// (optional) receives the distribution used at each step, zeros after a stop. path [L] (-1
// after the last emitted token).
void walk_block(const float* lattice, const CandRec* cands, int32_t L, int32_t k, WalkParams w,
                uint32_t block, int32_t* path, int32_t* n_emitted, float* q);

}  // namespace dfsel::ref
