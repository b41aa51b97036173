// What the kernels of the DSpark chain are given (kernels/dspark_chain.cuh): the plan's
// weights, the run's inputs and outputs, and the workspace that carries a block's chain from
// one kernel to the next. Plain data, set by the host side and read by every kernel.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "dfsel/dspark.h"
#include "hd.cuh"
#include "dspark_record.cuh"
#include "row_map.cuh"
#include "selector_math.cuh"

namespace dfsel::cuda {

// One CTA's (or in a CTA one warp's) part of a pass for one block.
struct DSparkPartial {
  uint64_t key;               // the best cand_key (0: none)
  uint64_t norm_lo, norm_hi;  // its part of the previous step's normaliser
  uint32_t row_max;           // value_key of the largest l (0: none)
  float logit;                // l at the best key's id
};
static_assert(sizeof(DSparkPartial) == 32, "partials are indexed by CTA and block");

// The one-launch chain's exchange of step x for one block (kernels/dspark_launch.cuh): every
// CTA folds its part in with atomics (a maximum of keys, a maximum, an exact integer sum).
struct DSparkStepSlot {
  unsigned long long key;              // the best cand_key (0: none)
  unsigned long long norm_lo, norm_hi;  // step x - 1's normaliser
  uint32_t row_max;                    // value_key of the largest l (0: none)
  uint32_t pad;
};
static_assert(sizeof(DSparkStepSlot) == 32, "slots are indexed by step and block");

constexpr int kDSparkErrors = 8;  // the words of DSparkChainArgs::error

struct DSparkChainArgs {
  // The plan's weights (device memory; K-quants widened to BF16 at creation).
  const uint8_t* w1;  // replicated: row x is target id x; sharded: row x - v_begin
  size_t w1_stride;
  dfsel_type w1_type;
  const uint8_t* w2;  // the shard's rows
  size_t w2_stride;
  dfsel_type w2_type;
  const float* scale;  // markov_w2.scale, or null
  int32_t scale_rows;  // 1: one scale; else one per row
  const uint8_t* conf_w;  // the confidence head {n_embd + R}, or null
  dfsel_type conf_type;
  float conf_bias;
  uint64_t conf_w_digest;  // matrix_digest of conf_w (several ranks), for the records' inputs word
  int64_t n_embd;
  const int32_t* d2t;  // the shard's target ids, or null
  int32_t R, R8, N;    // R8: R rounded up to 8
  int64_t v_begin, v_end, n_target_vocab;
  int32_t n_ranks, max_blocks;
  bool sharded_w1;
  Transform transform;
  RowMap row_map;  // the logits (and hidden) row that step k of block b reads: b * N + k - 1

  // The run.
  DSparkLayout layout;  // of this run's n_blocks
  const uint8_t* logits;
  size_t logits_stride;
  dfsel_type logits_type;
  const uint8_t* hidden;
  size_t hidden_stride;
  dfsel_type hidden_type;
  const int32_t* anchors;
  int32_t n_blocks;
  float temperature, p_min;
  uint64_t seed;
  dfsel_dspark_outputs out;  // probs and log_norm null unless sampling

