// The DSpark chain on the CUDA backend against the CPU backend (itself bitwise the reference,
// dspark_cpu_backend_test.cpp). A CUDA plan computes W2[v] . e in the eight chains, or on tensor
// cores where W2 is BF16 on the device, R a multiple of 32 up to 256 and the plan may run two
// blocks or more (DFSEL_DSPARK_PRODUCT, dspark_cuda_uses_mma). Every problem runs with the chains (DFSEL_DSPARK_PRODUCT=chains), each
// output bit for bit the CPU backend's, and, where the default is the tensor-core product, with
// that too, against the double-precision oracle (dspark_oracle.h) within 1e-4: tokens exactly
// but past a near-tie, scores within tolerance, nearly every step judged. The problems: random
// drafts of every shape, layout, d2t, scale, confidence head, transform and weight type, greedy
// and sampling; planted special values; extreme temperatures; a realistic size. With either
// product, results are bitwise the same for 1 to 4 in-process ranks on one GPU over uneven
// ranges, both W1 placements, one stream or one per rank, any batching of the blocks, CUDA-graph
// replay with new inputs, a second run, a caller-owned workspace and a tile override. Also: a bad
// anchor or d2t entry reported by dfsel_dspark_plan_wait, two plans on one stream, and
// DFSEL_DSPARK_PRODUCT checked at creation. Everything through the public C API; outputs
// poisoned before each run.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include "kernels/common/numeric.cuh"
#include "support/case_lists.h"
#include "support/dspark_gpu.h"
#include "support/dspark_oracle.h"
#include "support/dspark_problem.h"
#include "support/gpu.cuh"
#include "support/scoped_env.h"

namespace dfsel::test {
namespace {

// A case of V (= V_target) draft rows, rank R, hidden width E (0: no confidence head), N steps
// and `blocks` blocks; the rest as DSparkCase's defaults.
DSparkCase sized(int64_t V, int R, int64_t E, int N, int blocks) {
  DSparkCase c;
  c.V = c.V_target = V;
  c.R = R;
  c.E = E;
  c.N = N;
  c.blocks = blocks;
  return c;
}

std::string describe(const DSparkCase& c, uint64_t seed, const DSparkRunOpts& r) {
  std::string b;
  for (int64_t x : r.bounds) b += (b.empty() ? "" : ",") + std::to_string(x);
  return c.str() + " seed=" + std::to_string(seed) + " ranks=" + std::to_string(r.bounds.empty() ? 1 : r.bounds.size() - 1) +
         " bounds=[" + b + "] T=" + std::to_string(r.temperature) + " p_min=" + std::to_string(r.p_min) +
         " sharded=" + std::to_string(r.placement);
}

// The CPU backend's result for the same problem (every rank of r, as run_dspark runs them).
DSparkResult cpu_result(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r) {
  DSparkResult cpu = run_dspark(c, d, r);
  EXPECT_EQ(cpu.status, DFSEL_SUCCESS) << "CPU backend: " << cpu.error;
  return cpu;
}

// The tensor-core product against the oracle: its sums round differently from the chains'
// (a relative error of about 1e-6 of the |w| . |e| sums), far within this.
constexpr double kMmaTol = 1e-4;

// The products a CUDA plan of c is checked with: the chains always, and the default product
// when that is the tensor-core one (false: chains, true: tensor cores).
std::vector<bool> products(const DSparkCase& c) {
  if (dspark_cuda_uses_mma(c)) return {false, true};
  return {false};
}

// For a scope (the plans made in it): the chains through DFSEL_DSPARK_PRODUCT=chains, or the
// default product, the environment as the test run has it.
class Product {
 public:
  explicit Product(bool mma) : mma_(mma) {
    if (!mma) chains_.emplace("DFSEL_DSPARK_PRODUCT", "chains");
  }
  std::string str() const { return mma_ ? "tensor-core product" : "chain product"; }

 private:
  bool mma_;
  std::optional<ScopedEnv> chains_;
};

// A CUDA result against the CPU backend's for the same problem: bitwise with the chains; with
// the tensor-core product, against the oracle within kMmaTol (the CPU backend being bitwise the
// reference, which the oracle checks in the same way), its judged steps added to *tally.
void expect_result_matches_cpu(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkResult& gpu,
                               bool mma, OracleTally* tally = nullptr) {
  if (mma) EXPECT_EQ(compare_dspark_with_oracle(c, d, r, gpu, kMmaTol, tally), "") << "against the oracle";
  else EXPECT_EQ(dspark_bitwise_diff(gpu, cpu_result(c, d, r)), "") << "against the CPU backend";
}

// One chain of every rank on the CUDA backend with each product of c, against the CPU backend.
void expect_matches_cpu(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkCudaOpts& o = {},
                        OracleTally* tally = nullptr) {
  for (bool mma : products(c)) {
    const Product p(mma);
    SCOPED_TRACE(p.str());
    const DSparkResult gpu = run_dspark_cuda(c, d, r, o);
    ASSERT_EQ(gpu.status, DFSEL_SUCCESS) << gpu.error;
    expect_result_matches_cpu(c, d, r, gpu, mma, tally);
  }
}

void expect_matches_cpu(const DSparkCase& c, uint64_t seed, const DSparkRunOpts& r, const DSparkCudaOpts& o = {},
                        OracleTally* tally = nullptr) {
  SCOPED_TRACE(describe(c, seed, r));
  expect_matches_cpu(c, make_dspark_data(c, seed), r, o, tally);
}

// Near-ties leave steps of the tensor-core runs unjudged: over a test's runs they must be rare
// (under 1 step in 100 on the CPU backend's runs, DSparkReference.*), or the check says little.
void expect_mostly_judged(const OracleTally& t) {
  EXPECT_GE(t.judged * 10, t.steps * 9) << t.judged << " of " << t.steps << " steps judged";
}

// c with a W2 the tensor cores take: BF16, R rounded up to a multiple of 32 (at most 256), two
// blocks or more (W1 and the confidence head BF16 where their quant blocks no longer divide
// their rows).
DSparkCase with_bf16_w2(DSparkCase c) {
  auto block = [](dfsel_type t) {
    return t == DFSEL_TYPE_Q8_0 ? 32 : is_widened_type(t) ? (int)widened_block(t).elems : 1;
  };
  c.w2_t = DFSEL_TYPE_BF16;
  c.R = std::min((c.R + 31) / 32 * 32, 256);
  c.blocks = std::max(c.blocks, 2);
  if (c.R % block(c.w1_t) != 0) c.w1_t = DFSEL_TYPE_BF16;
  if ((c.E + c.R) % block(c.conf_t) != 0) c.conf_t = DFSEL_TYPE_BF16;
  return c;
}

// The first n blocks of a problem (the same weights; anchors, logits and hidden rows a prefix),
// and of a result.
DSparkData first_blocks(const DSparkCase& c, DSparkData d, int n) {
  const size_t rows = (size_t)n * c.rows();
  d.logits.resize(rows * d.logits_nb1);
  d.logits_f.resize(rows * (size_t)c.V);
  d.hidden.resize(rows * d.hidden_nb1);
  d.hidden_f.resize(rows * (size_t)c.E);
  d.anchors.resize((size_t)n);
  return d;
}

DSparkResult first_blocks(DSparkResult x, int n, int N) {
  for (std::vector<int32_t>* v : {&x.tokens, &x.draft_ids})
    if (!v->empty()) v->resize((size_t)n * N);
  for (std::vector<float>* v : {&x.logits, &x.probs, &x.log_norm, &x.confidence})
    if (!v->empty()) v->resize((size_t)n * N);
  x.n_emitted.resize((size_t)n);
  return x;
}

// Every other case with a W2 the tensor cores take (the random ones seldom do).
TEST(GpuDSpark, MatchesTheCpuOnRandomDrafts) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  OracleTally t;
  int i = 0;
  for (const auto& [c, r] : random_dspark_runs(rng, 60)) {
    DSparkCudaOpts o;
    o.stream_per_rank = i % 4 >= 2;  // plans of a group on one stream, or one stream each
    expect_matches_cpu(i++ % 2 == 1 ? with_bf16_w2(c) : c, rng(), r, o, &t);
  }
  expect_mostly_judged(t);
}

// Each special case as drawn and, where that W2 takes the chains alone, with a BF16 W2.
TEST(GpuDSpark, MatchesTheCpuOnSpecialValues) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  OracleTally t;
  for (const auto& [c, r] : special_dspark_runs(rng)) {
    expect_matches_cpu(c, rng(), r, {}, &t);
    if (!dspark_cuda_uses_mma(c)) expect_matches_cpu(with_bf16_w2(c), rng(), r, {}, &t);
  }
  expect_mostly_judged(t);
}

