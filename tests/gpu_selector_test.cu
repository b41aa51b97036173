// The whole selector on the CUDA backend against the CPU reference: shapes, types, special
// values, shard counts on one GPU, placements, walks, graph capture, bad anchors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/shard_topk.cuh"
#include "support/case_lists.h"
#include "support/compare.h"
#include "support/gpu.cuh"
#include "support/problem.h"
#include "support/scoped_env.h"

namespace dfsel::test {
namespace {

constexpr double kTol = 1e-4;

struct Variant {
  std::vector<int64_t> bounds;
  dfsel_placement placement = DFSEL_CODEBOOKS_REPLICATED;
  float temperature = 0.0f, p_min = 0.0f;
};

void expect_gpu_matches_cpu(const Case& c, uint64_t seed, const Variant& v) {
  SCOPED_TRACE(c.str() + " S=" + std::to_string(v.bounds.empty() ? 1 : v.bounds.size() - 1) +
               " placement=" + std::to_string(v.placement) + " T=" + std::to_string(v.temperature) +
               " p_min=" + std::to_string(v.p_min) + " seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.bounds = v.bounds;
  r.placement = v.placement;
  r.temperature = v.temperature;
  r.p_min = v.p_min;
  r.seed = seed ^ 0x5eed;
  r.backend = DFSEL_BACKEND_CPU;
  const Result cpu = run_case(c, d, RunOpts{r.backend, {}, DFSEL_CODEBOOKS_REPLICATED, r.temperature, r.p_min, r.seed});
  ASSERT_EQ(cpu.status, DFSEL_SUCCESS) << cpu.error;
  r.backend = DFSEL_BACKEND_CUDA;
  const Result gpu = run_case(c, d, r);
  ASSERT_EQ(gpu.status, DFSEL_SUCCESS) << gpu.error;
  const std::string why = v.temperature > 0 ? compare_sampled(c, cpu, gpu, v.p_min, r.seed, kTol)
                                            : compare_greedy(c, cpu, gpu, v.p_min, kTol);
  EXPECT_EQ(why, "");
  // Packed rows: ids exact, scores as the GPU's own native scores, zeros elsewhere.
  if (!gpu.packed.empty()) {
    const int L = c.block - 1, K = c.K;
    for (int b = 0; b < c.blocks; ++b)
      for (int p = 0; p <= L; ++p)
        for (int x = 0; x < c.E; ++x) {
          const float got = gpu.packed[((size_t)b * c.block + p) * gpu.packed_row_floats + x];
          float want = 0.0f;
          if (p > 0 && x < K) want = (float)gpu.cand_ids[((size_t)b * L + p - 1) * K + x];
          else if (p > 0 && x < K + K * K) want = gpu.scores[((size_t)b * L + p - 1) * K * K + x - K];
          ASSERT_EQ(std::memcmp(&got, &want, 4), 0) << "packed block " << b << " row " << p << " element " << x;
        }
  }
}

TEST(GpuSelector, MatchesCpuOnRandomShapes) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t vocabs[] = {1000, 31040, 124160, 248320};
  const int ks[] = {1, 8, 16, 64};
  const dfsel_type acts[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
  const dfsel_type wts[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
  for (int i = 0; i < 16; ++i) {
    Case c;
    c.V = vocabs[i % 4];
    c.K = ks[(i / 4) % 4];
    c.R = i % 3 == 0 ? 256 : 64;
    c.E = c.K == 64 ? 4224 : 256 + 32 * (rng() % 8);
    c.block = 2 + rng() % 15;
    c.blocks = 1 + rng() % (c.V > 100000 ? 2 : 6);
    c.logits_t = acts[rng() % 3];
    c.hidden_t = acts[rng() % 3];
    c.cb_t = wts[rng() % 4];
    c.wh_t = wts[rng() % 4];
    c.logits_pad = rng() % 2 ? 0 : 1 + rng() % 7;
    c.softcap = rng() % 2 ? 0.0f : 30.0f;
    expect_gpu_matches_cpu(c, rng(), Variant{});
  }
}

// The block counts SelectorStep times (tests/support/case_lists.h), at the model's K, R and
// block length on a smaller vocabulary shard and n_embd.
class GpuSelectorManyBlocks : public testing::TestWithParam<int> {};
TEST_P(GpuSelectorManyBlocks, MatchesCpu) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  expect_gpu_matches_cpu(model_case(31040, 512, GetParam()), rng(), Variant{});
}
INSTANTIATE_TEST_SUITE_P(, GpuSelectorManyBlocks, testing::ValuesIn(cases::kSelectorStepBlocks),
                         [](const testing::TestParamInfo<int>& info) { return "blocks" + std::to_string(info.param); });

TEST(GpuSelector, SpecialValues) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual,
                    Special::kMixed})
    for (int K : {1, 16, 64}) {
      Case c;
      c.V = 5000;
      c.K = K;
      c.E = 4224;
      c.special = s;
      expect_gpu_matches_cpu(c, rng(), Variant{});
    }
}