  // The workspace.
  uint8_t* send;
  const uint8_t* recv;  // n_ranks records of layout.bytes; send itself on one rank
  float* e;             // [max_blocks][R8] the W1 row of each block's next step, widened
  float* hconf;         // [max_blocks][N][8] the confidence chains after the hidden part
  DSparkChainState* state;   // [max_blocks] each block's chain between kernels
  DSparkPartial* partials;   // [grid][max_blocks]
  float* l_store;            // [2][max_blocks][v_end - v_begin] l of the last two steps (sampling)
  uint32_t* ticket;          // CTAs done with the pass; the last one resets it
  uint32_t* inputs;          // [max_blocks] several ranks: the inputs word of each block's records
  DSparkStepSlot* slots;     // [N + 2][max_blocks] the one-launch chain's exchanges, zeroed by begin
                             // (null where the plan runs the passes)
  uint32_t* barrier;         // [1] the one-launch chain's grid barrier: arrivals since begin zeroed
                             // it (null where the plan runs the passes)
  int32_t* error;            // [0]: 1 + the lowest block with a bad anchor; [1]: 1 + a block
                             // whose anchor row no rank held; [2..6]: 1, then the draft id, target
                             // id, block and step of a d2t entry changed out of range; [7]: 1 +
                             // the lowest block whose ranks were given different inputs
                             // (kDSparkErrors)
};

// The tile a pass stages (kernels/dspark_chain.cu), chosen at plan creation.
struct DSparkPassShape {
  int32_t tile_rows;   // rows a CTA reads at once, two threads a row
  int32_t stages;      // tiles in flight per CTA (2 or 3)
  int32_t pitch;       // bytes between staged rows
  int32_t unit;        // bytes a thread copies at once when the rows are not 16-byte aligned
  uint32_t row_bytes;  // one W2 row as stored
  int32_t async_copy;  // 1: 16-byte asynchronous copies (16-byte aligned rows); 0: the threads copy
  int32_t e_terms;     // 0: the eight-chain product; 1 or 3: tensor cores (no stages: W2 read
                       // into registers), e in that many BF16 terms
  int32_t mma_blocks;  // tensor cores: the blocks of the largest group (8 or 16)
  int32_t e_pitch;     // tensor cores: bytes between e's term rows in shared memory
};

// A pass's dynamic shared memory, by offset: the stages (none on tensor cores), the W1 rows of
// one group of blocks (kMaxPassBlocks of R8 floats; tensor cores: of every group, mma_blocks x
// e_terms rows of R BF16 terms each), each warp's best of every block of the largest
// run (DSparkPartial without its normaliser), and per block the normaliser part, the last
// step's maximum, its base-logits row, its flags and its place in the lists of the step.
constexpr int kMaxPassBlocks = 8;
constexpr int kMaxPassWarps = 12;  // 384 threads: a tile of up to 192 rows
constexpr int kMaxMmaWarps = 16;   // tensor cores: 512 threads, a slice of 16 rows a warp

struct DSparkWarpBest {
  uint64_t key;
  float logit;
  uint32_t row_max;
};

struct DSparkPassCarve {
  size_t e, warp_best, norm_lo, norm_hi, last_max, z_row, active, emitted, flags, misc, total;
};

DFSEL_HD DSparkPassCarve dspark_pass_carve(const DSparkPassShape& s, int32_t R8, int32_t max_blocks) {
  DSparkPassCarve c;
  size_t off = (size_t)s.stages * s.tile_rows * s.pitch;
  auto take = [&](size_t bytes, size_t align) {
    off = (off + align - 1) / align * align;
    const size_t at = off;
    off += bytes;
    return at;
  };
  const size_t mb = (size_t)max_blocks;
  const size_t groups = s.e_terms ? (mb + s.mma_blocks - 1) / s.mma_blocks : 0;
  c.e = take(s.e_terms ? groups * s.e_terms * s.mma_blocks * s.e_pitch : (size_t)kMaxPassBlocks * R8 * 4, 16);
  c.warp_best = take((size_t)(s.e_terms ? kMaxMmaWarps : kMaxPassWarps) * mb * sizeof(DSparkWarpBest), 16);
  c.norm_lo = take(mb * 8, 8);
  c.norm_hi = take(mb * 8, 8);
  c.last_max = take(mb * 4, 4);
  c.z_row = take(mb * 8, 8);
  c.active = take(mb * 4, 4);
  c.emitted = take(mb * 4, 4);
  c.flags = take(mb, 4);
  c.misc = take(4 * 4, 4);
  c.total = (off + 127) / 128 * 128;
  return c;
}

}  // namespace dfsel::cuda