// Every weight type for W1, W2 and the confidence head (R and n_embd + R whole K-quant blocks),
// both layouts, greedy and sampling with p_min, with a per-row scale and d2t half the time: the
// BF16, Q4_K and Q6_K W2 with both products.
TEST(GpuDSpark, EveryWeightType) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const dfsel_type types[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_Q4_K,
                              DFSEL_TYPE_Q6_K};
  for (int i = 0; i < 6; ++i)
    for (bool from_anchor : {true, false}) {
      DSparkCase c;
      c.V = 700;
      c.R = 256;
      c.E = 256;
      c.N = 5;
      c.blocks = 3;
      c.from_anchor = from_anchor;
      c.w1_t = types[i];
      c.w2_t = types[(i + 2) % 6];
      c.conf_t = types[(i + 4) % 6];
      c.conf_bias = 0.5f;
      c.scale_rows = from_anchor ? 2 : 1;
      c.d2t = i % 2 == 1;
      c.V_target = c.d2t ? 900 : c.V;
      DSparkRunOpts r;
      r.bounds = random_bounds(c.V, 2, 1, rng);
      r.temperature = from_anchor ? 0.0f : 0.8f;
      r.p_min = 0.4f;
      r.seed = rng();
      expect_matches_cpu(c, rng(), r);
    }
}

// 1 to 4 ranks over uneven ranges (aligned to 4 rows and not), both placements (sharded W1
// without d2t), one stream and a stream a rank: bitwise the same as one rank, which matches the
// CPU backend, greedy and sampling; a Q8_0 W2 (the chains) and a BF16 one (both products).
TEST(GpuDSpark, ShardCountsAndPlacementsGiveBitwiseTheSameResult) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type w2_t : {DFSEL_TYPE_Q8_0, DFSEL_TYPE_BF16})
    for (float temperature : {0.0f, 1.1f}) {
      DSparkCase c = sized(5003, 64, 40, 7, 4);
      c.w1_t = DFSEL_TYPE_BF16;
      c.w2_t = w2_t;
      c.scale_rows = 2;
      c.special = Special::kMixed;
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      DSparkRunOpts one;
      one.temperature = temperature;
      one.p_min = 0.3f;
      one.seed = rng();
      SCOPED_TRACE(describe(c, data_seed, one));
      for (bool mma : products(c)) {
        const Product p(mma);
        SCOPED_TRACE(p.str());
        const DSparkResult base = run_dspark_cuda(c, d, one);
        ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
        expect_result_matches_cpu(c, d, one, base, mma);
        for (int S = 2; S <= 4; ++S)
          for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
            for (bool per_rank : {false, true}) {
              // Shards that start at multiples of 4 take the one-launch chain's kernel a step
              // where the tensor cores apply; others the pass.
              DSparkRunOpts r = one;
              r.bounds = per_rank ? aligned_bounds(c.V, S, 4, 1, rng) : random_bounds(c.V, S, 1, rng);
              r.placement = pl;
              DSparkCudaOpts o;
              o.stream_per_rank = per_rank;
              SCOPED_TRACE(describe(c, data_seed, r) + " stream_per_rank=" + std::to_string(per_rank));
              const DSparkResult x = run_dspark_cuda(c, d, r, o);
              ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
              EXPECT_EQ(dspark_bitwise_diff(x, base), "");
            }
      }
    }
}

// The sizes the chain runs at (tests/support/case_lists.h: V 163840, R 256, N 7), BF16 W1 and
// W2 (both products), F32 logits: 1 and 8 blocks, greedy and sampling, one rank and two, and
// every shape DSparkStep times that this grid lacks.
struct RealisticShape {
  int blocks, ranks;
  float temperature;
};

void PrintTo(const RealisticShape& s, std::ostream* os) {
  *os << "blocks=" << s.blocks << " ranks=" << s.ranks << " T=" << s.temperature;
}

