// The top-K's launch shape and split rule (docs/topk.md), each constant with where it was measured
// (one H200 unless named; the figures are in dfsel's bench/results/README.md). Changing one is a
// performance change: measure it on the shapes named before keeping it.
#pragma once

#include <stdint.h>

#include "topk_order.cuh"

namespace DFSEL_TOPK_NAMESPACE {

// The largest k, and the k buckets the kernel is built for: lists and tiles are sized for the
// bucket, the loops run to the runtime k.
constexpr int kMaxK = 64;
constexpr int k_bucket(int k) { return k <= 8 ? 8 : k <= 16 ? 16 : k <= 32 ? 32 : kMaxK; }

// Threads a CTA and 16-byte loads a thread a tile. 128-thread CTAs (8 an SM) and 2 vectors a
// thread, alone and together, were slower (2026-11-30, 1 x 31040 F32: 8.54, 7.49 and 9.63 us
// against 7.09).
constexpr int kThreads = 256;
constexpr int kVecsPerThread = 4;

// CTAs an SM the launch bounds ask for (64 registers a thread), and the most the grid is sized
// for. A caller that runs another kernel beside the top-K sizes it for fewer (Options::ctas_per_sm):
// dfsel leaves one slot for its gate (16 x 124160 13.3 -> 11.0 us, 2026-11-30).
constexpr int kCtasPerSm = 4;

// Rows are split into chunks of at least kMinSplitVecs 16-byte vectors (about one tile of
// kVecsPerThread x kThreads) and at most kMaxSplitRecs partial records a row: every decode shape
// was fastest there (2026-12-01: 1 x 248320 F32 at 64 CTAs a row 8.75 us, 10.1 at 121; 16 x 124160
// BF16 at 16, 9.29 against 11.7 at 33; K 64 at 16, 24.6 against 27.7 at 32). 940 keeps
// 16 x 124160 F32 at its measured best, 33 (one wave of 528).
constexpr int64_t kMinSplitVecs = 940;
constexpr int64_t kMaxSplitRecs = 1024;

// The row's last CTA holds the partial records in registers, this many a thread; a forced split
// count is refused beyond what it holds.
constexpr int kRecsPerThread = 8;
static_assert(kMaxSplitRecs <= (int64_t)kThreads * kRecsPerThread, "the last CTA holds every partial record");

// The widest row: ids are int32, and the last id leaves room for a vector.
constexpr int64_t kMaxIdEnd = INT32_MAX - 16;

}  // namespace DFSEL_TOPK_NAMESPACE
