// The CPU backend's pass over a shard's rows for one DSpark step (docs/dspark.md): every W2 row
// read once for all the blocks of the step (a GEMM, not a GEMV a block), each dot product in
// the eight-chain order of kernels/common/dspark_math.cuh (one AVX2 register holds a row's
// eight chains, one AVX-512 register two rows'), then the biased logit, the step's key and the
// shard's best and largest l per block. Bitwise the rules the reference composes whichever
// instructions run; each vector path only where the CPU has it.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/dspark_math.cuh"

namespace dfsel {

// The instructions the pass's dot products use: plain C++ (markov_dot itself), AVX2 with FMA,
// or AVX-512 (F, BW, DQ) beside them.
enum class PassIsa { kPlain, kAvx2, kAvx512 };

// The widest this CPU has.
PassIsa cpu_pass_isa();

// One step of the pass; rows are the shard's local rows [0, v_end - v_begin).
struct MarkovPass {
  const uint8_t* w2;  // row v at w2 + v * w2_stride, R elements of w2_type (F32, F16, BF16, Q8_0)
  size_t w2_stride;
  dfsel_type w2_type;
  int32_t R, R8;          // R8: R rounded up to 8; e rows are padded with zeros to R8
  const float* scale;     // markov_w2.scale, or null (1)
  int32_t scale_rows;     // 1: one scale; else one per row
  Transform transform;
  dfsel_type z_type;      // the base logits
  int64_t v_begin;        // global id of local row 0
  bool sampling;
  float temperature;
  uint64_t seed;
  uint32_t step;
  int32_t n_blocks;       // blocks of this pass (those still drafting)
  const int32_t* block;   // [n_blocks] their index in the run (the noise's block key)
  const uint8_t* const* z;  // [n_blocks] their base-logit rows
  const float* const* e;    // [n_blocks] their W1 rows, R8 floats
  float* const* l;          // [n_blocks] sampling: where every l of the row goes; else null
};

// The shard's best of one block: its key (cand_key: greedy l, sampling l / T + noise; the
// largest wins), its local id and l, and the largest l (NaN skipped).
struct MarkovBest {
  uint64_t key;
  int32_t id;
  float logit, row_max;
};

// Rows [r0, r1) of the pass into best[0..n_blocks), which holds what earlier rows found
// (start from key 0, id -1, row_max -inf). isa: at most cpu_pass_isa().
void markov_rows(const MarkovPass& p, int64_t r0, int64_t r1, PassIsa isa, MarkovBest* best);

// The normaliser of stored l[r0, r1) against the row's maximum m, added to *sum.
void norm_rows(const float* l, int64_t r0, int64_t r1, float m, float temperature, NormSum* sum);

}  // namespace dfsel
