// The shape lists that the GPU tests check and the benchmarks time, written once so that the
// shapes measured are the shapes proven correct. Included by tests/ (as "support/case_lists.h")
// and by bench/ (as "tests/support/case_lists.h"); plain data, no test or benchmark code, so that
// either side may add a shape and the other sees it. A list changed here changes the names of
// benchmark cases: bench/results/*.json and scripts/ab-bench.sh compare by name.
#pragma once

#include <cstdint>

namespace dfsel::cases {

// shard_topk (bench/shard_topk_bench.cu: ShardTopK, CubSegmentedSortTopK; tests/gpu_shard_topk_test.cu:
// RowsAndColumns): every token count at every vocabulary shard, F32 logits, K 16.
inline constexpr int32_t kShardTopKTokens[] = {1, 16, 256, 1024, 4096};
inline constexpr int64_t kShardTopKVocabs[] = {31040, 124160, 248320};
// The largest of those shapes the top-K test checks against the CPU reference (tokens x vocab
// elements; larger ones take seconds of host time a case for nothing the kernel does differently).
inline constexpr int64_t kShardTopKMaxCheckedElements = 1024 * 31040;

// One selector step, one GPU (bench/selector_step_bench.cu: SelectorStep; tests/gpu_selector_test.cu:
// GpuSelectorManyBlocks): blocks of 16 tokens at K 16, R 256.
inline constexpr int kSelectorStepBlocks[] = {1, 4, 16, 64};

// The kernels after the top-K alone at the step's shape (bench/lattice_bench.cu: Gate, GateTiles,
// ScoreLattice; tests/gpu_lattice_test.cu: GpuGateMeasuredShapes, GpuLatticeMeasuredShapes):
// K 16, R 256, n_embd 5120, blocks of 16 tokens, BF16 W_h and codebooks, F32 hidden.
inline constexpr int kGateBlocks[] = {1, 16, 64};
inline constexpr int kLatticeMaxBlocks = 16;  // ScoreLattice is timed at the gate's block counts up to this
// The lattice at one block beside the plain greedy call: each variant as the benchmark names it
// (the tail of ScoreLattice/tokens:16/vocab:248320/k:16/bf16).
struct LatticeVariant {
  const char* suffix;
  int ranks;
  bool sharded;
  float temperature, p_min;
  int max_cluster;  // 0: the largest the device holds
};
inline constexpr LatticeVariant kLatticeOneBlockVariants[] = {
    {"/replicated/ranks:2", 2, false, 0.0f, 0.0f, 0},
    {"/sharded/ranks:2", 2, true, 0.0f, 0.0f, 0},
    {"/sampling", 1, false, 0.8f, 0.05f, 0},
    {"/cluster:8", 1, false, 0.0f, 0.0f, 8},
};

// The DSpark chain (bench/dspark_step_bench.cu: DSparkStep; tests/gpu_dspark_test.cu:
// GpuDSparkRealisticSize): V 163840, R 256, N 7, BF16 W1 and W2, F32 logits.
inline constexpr int64_t kDSparkVocab = 163840;
inline constexpr int kDSparkRank = 256, kDSparkDraft = 7;
struct DSparkStepShape {
  int blocks;
  int ranks;          // in-process ranks on one GPU
  float temperature;  // 0: greedy
  double target_us;   // the time one H200 is to meet, 0: none set (read by the benchmark only)
};
inline constexpr DSparkStepShape kDSparkStepShapes[] = {
    {1, 1, 0.0f, 160.0},
    {8, 1, 0.0f, 185.0},
    {1, 2, 0.0f, 220.0},
    {4, 1, 0.0f, 175.0},
    {1, 1, 0.8f, 200.0},
    {8, 1, 0.8f, 240.0},
    {16, 1, 0.0f, 195.0},
};

}  // namespace dfsel::cases