std::vector<RealisticShape> realistic_shapes() {
  std::vector<RealisticShape> list;
  for (int blocks : {1, 8})
    for (float temperature : {0.0f, 0.8f})
      for (int S : {1, 2}) list.push_back({blocks, S, temperature});
  for (const cases::DSparkStepShape& m : cases::kDSparkStepShapes) {
    const bool listed = std::any_of(list.begin(), list.end(), [&](const RealisticShape& x) {
      return x.blocks == m.blocks && x.ranks == m.ranks && x.temperature == m.temperature;
    });
    if (!listed) list.push_back({m.blocks, m.ranks, m.temperature});
  }
  return list;
}

class GpuDSparkRealisticSize : public testing::TestWithParam<RealisticShape> {};
TEST_P(GpuDSparkRealisticSize, MatchesTheCpu) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const RealisticShape& s = GetParam();
  DSparkCase c = sized(cases::kDSparkVocab, cases::kDSparkRank, 0, cases::kDSparkDraft, s.blocks);
  c.w1_t = c.w2_t = DFSEL_TYPE_BF16;
  const uint64_t data_seed = rng();
  const DSparkData d = make_dspark_data(c, data_seed);
  DSparkRunOpts r;
  if (s.ranks > 1) r.bounds = aligned_bounds(c.V, s.ranks, 4, 1024, rng);  // as DSparkStep's shards: aligned
  r.temperature = s.temperature;
  r.seed = rng();
  SCOPED_TRACE(describe(c, data_seed, r));
  expect_matches_cpu(c, d, r);
}
// Temperature in tenths: T8 is 0.8, T0 greedy.
INSTANTIATE_TEST_SUITE_P(, GpuDSparkRealisticSize, testing::ValuesIn(realistic_shapes()),
                         [](const testing::TestParamInfo<RealisticShape>& info) {
                           const RealisticShape& s = info.param;
                           return "blocks" + std::to_string(s.blocks) + "_ranks" + std::to_string(s.ranks) + "_T" +
                                  std::to_string((int)std::lround(s.temperature * 10));
                         });

// One chain captured in a CUDA graph on the plans' stream and replayed after new logits,
// hidden rows and anchors are written into the same device buffers: each replay is bitwise a
// plain run of its inputs and matches the CPU backend's result for them (the run allocates and
// synchronises nothing), with each product (a Q6_K W2, BF16 on the device).
TEST(GpuDSpark, GraphCaptureReplaysNewInputs) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int S : {1, 3}) {
    DSparkCase c;
    c.V = 20000;
    c.R = 256;  // K-quant rows are whole 256-element blocks
    c.E = 64;
    c.N = 6;
    c.blocks = 3;
    c.d2t = S == 1;
    c.V_target = c.d2t ? 25000 : c.V;
    c.w1_t = DFSEL_TYPE_BF16;
    c.w2_t = DFSEL_TYPE_Q6_K;
    c.scale_rows = 1;
    DSparkRunOpts r;
    if (S > 1) r.bounds = random_bounds(c.V, S, 100, rng);
    r.temperature = S == 1 ? 0.0f : 0.9f;
    r.p_min = 0.35f;
    r.seed = rng();
    const uint64_t data_seed = rng();
    DSparkData d = make_dspark_data(c, data_seed);
    SCOPED_TRACE(describe(c, data_seed, r));
    for (bool mma : products(c)) {
      const Product p(mma);
      SCOPED_TRACE(p.str());
      DSparkCudaSession session(c, d, r);  // one stream for every rank
      ASSERT_TRUE(session.ok()) << session.error;
      cudaStream_t st = session.streams[0];
      cudaGraph_t graph = nullptr;
      CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      const dfsel_status enq = session.enqueue();
      CUDA_OK(cudaStreamEndCapture(st, &graph));
      ASSERT_EQ(enq, DFSEL_SUCCESS) << session.error;
      cudaGraphExec_t exec = nullptr;
      CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
      for (int replay = 0; replay < 4; ++replay) {
        SCOPED_TRACE("replay " + std::to_string(replay));
        DSparkData next = make_dspark_data(c, rng());  // new inputs; the uploaded weights stay
        next.w1 = d.w1;
        next.w2 = d.w2;
        next.w2_f = d.w2_f;
        next.w1_f = d.w1_f;
        next.conf_w = d.conf_w;
        next.conf_f = d.conf_f;
        next.scale = d.scale;
        next.d2t = d.d2t;
        session.upload_inputs(next);
        session.poison_outputs();
        ASSERT_TRUE(session.ok()) << session.error;
        CUDA_OK(cudaGraphLaunch(exec, st));
        ASSERT_EQ(session.wait(), DFSEL_SUCCESS) << session.error;
        const DSparkResult gpu = session.download();
        ASSERT_EQ(gpu.status, DFSEL_SUCCESS) << gpu.error;
        EXPECT_EQ(dspark_bitwise_diff(gpu, run_dspark_cuda(c, next, r)), "") << "against a plain run";
        expect_result_matches_cpu(c, next, r, gpu, mma);
      }
      cudaGraphExecDestroy(exec);
      cudaGraphDestroy(graph);
    }
  }
}

// The same plans run twice on the same inputs give the same bits (nothing left over from the
// first run in the workspace changes the second), with an F16 W2 and a BF16 one (both products).
TEST(GpuDSpark, SecondRunBitwiseTheFirst) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type w2_t : {DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (float temperature : {0.0f, 0.6f}) {
      DSparkCase c = sized(9000, 96, 32, 7, 5);
      c.w2_t = w2_t;
      DSparkRunOpts r;
      r.bounds = random_bounds(c.V, 2, 1, rng);
      r.placement = DFSEL_CODEBOOKS_SHARDED;
      r.temperature = temperature;
      r.p_min = 0.2f;
      r.seed = rng();
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      SCOPED_TRACE(describe(c, data_seed, r));
      for (bool mma : products(c)) {
        const Product p(mma);
        SCOPED_TRACE(p.str());
        DSparkCudaSession session(c, d, r);
        DSparkResult runs[2];
        for (DSparkResult& x : runs) {
          x = session.run_once();
          ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
        }
        EXPECT_EQ(dspark_bitwise_diff(runs[1], runs[0]), "");
        expect_result_matches_cpu(c, d, r, runs[0], mma);
      }
    }
}