TEST(GpuSelector, ShardsOnOneGpuBothPlacements) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int S : {2, 3, 8}) {
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
      Case c;
      c.V = S == 3 ? 202048 : 31040;
      c.K = 16;
      c.R = 256;
      c.E = 512;
      c.block = 16;
      c.blocks = 2;
      c.cb_t = S == 8 ? DFSEL_TYPE_Q8_0 : DFSEL_TYPE_BF16;
      Variant v;
      v.bounds = random_bounds(c.V, S, 1000, rng);
      v.placement = pl;
      expect_gpu_matches_cpu(c, rng(), v);
    }
  }
}

TEST(GpuSelector, ShardCountsGiveBitwiseTheSameResult) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.V = 50000;
  c.K = 16;
  c.R = 128;
  c.E = 512;
  c.block = 8;
  c.blocks = 3;
  c.special = Special::kMixed;
  const Data d = make_data(c, rng());
  RunOpts one;
  one.backend = DFSEL_BACKEND_CUDA;
  const Result base = run_case(c, d, one);
  ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
  for (int S : {2, 3, 4, 7, 8})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
      RunOpts r = one;
      r.bounds = random_bounds(c.V, S, 16, rng);
      r.placement = pl;
      const Result x = run_case(c, d, r);
      ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
      EXPECT_EQ(first_diff(x.cand_ids, base.cand_ids), -1) << "S=" << S;
      EXPECT_EQ(first_diff(x.scores, base.scores), -1) << "S=" << S;
      EXPECT_EQ(first_diff(x.path, base.path), -1) << "S=" << S;
      EXPECT_EQ(first_diff(x.packed, base.packed), -1) << "S=" << S;
    }
}

// Six walks: sampling at three temperatures, greedy at three p_min cuts; K 8 and 16 by turns.
struct Walk {
  int K;
  float temperature, p_min;
};

constexpr Walk kWalks[] = {{8, 0.5f, 0.0f}, {16, 1.5f, 0.0f}, {8, 2.5f, 0.0f},
                           {16, 0.0f, 0.1f}, {8, 0.0f, 0.2f}, {16, 0.0f, 0.3f}};

void PrintTo(const Walk& w, std::ostream* os) {
  *os << "K=" << w.K << " T=" << w.temperature << " p_min=" << w.p_min;
}

class GpuSelectorWalks : public testing::TestWithParam<Walk> {};
TEST_P(GpuSelectorWalks, SamplingAndPMinMatchCpu) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Walk& w = GetParam();
  Case c;
  c.V = 31040;
  c.K = w.K;
  c.R = 64;
  c.E = 512;
  c.block = 16;
  c.blocks = 8;
  Variant v;
  v.temperature = w.temperature;
  v.p_min = w.p_min;
  expect_gpu_matches_cpu(c, rng(), v);
}
// Names in tenths: T5 is temperature 0.5, p_min1 is p_min 0.1.
INSTANTIATE_TEST_SUITE_P(, GpuSelectorWalks, testing::ValuesIn(kWalks), [](const testing::TestParamInfo<Walk>& info) {
  const Walk& w = info.param;
  return "K" + std::to_string(w.K) + "_T" + std::to_string((int)std::lround(w.temperature * 10)) + "_p_min" +
         std::to_string((int)std::lround(w.p_min * 10));
});

TEST(GpuSelector, OutOfRangeAnchorIsReported) {
  DFSEL_REQUIRE_GPUS(1);
  Case c;
  c.V = 4000;
  c.K = 4;
  c.blocks = 3;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Data d = make_data(c, seed);
  d.anchors[1] = 4000;
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  const Result x = run_case(c, d, r);
  EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(x.error.find("anchors[1] = 4000"), std::string::npos) << x.error;
  // The plan stays usable: the same problem with a valid anchor runs.
  d.anchors[1] = 3999;
  const Result y = run_case(c, d, r);
  EXPECT_EQ(y.status, DFSEL_SUCCESS) << y.error;
}

