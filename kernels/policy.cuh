// The launch shapes and tuning constants of the step's kernels, in one place: each says what it
// sets and where it was measured (figures in bench/results/README.md, all on one H200 unless
// named). Changing one is a performance change: measure it with scripts/ab-bench.sh. The
// constants that are rules rather than choices (the K buckets, the term split, the hardware's
// cluster sizes) stay beside the code they define.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/dspark_args.cuh"
#include "kernels/topk/topk_policy.cuh"

namespace dfsel::cuda {

// ---- What the step's kernels share: an SM ----

constexpr int kSmRegisters = 65536;  // 32-bit registers an SM (sm_90)

// The registers a thread may hold under __launch_bounds__(threads, min_ctas).
constexpr int launch_bound_regs(int threads, int min_ctas) { return kSmRegisters / (threads * min_ctas); }

// ---- shard_topk (kernels/shard_topk.cu over the vendorable top-K, kernels/topk/) ----

// The top-K's own shape and split rule are its tuning header's (kernels/topk/topk_policy.cuh):
// threads a CTA, loads a thread, CTAs an SM, the split bounds. What the step adds is the room
// beside the gate: when the gate runs beside it, the top-K's grid is sized for one CTA an SM
// fewer (ShardTopKArgs::shares_sms): 16 x 124160 13.3 -> 11.0 us, 256 x 124160 39.6 -> 37.5
// (2026-11-30, third round, "the top-K's grid sized per call"); with the grid at 3 a step of
// 16 / 64 / 256 tokens went from 33.1 / 58.9 / 121 to 31.4 / 50.5 / 109 us (second round).
constexpr int kSelectThreads = topk::kThreads;
constexpr int kTopKCtasPerSm = topk::kCtasPerSm;
constexpr int kTopKCtasBesideGate = kTopKCtasPerSm - 1;

// ---- gate (kernels/gate.cu) ----

// A gate tile: warps along M (drafted rows), N (W_h rows) and K; mma tiles a warp along M and
// N; elements of n_embd a stage; stages in flight; the CTAs an SM its launch bounds ask for;
// and the CTAs an SM the n_embd split aims for (wave).
struct GateTileShape {
  int wm, wn, wk, mt, nt, ks, stages, min_ctas, wave;
  constexpr int threads() const { return 32 * wm * wn * wk; }
};
// Decode (a block or two): 16 rows x 32 W_h rows, four warps splitting each stage's four k
// steps, every stage of the CTA's range in flight at once (5 x 64 = 320 elements: n_embd 5120
// over 16 CTAs). GateTiles, 2026-12-01: at a wave of 4, 16 rows 5.6 us (128 CTAs, clusters of
// 16), 240 rows 15.7 us (480 CTAs); at 1 CTA an SM, 21.5 us.
constexpr GateTileShape kGateSmallTile = {1, 1, 4, 1, 4, 64, 5, 4, 4};
// Hundreds of rows and more: 64 x 256 (all of R = 256 in one tile: W_h is read once per 64
// rows), a warp per 32 x 64. GateTiles: at a wave of 1, 960 rows 32.9 us (120 CTAs); 240
// CTAs, 47.9.
constexpr GateTileShape kGateLargeTile = {2, 4, 1, 2, 8, 32, 3, 2, 1};
// Up to this many rows the small tile (GateTiles: 240 rows 15.7 us, the large 19.6), above it
// the large (960 rows 32.9 us, the small 49).
constexpr int kGateSmallTileMaxRows = 256;

// The room rule: beside the gate, the top-K's grid leaves one CTA slot of each SM free, and a
// small-tile gate CTA must fit in it, in threads and in registers. (Shared memory is made room
// for by the carve-out both kernels ask for: without it the step took 34.3 us against 27.1,
// 2026-12-01.) The gate first held 250 registers a thread, and its CTAs waited for the top-K's
// (2026-11-30, second round).
static_assert(kTopKCtasBesideGate < kTopKCtasPerSm, "the top-K leaves a slot beside the gate");
static_assert(kGateSmallTile.threads() <= kSelectThreads &&
                  kGateSmallTile.threads() * launch_bound_regs(kGateSmallTile.threads(), kGateSmallTile.min_ctas) <=
                      kSelectThreads * launch_bound_regs(kSelectThreads, kTopKCtasPerSm),
              "a small-tile gate CTA fits in the slot one top-K CTA leaves");

// ---- score_lattice (kernels/score_lattice.cu, kernels/block/lattice_*.cuh) ----

// Threads a CTA, and the CTAs an SM its launch bounds ask for (two a SM: 121 registers, 45 KB
// of shared memory at K 16, R 256; 2026-12-01, "the lattice as a cluster per block").
constexpr int kLatticeThreads = 256;
constexpr int kLatticeMinCtas = 2;
// The fast instance (rows staged whole, tables pushed) asks for three a SM up to K 32 (at most
// 85 registers: 69 at K 16 for BF16 codebooks, with no spill; K 32 spills up to 12 bytes, K 64
// would spill about 100), so that 16 blocks' clusters of 15 are resident at once, not 14.
constexpr int lattice_fast_min_ctas(int kp) { return kp <= 32 ? 3 : 2; }
// Shared memory for the staged codebook rows: every record's rows when they fit, else the
// merged candidates' rows, R in chunks. Chosen with the cluster kernel (d5803b6), not swept.
constexpr size_t kSlotBudget = 96 * 1024;
// Each of the walker's pushed tables (choices, q rows); larger ones go through the workspace.
// Chosen with the cluster kernel, not swept.
constexpr size_t kPushBudget = 32 * 1024;

// ---- pack_records (kernels/pack_records.cu) ----

// Warps a CTA, one a record row pair or anchor. Not measured: the copy is small beside the
// exchange.
constexpr int kPackWarps = 8;

// ---- agree_records (kernels/agree_records.cu) ----

// One CTA a drafted row; its threads a CTA, and the 8-byte words a thread loads at once. With
// eight CTAs of 128 threads a block, each thread taking one word at a time, a two-rank simulated
// step took 54.6 us against 46.6 without the records; this shape, 49.5 (2026-12-02, one H200,
// bench/results/README.md). Not swept further.
constexpr int kAgreeThreads = 256;
constexpr int kAgreeLoads = 8;

// ---- the DSpark chain (kernels/dspark_chain.cu, kernels/block/dspark_*.cuh) ----

// The pass's tiles (rows x stages), the first that fits the device's shared memory beside the
// rest. One DSpark chain, V 163840, R 256, BF16, 1 / 8 blocks (2026-12-01, "DSpark on the CUDA
// backend"): 192 x 2 256.5 / 590.7 us, 128 x 3 270.5 / 654.9, 128 x 2 269.6 / 646.8, 96 x 2
// 252.5 / 652.1: more warps a SM paid more than a third stage. Two threads a row, so the largest
// tile is the pass's largest CTA.
struct DSparkTile {
  int rows, stages;
};
// DFSEL_DSPARK_TILE ("ROWSxSTAGES") makes a plan take another, to measure it
// (host/backend/cuda_dspark.cu).
constexpr DSparkTile kDSparkTiles[] = {{192, 2}, {128, 3}, {128, 2}, {64, 3}, {64, 2}, {32, 3}, {32, 2}, {16, 3}, {16, 2}};
constexpr int kDSparkTileCount = (int)(sizeof(kDSparkTiles) / sizeof(kDSparkTiles[0]));
static_assert(kDSparkTiles[0].rows * 2 <= kMaxPassWarps * 32, "the largest tile's CTA is within the pass's bounds");
// Blocks a merge CTA serves (a warp each) and the threads of begin's CTA (one a block). Not
// measured: each runs once a step or a run, beside the pass.
constexpr int kDSparkMergeWarps = 8;
constexpr int kDSparkBeginThreads = 256;
// Loads a thread issues ahead: the pending blocks' last l a tile (the normaliser), and the last
// CTA's CTA parts a lane. Not swept.
constexpr int kDSparkNormAhead = 4;
// Tensor cores: the pass's warps a CTA (one CTA a SM; DFSEL_DSPARK_TILE's rows / 16 asks for
// another count, up to kMaxMmaWarps).
constexpr int kDSparkMmaWarps = 16;
constexpr int kDSparkPartsAhead = 4;
// The one-launch chain's builds (kernels/dspark_launch.cu: blocks a group, warps a CTA, CTAs a
// SM its registers are capped for, the next slice staged or not) and what each measured are
// listed there; the chain probe's best at 1 to 8 blocks was 8 warps, 3 CTAs a SM, but the
// library's kernel spills in its product's loop under 3 CTAs' 80 registers.
// The one launch's sampling normaliser: a lane's loads of the last step's l in flight together,
// for kDSparkNormPairs pending blocks a half-warp in each of kDSparkNormSlices slices (the most
// that left its spills as they were; not swept).
constexpr int kDSparkNormPairs = 2;
constexpr int kDSparkNormSlices = 4;

}  // namespace dfsel::cuda