// A block's outputs do not depend on which other blocks share its run (the blocks are columns
// of the tensor-core product): one plan of 12 blocks run with all 12, then with the first 1, 3
// and 8 of them alone (the same anchors; logits and hidden rows a prefix of the 12 blocks'), and
// plans made for 3 and 8 blocks (and for 1 where it takes the same product), give those blocks
// the same bits. A BF16 W2 (both products),
// a confidence head with p_min, greedy and sampling, one rank and two.
TEST(GpuDSpark, BatchingChangesNoBit) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (float temperature : {0.0f, 0.8f})
    for (int S : {1, 2}) {
      DSparkCase c = sized(5003, 64, 32, 5, 12);
      c.w1_t = c.w2_t = DFSEL_TYPE_BF16;
      DSparkRunOpts r;
      if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
      r.temperature = temperature;
      r.p_min = 0.3f;
      r.seed = rng();
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      SCOPED_TRACE(describe(c, data_seed, r));
      for (bool mma : products(c)) {
        const Product p(mma);
        SCOPED_TRACE(p.str());
        DSparkCudaSession session(c, d, r);
        ASSERT_TRUE(session.ok()) << session.error;
        const DSparkResult all = session.run_once();
        ASSERT_EQ(all.status, DFSEL_SUCCESS) << all.error;
        expect_result_matches_cpu(c, d, r, all, mma);
        for (int n : {1, 3, 8}) {
          SCOPED_TRACE("the first " + std::to_string(n) + " blocks");
          const DSparkResult x = session.run_once(n);
          ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
          EXPECT_EQ(dspark_bitwise_diff(first_blocks(x, n, c.N), first_blocks(all, n, c.N)), "")
              << "the plan of 12 blocks";
        }
        // Plans for fewer blocks, each made after the plan of 12 has run its last.
        for (int n : {1, 3, 8}) {
          SCOPED_TRACE("a plan of " + std::to_string(n) + " blocks");
          const DSparkResult want = first_blocks(all, n, c.N);
          DSparkCase cn = c;
          cn.blocks = n;
          if (dspark_cuda_uses_mma(cn) != mma) continue;  // auto: a plan for one block takes the chains
          const DSparkResult x = run_dspark_cuda(cn, first_blocks(c, d, n), r);
          ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
          EXPECT_EQ(dspark_bitwise_diff(x, want), "") << "a plan of " << n << " blocks";
        }
      }
    }
}

// Two plans of one device whose pass carves differ (config.max_blocks 12 and 1), the larger made
// first and run after the smaller was made: both run (a later plan's smaller carve once lowered
// the pass kernels' shared-memory attribute under the earlier plan, whose launch then failed).
TEST(GpuDSpark, PlansOfDifferentSizesInterleave) {
  DFSEL_REQUIRE_GPUS(1);
  DSparkCase c = sized(3000, 64, 0, 4, 12);
  c.w1_t = c.w2_t = DFSEL_TYPE_BF16;
  const DSparkRunOpts r;
  const DSparkData d = make_dspark_data(c, 5);
  for (bool mma : products(c)) {
    const Product p(mma);
    SCOPED_TRACE(p.str());
    DSparkCudaSession large(c, d, r);
    ASSERT_TRUE(large.ok()) << large.error;
    DSparkCase small = c;
    small.blocks = 1;
    DSparkCudaSession one(small, first_blocks(c, d, 1), r);
    ASSERT_TRUE(one.ok()) << one.error;
    ASSERT_EQ(large.enqueue(), DFSEL_SUCCESS) << large.error;
    ASSERT_EQ(large.wait(), DFSEL_SUCCESS) << large.error;
    expect_result_matches_cpu(c, d, r, large.download(), mma);
  }
}

// An anchor outside [0, n_target_vocab) is found on the device: dfsel_dspark_plan_wait reports
// it by name and value, that block emits nothing, and the plans stay usable.
TEST(GpuDSpark, OutOfRangeAnchorIsReportedByWait) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int S : {1, 2})
    for (bool negative : {true, false}) {
      DSparkCase c;
      c.V = 4000;
      c.d2t = S == 1;
      c.V_target = c.d2t ? 4500 : c.V;
      c.N = 4;
      c.blocks = 3;
      DSparkRunOpts r;
      if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
      const uint64_t data_seed = rng();
      DSparkData d = make_dspark_data(c, data_seed);
      const int32_t value = negative ? -1 : (int32_t)c.V_target;
      d.anchors[1] = value;
      SCOPED_TRACE(describe(c, data_seed, r) + " anchors[1]=" + std::to_string(value));
      const Product chains(false);  // an F32 W2
      DSparkCudaSession session(c, d, r);
      ASSERT_TRUE(session.ok()) << session.error;
      session.poison_outputs();
      ASSERT_EQ(session.enqueue(), DFSEL_SUCCESS) << session.error;  // the device finds it
      EXPECT_EQ(session.wait(), DFSEL_INVALID_ARGUMENT);
      EXPECT_NE(session.error.find("inputs.anchors[1] = " + std::to_string(value)), std::string::npos) << session.error;
      session.status = DFSEL_SUCCESS;  // read what the run wrote
      const DSparkResult x = session.download();
      ASSERT_EQ(x.n_emitted.size(), (size_t)c.blocks);
      EXPECT_EQ(x.n_emitted[1], 0);
      for (int k = 0; k < c.N; ++k) EXPECT_EQ(x.tokens[(size_t)c.N + k], -1) << "tokens[1][" << k << "]";
      // The same plans with a valid anchor run, bitwise the CPU backend.
      d.anchors[1] = (int32_t)(c.V_target - 1);
      session.upload_inputs(d);
      const DSparkResult y = session.run_once();
      ASSERT_EQ(y.status, DFSEL_SUCCESS) << y.error;
      expect_result_matches_cpu(c, d, r, y, false);
    }
}