// Two plans whose lattice carves differ (R 256 and R 32, the same kernel instance), the larger
// made first and run after the smaller was made: the later plan must not lower the kernel's
// shared-memory limit under the earlier one.
TEST(GpuSelector, PlansOfDifferentCarvesInterleave) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Case large;
  large.V = 6000;
  large.K = 16;
  large.R = 256;
  large.E = 512;
  large.block = 16;
  large.cb_t = DFSEL_TYPE_BF16;
  Case small = large;
  small.R = 32;
  const Data dl = make_data(large, seed), ds = make_data(small, seed + 1);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  Session a(large, dl, r);
  Result ra;
  ASSERT_EQ(a.create(&ra), DFSEL_SUCCESS) << ra.error;
  Session b(small, ds, r);
  Result rb;
  ASSERT_EQ(b.create(&rb), DFSEL_SUCCESS) << rb.error;
  ASSERT_EQ(a.run(), DFSEL_SUCCESS);
  const Result got = a.collect();
  ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
  r.backend = DFSEL_BACKEND_CPU;
  const Result cpu = run_case(large, dl, r);
  ASSERT_EQ(cpu.status, DFSEL_SUCCESS) << cpu.error;
  EXPECT_EQ(compare_greedy(large, cpu, got, 0.0f, kTol), "");
}

// DFSEL_MAX_CLUSTER: a malformed value is refused at plan creation with the value named; a cap
// (the portable 8, a non-portable 12, none at 1) still matches the CPU on a shape whose gate
// splits n_embd over 16 CTAs and whose lattice takes clusters of 15 when uncapped.
TEST(GpuSelector, MaxClusterIsCheckedAndKeepsTheResult) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.V = 3000;
  c.E = 4096;
  c.R = 64;
  c.K = 8;
  c.block = 16;
  c.blocks = 2;
  for (const char* bad : {"0", "17", "8x", "-8", "sixteen", " 8", "4294967304"}) {
    SCOPED_TRACE(std::string("DFSEL_MAX_CLUSTER=") + bad);
    const ScopedEnv env("DFSEL_MAX_CLUSTER", bad);
    RunOpts r;
    r.backend = DFSEL_BACKEND_CUDA;
    const Result x = run_case(c, make_data(c, rng()), r);
    EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT) << x.error;
    EXPECT_NE(x.error.find(std::string("DFSEL_MAX_CLUSTER = \"") + bad + "\""), std::string::npos) << x.error;
  }
  for (const char* cap : {"1", "8", "12", "16"}) {
    SCOPED_TRACE(std::string("DFSEL_MAX_CLUSTER=") + cap);
    const ScopedEnv env("DFSEL_MAX_CLUSTER", cap);
    expect_gpu_matches_cpu(c, rng(), Variant{});
  }
}

// The whole step on the CUDA backend at sanitizer sizes: one and three shards on one GPU,
// both placements, greedy with p_min and sampling, packed rows (E fits K + K*K).
TEST(GpuSelector, SmallShapesForSanitizers) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int K : {1, 6})
    for (int S : {1, 3})
      for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
        Case c;
        c.K = K;
        c.cb_t = S == 3 ? DFSEL_TYPE_BF16 : DFSEL_TYPE_F32;
        c.logits_t = K == 6 ? DFSEL_TYPE_F16 : DFSEL_TYPE_F32;
        Variant v;
        if (S > 1) v.bounds = random_bounds(c.V, S, K, rng);
        v.placement = pl;
        v.temperature = pl == DFSEL_CODEBOOKS_SHARDED ? 0.9f : 0.0f;
        v.p_min = 0.05f;
        expect_gpu_matches_cpu(c, rng(), v);
      }
  // Rows enough that the top-K's grid is several waves on this GPU: the gate goes first and the
  // top-K is chained to it (host/backend/cuda_backend.cu), for one plan and for a group of
  // plans on one stream, whose later selects are chained to the earlier ones.
  int sms = 0;
  ASSERT_EQ(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0), cudaSuccess);
  for (int S : {1, 2}) {
    Case c;
    c.K = 6;
    c.block = 16;
    // More rows than the 3 top-K CTAs an SM holds beside the gate (40 blocks on an H200).
    c.blocks = std::max(40, 4 * sms / (c.block - 1) + 1);
    cuda::ShardTopKArgs t{};
    t.type = c.logits_t;
    t.n_cols = c.V / S;
    t.n_rows = c.blocks * (c.block - 1);
    t.k = c.K;
    t.shares_sms = 1;
    t.splits = cuda::shard_topk_splits(t, sms);
    ASSERT_FALSE(cuda::shard_topk_one_wave(t, sms)) << "the case no longer runs the several-waves path";
    Variant v;
    if (S > 1) v.bounds = random_bounds(c.V, S, c.K, rng);
    expect_gpu_matches_cpu(c, rng(), v);
  }
}

}  // namespace
}  // namespace dfsel::test
