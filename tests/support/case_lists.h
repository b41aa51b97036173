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
// ManyBlocks): blocks of 16 tokens at K 16, R 256.
inline constexpr int kSelectorStepBlocks[] = {1, 4, 16, 64};

// The DSpark chain (bench/dspark_step_bench.cu: DSparkStep; tests/gpu_dspark_test.cu: RealisticSize):
// V 163840, R 256, N 7, BF16 W1 and W2, F32 logits.
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
    {8, 1, 0.0f, 180.0},
    {1, 2, 0.0f, 175.0},
    {4, 1, 0.0f, 0.0},
    {1, 1, 0.8f, 0.0},
    {8, 1, 0.8f, 0.0},
};

}  // namespace dfsel::cases