// A d2t entry changed after plan creation to an id outside W1: the device checks the winner's
// target id before it reads that W1 row, and dfsel_dspark_plan_wait reports it as the CPU
// backend's run does (the same status and message), on every rank; the plans stay usable.
TEST(GpuDSpark, D2tChangedAfterCreationIsReportedByWait) {
  DFSEL_REQUIRE_GPUS(1);
  for (int S : {1, 2}) {
    DSparkCase c;
    c.V = 500;
    c.V_target = 800;
    c.d2t = true;
    c.N = 4;
    c.blocks = 3;
    DSparkRunOpts r;
    if (S > 1) r.bounds = {0, 200, c.V};
    DSparkData d = make_dspark_data(c, 77);
    const Product chains(false);  // an F32 W2
    DSparkCudaSession session(c, d, r);
    ASSERT_TRUE(session.ok()) << session.error;
    const DSparkResult first = session.run_once();
    ASSERT_EQ(first.status, DFSEL_SUCCESS) << first.error;
    const int32_t id = first.draft_ids[1];  // block 0, step 2
    ASSERT_GE(id, 0);
    d.d2t[(size_t)id] = 1 << 30;
    const DSparkResult cpu = run_dspark(c, d, r);
    ASSERT_EQ(cpu.status, DFSEL_INVALID_ARGUMENT) << cpu.error;
    session.upload_inputs(d);
    ASSERT_EQ(session.enqueue(), DFSEL_SUCCESS) << session.error;  // the device finds it
    EXPECT_EQ(session.wait(), DFSEL_INVALID_ARGUMENT) << S << " ranks";
    EXPECT_NE(session.error.find("d2t maps draft id " + std::to_string(id)), std::string::npos) << session.error;
    EXPECT_NE(session.error.find("to 1073741824, outside [0, config.n_target_vocab = 800)"), std::string::npos)
        << session.error;
    session.status = DFSEL_SUCCESS;
    d.d2t[(size_t)id] = 5;
    session.upload_inputs(d);
    const DSparkResult again = session.run_once();
    ASSERT_EQ(again.status, DFSEL_SUCCESS) << again.error;
    expect_result_matches_cpu(c, d, r, again, false);
  }
}

// Sampling at temperatures where l / T overflows float: the key of
// kernels/common/dspark_math.cuh keeps the device bitwise the CPU backend with the chains (the
// greedy limit), and the tensor-core product within the oracle's tolerance (log_norm +-inf
// where m / T lies beyond float's range); an F32 W2 and a BF16 one.
TEST(GpuDSpark, ExtremeTemperaturesMatchTheCpu) {
  DFSEL_REQUIRE_GPUS(1);
  for (dfsel_type w2_t : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16})
    for (float t : {1e-38f, 1.4e-45f, 3e38f}) {
      DSparkCase c = sized(700, 32, 16, 4, 3);
      c.w2_t = w2_t;
      DSparkRunOpts r;
      r.temperature = t;
      r.seed = 3;
      expect_matches_cpu(c, 88, r);
      r.bounds = {0, 300, c.V};
      expect_matches_cpu(c, 89, r);
    }
}

// d2t lives on the device for a CUDA plan: an id outside the target vocabulary is still refused
// at plan creation, naming the entry and its value, as the CPU backend refuses it.
TEST(GpuDSpark, OutOfRangeD2tIsRefusedAtCreation) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  DSparkCase c;
  c.V = 500;
  c.V_target = 800;
  c.d2t = true;
  DSparkData d = make_dspark_data(c, seed);
  d.d2t[17] = 800;
  const DSparkResult gpu = run_dspark_cuda(c, d, DSparkRunOpts{});
  EXPECT_EQ(gpu.status, DFSEL_INVALID_ARGUMENT) << gpu.error;
  EXPECT_NE(gpu.error.find("d2t[17] = 800"), std::string::npos) << gpu.error;
  const DSparkResult cpu = run_dspark(c, d, DSparkRunOpts{});
  EXPECT_EQ(cpu.status, DFSEL_INVALID_ARGUMENT) << cpu.error;
  EXPECT_NE(cpu.error.find("d2t[17] = 800"), std::string::npos) << cpu.error;
}

// DFSEL_DSPARK_TILE, the chain pass's tile to measure: a malformed value and one too large for
// the device's shared memory are refused at plan creation with the value named (with the
// chains); a valid one gives the same bits as the default tile with each product.
TEST(GpuDSpark, TileOverrideIsCheckedAndChangesNoBit) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  DSparkCase c = sized(7000, 256, 0, 4, 3);
  c.w2_t = DFSEL_TYPE_BF16;
  DSparkRunOpts r;
  r.temperature = 0.8f;
  r.seed = rng();
  const uint64_t data_seed = rng();
  const DSparkData d = make_dspark_data(c, data_seed);
  SCOPED_TRACE(describe(c, data_seed, r));
  struct Case {
    const char* value;
    dfsel_status status;
    const char* needle;
  } cases[] = {{"100x2", DFSEL_INVALID_ARGUMENT, "DFSEL_DSPARK_TILE = \"100x2\""},
               {"64x4", DFSEL_INVALID_ARGUMENT, "stages 2 or 3"},
               {"64x2junk", DFSEL_INVALID_ARGUMENT, "ROWSxSTAGES"},
               {"4294967360x2", DFSEL_INVALID_ARGUMENT, "ROWSxSTAGES"},  // 64 once wrapped to an int
               {"192x3", DFSEL_UNSUPPORTED, "DFSEL_DSPARK_TILE = 192x3 does not fit"},
               {"32x3", DFSEL_SUCCESS, ""}};
  for (bool mma : products(c)) {
    const Product p(mma);
    SCOPED_TRACE(p.str());
    const DSparkResult base = run_dspark_cuda(c, d, r);
    ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
    for (const Case& t : cases) {
      if (mma && t.status != DFSEL_SUCCESS) continue;  // refusals of the chain pass's tiles
      SCOPED_TRACE(std::string("DFSEL_DSPARK_TILE=") + t.value);
      const ScopedEnv env("DFSEL_DSPARK_TILE", t.value);
      const DSparkResult x = run_dspark_cuda(c, d, r);
      EXPECT_EQ(x.status, t.status) << x.error;
      if (t.status != DFSEL_SUCCESS) EXPECT_NE(x.error.find(t.needle), std::string::npos) << x.error;
      else EXPECT_EQ(dspark_bitwise_diff(x, base), "");
    }
  }
}

// DFSEL_DSPARK_PRODUCT, read at CUDA plan creation: a value other than "", auto, chains, mma or
// mma-steps is refused, naming the variable and the value, whatever W2 is (a CPU plan does not
// read it); mma and mma-steps are refused where the tensor cores cannot take W2 (F32, F16 or
// Q8_0, or R not a multiple of 32 up to 256), which auto and "" run with the chains, bitwise the
// CPU backend; where they can, mma, auto and "" give the same bits (one block too: auto takes
// the tensor cores at every batch).
TEST(GpuDSpark, ProductSwitchIsCheckedAtCreation) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const struct {
    dfsel_type w2_t;
    int R, blocks;
    bool supported, mma;  // mma may be asked; auto takes it
  } cases[] = {{DFSEL_TYPE_BF16, 64, 3, true, true},   {DFSEL_TYPE_Q4_K, 256, 3, true, true},
               {DFSEL_TYPE_BF16, 64, 1, true, true},  {DFSEL_TYPE_F32, 64, 3, false, false},
               {DFSEL_TYPE_F16, 64, 3, false, false},  {DFSEL_TYPE_Q8_0, 64, 3, false, false},
               {DFSEL_TYPE_BF16, 48, 3, false, false}, {DFSEL_TYPE_BF16, 288, 3, false, false}};
  for (const auto& k : cases) {
    DSparkCase c = sized(3000, k.R, 16, 4, k.blocks);
    c.w2_t = k.w2_t;
    DSparkRunOpts r;
    r.bounds = random_bounds(c.V, 2, 1, rng);
    r.temperature = 0.7f;
    r.p_min = 0.3f;
    r.seed = rng();
    const uint64_t data_seed = rng();
    const DSparkData d = make_dspark_data(c, data_seed);
    SCOPED_TRACE(describe(c, data_seed, r));
    for (const char* bad : {"tensor", "chains2", "mma "}) {
      SCOPED_TRACE(std::string("DFSEL_DSPARK_PRODUCT=") + bad);
      const ScopedEnv env("DFSEL_DSPARK_PRODUCT", bad);
      const DSparkResult x = run_dspark_cuda(c, d, r);
      EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT) << x.error;
      EXPECT_NE(x.error.find("DFSEL_DSPARK_PRODUCT"), std::string::npos) << x.error;
      EXPECT_NE(x.error.find(bad), std::string::npos) << x.error;
      const DSparkResult cpu = run_dspark(c, d, r);
      EXPECT_EQ(cpu.status, DFSEL_SUCCESS) << "a CPU plan: " << cpu.error;
    }
    DSparkResult mma;
    {
      const ScopedEnv env("DFSEL_DSPARK_PRODUCT", "mma");
      mma = run_dspark_cuda(c, d, r);
    }
    if (!k.supported) {
      EXPECT_EQ(mma.status, DFSEL_UNSUPPORTED) << "DFSEL_DSPARK_PRODUCT=mma: " << mma.error;
      EXPECT_NE(mma.error.find("DFSEL_DSPARK_PRODUCT = mma needs desc.w2 stored as BF16 (it is "), std::string::npos)
          << mma.error;
      EXPECT_NE(mma.error.find("config.markov_rank a multiple of 32 up to 256 (it is " + std::to_string(c.R) + ")"),
                std::string::npos)
          << mma.error;
      const ScopedEnv env("DFSEL_DSPARK_PRODUCT", "mma-steps");
      const DSparkResult steps = run_dspark_cuda(c, d, r);
      EXPECT_EQ(steps.status, DFSEL_UNSUPPORTED) << "DFSEL_DSPARK_PRODUCT=mma-steps: " << steps.error;
      EXPECT_NE(steps.error.find("DFSEL_DSPARK_PRODUCT = mma-steps needs desc.w2 stored as BF16"), std::string::npos)
          << steps.error;
    } else {
      ASSERT_EQ(mma.status, DFSEL_SUCCESS) << "DFSEL_DSPARK_PRODUCT=mma: " << mma.error;
      EXPECT_EQ(compare_dspark_with_oracle(c, d, r, mma, kMmaTol), "") << "DFSEL_DSPARK_PRODUCT=mma against the oracle";
    }
    for (const char* same : {"auto", ""}) {
      SCOPED_TRACE(std::string("DFSEL_DSPARK_PRODUCT=\"") + same + "\"");
      const ScopedEnv env("DFSEL_DSPARK_PRODUCT", same);
      EXPECT_EQ(dspark_cuda_uses_mma(c), k.mma) << "the tests' rule";
      const DSparkResult x = run_dspark_cuda(c, d, r);
      ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
      if (k.mma) EXPECT_EQ(dspark_bitwise_diff(x, mma), "") << "against DFSEL_DSPARK_PRODUCT=mma";
      else EXPECT_EQ(dspark_bitwise_diff(x, cpu_result(c, d, r)), "") << "against the CPU backend";
    }
  }
}

// The plan's tensor-core chain (DFSEL_DSPARK_PRODUCT=mma: the one launch on one rank) into *one:
// it runs, bitwise the pass a launch a step (mma-steps), and within kMmaTol of the oracle.
void expect_one_launch_is_the_pass(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                                   DSparkResult* one) {
  DSparkResult steps;
  {
    const ScopedEnv env("DFSEL_DSPARK_PRODUCT", "mma");
    *one = run_dspark_cuda(c, d, r);
  }
  {
    const ScopedEnv env("DFSEL_DSPARK_PRODUCT", "mma-steps");
    steps = run_dspark_cuda(c, d, r);
  }
  ASSERT_EQ(one->status, DFSEL_SUCCESS) << one->error;
  ASSERT_EQ(steps.status, DFSEL_SUCCESS) << steps.error;
  EXPECT_EQ(dspark_bitwise_diff(*one, steps), "") << "one launch against a launch a step";
  EXPECT_EQ(compare_dspark_with_oracle(c, d, r, *one, kMmaTol), "") << "one launch against the oracle";
}

// On one rank the tensor-core chain runs as one launch (DFSEL_DSPARK_PRODUCT unset or mma), and
// with mma-steps a launch a step, as on several ranks: the same bits, for both W1 kinds (one
// BF16 term of e, or three), one group of 8 blocks and several (up to 21 blocks),
// greedy and sampling, a confidence head with p_min, d2t, one scale and one a row, a softcap,
// both layouts, sharded W1, and shards whose rows are not a whole number of slices; and every
// build of the one launch (DFSEL_DSPARK_LAUNCH) gives the same bits.
TEST(GpuDSpark, OneLaunchIsBitwiseTheStepLaunches) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Shape {
    int64_t V;
    int R, N, blocks;
    dfsel_type w1_t;
  };
  const Shape shapes[] = {{4099, 64, 5, 1, DFSEL_TYPE_BF16},  {2053, 96, 3, 5, DFSEL_TYPE_F32},
                          {6007, 256, 4, 12, DFSEL_TYPE_BF16}, {3001, 32, 6, 21, DFSEL_TYPE_F16},
                          {1031, 128, 7, 9, DFSEL_TYPE_Q8_0}};
  int cases = 0;
  for (const Shape& sh : shapes)
    for (float temperature : {0.0f, 0.9f}) {
      DSparkCase c = sized(sh.V, sh.R, 40, sh.N, sh.blocks);
      c.w1_t = sh.w1_t;
      c.w2_t = (cases % 3 == 2) ? DFSEL_TYPE_Q4_K : DFSEL_TYPE_BF16;
      if (c.w2_t == DFSEL_TYPE_Q4_K) c.R = 256;
      c.from_anchor = cases % 2 == 0;
      c.scale_rows = cases % 3;
      c.softcap = cases % 4 == 1 ? 30.0f : 0.0f;
      DSparkRunOpts r;
      if (cases % 4 == 3) {
        c.d2t = true;
        c.V_target = c.V + 517;
      } else if (cases % 5 == 4) {
        r.placement = DFSEL_CODEBOOKS_SHARDED;
      }
      ++cases;
      r.temperature = temperature;
      r.p_min = 0.2f;
      r.seed = rng();
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      SCOPED_TRACE(describe(c, data_seed, r));
      ASSERT_TRUE(dspark_cuda_uses_mma(c));
      DSparkResult one;
      ASSERT_NO_FATAL_FAILURE(expect_one_launch_is_the_pass(c, d, r, &one));
      // The other builds of the one launch (groups of 8 only or of 16 only, the next slice
      // staged or loaded at its start), and a name that is none.
      for (const char* build : {"8x2n/16x2n", "8x2n/8x2n", "8x2s/8x2s", "16x2n", "16x1s12", "8x2n/16x1s12", "16x1s16",
                                 "8x2n/16x1s16"}) {
        SCOPED_TRACE(std::string("DFSEL_DSPARK_LAUNCH=") + build);
        const ScopedEnv env("DFSEL_DSPARK_LAUNCH", build);
        const DSparkResult x = run_dspark_cuda(c, d, r);
        ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
        EXPECT_EQ(dspark_bitwise_diff(x, one), "");
      }
      const ScopedEnv env("DFSEL_DSPARK_LAUNCH", "8x3n");
      const DSparkResult bad = run_dspark_cuda(c, d, r);
      EXPECT_EQ(bad.status, DFSEL_INVALID_ARGUMENT) << bad.error;
      EXPECT_NE(bad.error.find("DFSEL_DSPARK_LAUNCH = \"8x3n\" must be NARROW or NARROW/WIDE"), std::string::npos)
          << bad.error;
    }
}

// DFSEL_DSPARK_L2, read at CUDA plan creation: which of W2's slices the one launch's loads ask
// the L2 to keep changes where the bytes come from, never a bit: the default is within kMmaTol
// of the double-precision oracle on fresh random drafts, and "off", shares of 0 to 100% and
// auto give the same outputs, on one rank (the whole chain in one launch) and on three (a
// launch a step, shards aligned to 4 rows), greedy and sampling; a value that is none of them
// is refused, naming the variable and the value.
TEST(GpuDSpark, L2PolicyIsCheckedAndChangesNoBit) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int S : {1, 3})
    for (float temperature : {0.0f, 0.9f}) {
      DSparkCase c = sized(9001, 128, 0, 5, 11);
      c.w2_t = DFSEL_TYPE_BF16;
      DSparkRunOpts r;
      if (S > 1) r.bounds = aligned_bounds(c.V, S, 4, 1, rng);
      r.temperature = temperature;
      r.seed = rng();
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      SCOPED_TRACE(describe(c, data_seed, r));
      ASSERT_TRUE(dspark_cuda_uses_mma(c));
      const DSparkResult base = run_dspark_cuda(c, d, r);
      ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
      EXPECT_EQ(compare_dspark_with_oracle(c, d, r, base, kMmaTol), "") << "the default against the oracle";
      for (const char* v : {"off", "0", "37", "100", "auto"}) {
        SCOPED_TRACE(std::string("DFSEL_DSPARK_L2=") + v);
        const ScopedEnv env("DFSEL_DSPARK_L2", v);
        const DSparkResult x = run_dspark_cuda(c, d, r);
        ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
        EXPECT_EQ(dspark_bitwise_diff(x, base), "");
      }
      for (const char* bad : {"half", "101", "-1", "40z", "4294967336"}) {  // the last: 40 once wrapped
        SCOPED_TRACE(std::string("DFSEL_DSPARK_L2=") + bad);
        const ScopedEnv env("DFSEL_DSPARK_L2", bad);
        const DSparkResult x = run_dspark_cuda(c, d, r);
        EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT) << x.error;
        EXPECT_NE(x.error.find(std::string("DFSEL_DSPARK_L2 = \"") + bad + "\" must be auto, off or a percentage"),
                  std::string::npos)
            << x.error;
      }
    }
}

// A plan of many blocks (config.max_blocks 64, R 256) is more than the staged default builds'
// shared memory holds: the one launch takes their fallbacks and runs (e in one term: the wide
// default's first fallback, 16x1s12; in three: past it to 16x2n), the same bits as a launch a
// step, one group of 8 and several of 16, greedy and sampling.
TEST(GpuDSpark, OneLaunchOfManyBlocksTakesTheFallbackBuilds) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type w1_t : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16})
    for (int blocks : {3, 40})
      for (float temperature : {0.0f, 0.7f}) {
        DSparkCase c = sized(2053, 256, 0, 3, blocks);
        c.max_blocks = 64;
        c.w1_t = w1_t;
        c.w2_t = DFSEL_TYPE_BF16;
        DSparkRunOpts r;
        r.temperature = temperature;
        r.seed = rng();
        const uint64_t data_seed = rng();
        const DSparkData d = make_dspark_data(c, data_seed);
        SCOPED_TRACE(describe(c, data_seed, r));
        DSparkResult one;
        ASSERT_NO_FATAL_FAILURE(expect_one_launch_is_the_pass(c, d, r, &one));
        // Named, a staged narrow build that does not fit (e in three terms) is refused rather
        // than replaced.
        if (w1_t != DFSEL_TYPE_F32) continue;
        const ScopedEnv env("DFSEL_DSPARK_LAUNCH", "8x2s/16x1s12");
        const DSparkResult named = run_dspark_cuda(c, d, r);
        EXPECT_EQ(named.status, DFSEL_UNSUPPORTED) << named.error;
        EXPECT_NE(named.error.find("DFSEL_DSPARK_LAUNCH = \"8x2s/16x1s12\": that build"), std::string::npos)
            << named.error;
      }
}

// A caller-owned workspace (dfsel_dspark_workspace_size bytes of a CUDA description, 256-byte
// aligned, poisoned first, each rank its own part of one buffer) gives the bits of the plan's
// own workspace, which match the CPU backend; an F32 W2 and a BF16 one (both products).
TEST(GpuDSpark, CallerWorkspace) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type w2_t : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16})
    for (int S : {1, 3}) {
      DSparkCase c = sized(12000, 64, 24, 5, 4);
      c.w1_t = DFSEL_TYPE_F16;
      c.w2_t = w2_t;
      DSparkRunOpts r;
      if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
      r.placement = S > 1 ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
      r.temperature = 0.7f;
      r.p_min = 0.3f;
      r.seed = rng();
      const uint64_t data_seed = rng();
      const DSparkData d = make_dspark_data(c, data_seed);
      SCOPED_TRACE(describe(c, data_seed, r));
      DSparkCudaOpts o;
      o.caller_workspace = true;
      o.workspace_offset = 256;  // not the allocation's own start
      for (bool mma : products(c)) {
        const Product p(mma);
        SCOPED_TRACE(p.str());
        const DSparkResult own = run_dspark_cuda(c, d, r), caller = run_dspark_cuda(c, d, r, o);
        ASSERT_EQ(own.status, DFSEL_SUCCESS) << own.error;
        ASSERT_EQ(caller.status, DFSEL_SUCCESS) << caller.error;
        EXPECT_EQ(dspark_bitwise_diff(caller, own), "");
        expect_result_matches_cpu(c, d, r, caller, mma);
      }
    }
}

// Two unrelated plans enqueued one after the other on one stream, then waited for: each gives
// its own problem's result (a's F32 W2 with the chains; b's BF16 one with each product).
TEST(GpuDSpark, TwoPlansOnOneStream) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t st = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  DSparkCase a, b;
  a.V = a.V_target = 3000;
  a.N = 6;
  a.blocks = 2;
  b.V = b.V_target = 7000;
  b.R = 48;
  b.E = 16;
  b.N = 3;
  b.blocks = 5;
  b.from_anchor = false;
  b.w2_t = DFSEL_TYPE_BF16;
  DSparkRunOpts ra, rb;
  ra.temperature = 0.5f;
  ra.seed = rng();
  rb.p_min = 0.25f;
  const uint64_t sa = rng(), sb = rng();
  const DSparkData da = make_dspark_data(a, sa), db = make_dspark_data(b, sb);
  SCOPED_TRACE("a: " + describe(a, sa, ra) + "; b: " + describe(b, sb, rb));
  DSparkCudaOpts o;
  o.stream = st;
  for (bool mma : products(b)) {
    const Product p(mma);
    SCOPED_TRACE(p.str());
    DSparkCudaSession x(a, da, ra, o), y(b, db, rb, o);
    ASSERT_TRUE(x.ok()) << x.error;
    ASSERT_TRUE(y.ok()) << y.error;
    x.poison_outputs();
    y.poison_outputs();
    ASSERT_EQ(x.enqueue(), DFSEL_SUCCESS) << x.error;
    ASSERT_EQ(y.enqueue(), DFSEL_SUCCESS) << y.error;
    ASSERT_EQ(x.wait(), DFSEL_SUCCESS) << x.error;
    ASSERT_EQ(y.wait(), DFSEL_SUCCESS) << y.error;
    EXPECT_EQ(dspark_bitwise_diff(x.download(), cpu_result(a, da, ra)), "") << "plan a";
    {
      SCOPED_TRACE("plan b");
      expect_result_matches_cpu(b, db, rb, y.download(), mma);
    }
  }
  cudaStreamDestroy(st);
}

// Small and quick, for compute-sanitizer's four tools (scripts/gpu-check.sh): one and
// three ranks, both placements, both layouts, d2t, a K-quant W2, a confidence head with p_min,
// greedy and sampling, both products (a BF16 W2 of R 20 takes the chains alone), and one bad
// anchor found on the device.
TEST(GpuDSpark, SmallShapesForSanitizers) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int S : {1, 3})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      for (int blocks : {2, 11}) {  // one rank, 11 blocks: the one launch's groups of 16
        if (S > 1 && blocks > 2) continue;
        DSparkCase c;
        c.V = 517;
        c.R = S == 1 ? 256 : pl == DFSEL_CODEBOOKS_REPLICATED ? 20 : 32;
        c.E = 12;
        c.N = 3;
        c.blocks = blocks;
        c.from_anchor = pl == DFSEL_CODEBOOKS_REPLICATED;
        c.d2t = S == 1 && pl == DFSEL_CODEBOOKS_REPLICATED;
        c.V_target = c.d2t ? 600 : c.V;
        c.w2_t = S == 1 ? DFSEL_TYPE_Q4_K : DFSEL_TYPE_BF16;
        c.logits_t = S == 1 ? DFSEL_TYPE_F32 : DFSEL_TYPE_F16;
        c.scale_rows = S == 1 ? 2 : 1;
        c.logits_pad = 3;
        DSparkRunOpts r;
        // Sharded: shards at multiples of 4 rows, the one-launch chain's kernel a step.
        if (S > 1)
          r.bounds = pl == DFSEL_CODEBOOKS_SHARDED ? aligned_bounds(c.V, S, 4, 1, rng) : random_bounds(c.V, S, 1, rng);
        r.placement = pl;
        r.temperature = pl == DFSEL_CODEBOOKS_SHARDED ? 0.9f : 0.0f;
        r.p_min = 0.3f;
        r.seed = rng();
        expect_matches_cpu(c, rng(), r);
      }
  DSparkCase c;
  c.V = 300;
  c.blocks = 2;
  DSparkData d = make_dspark_data(c, rng());
  d.anchors[0] = (int32_t)c.V;
  DSparkCudaSession session(c, d, DSparkRunOpts{});
  const DSparkResult x = session.run_once();
  EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT) << x.error;
}

}  // namespace
}  // namespace dfsel::test
