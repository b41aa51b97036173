// Special values on the CUDA backend against the CPU reference (docs/DESIGN-NOTES.md,
// Numerics): the hand-built problems of the Numerics suite (tests/support/special_problems.h)
// compared as GpuSelector.SpecialValues compares: candidates exactly, unary and scores to
// float rounding with every inf and NaN exactly where the CPU has it, paths exactly outside
// near-ties. run_case fills every output with 0xff bytes before the run, so an element the
// GPU leaves unwritten reads as NaN or -1 and fails the comparison.
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "support/compare.h"
#include "support/gpu.cuh"
#include "support/problem.h"
#include "support/special_problems.h"

namespace dfsel::test {
namespace {

constexpr double kTol = 1e-4;  // as GpuSelector

std::string opts_str(const RunOpts& o) {
  return "S=" + std::to_string(o.bounds.empty() ? 1 : o.bounds.size() - 1) + " placement=" +
         std::to_string(o.placement) + " T=" + std::to_string(o.temperature) + " p_min=" + std::to_string(o.p_min);
}

void expect_gpu_matches_cpu(const SpecialProblem& p, const RunOpts& gpu_opts) {
  SCOPED_TRACE(p.str() + " " + opts_str(gpu_opts));
  RunOpts cpu_opts;
  cpu_opts.temperature = gpu_opts.temperature;
  cpu_opts.p_min = gpu_opts.p_min;
  cpu_opts.seed = gpu_opts.seed;
  const Result cpu = run_case(p.c, p.d, cpu_opts);
  ASSERT_EQ(cpu.status, DFSEL_SUCCESS) << cpu.error;
  RunOpts g = gpu_opts;
  g.backend = DFSEL_BACKEND_CUDA;
  const Result gpu = run_case(p.c, p.d, g);
  ASSERT_EQ(gpu.status, DFSEL_SUCCESS) << gpu.error;
  EXPECT_EQ(first_diff(gpu.cand_ids, cpu.cand_ids), -1);
  const std::string why = g.temperature > 0 ? compare_sampled(p.c, cpu, gpu, g.p_min, g.seed, kTol)
                                            : compare_greedy(p.c, cpu, gpu, g.p_min, kTol);
  EXPECT_EQ(why, "");
  for (size_t x = 0; x < cpu.unary.size(); ++x)
    ASSERT_EQ(std::isnan(gpu.unary[x]), std::isnan(cpu.unary[x])) << "unary " << x;
  for (size_t x = 0; x < cpu.scores.size(); ++x)
    ASSERT_EQ(std::isnan(gpu.scores[x]), std::isnan(cpu.scores[x])) << "score " << x;
  // No NaN that no NaN input explains; q never NaN; packed rows hold the ids and the scores.
  EXPECT_EQ(unexplained_nan(p, gpu), "");
}

TEST(GpuNumerics, SpecialProblemsMatchCpu) {
  DFSEL_REQUIRE_GPUS(1);
  for (const auto& make : special_problems(Size::kNarrow)) {
    const SpecialProblem p = make();
    expect_gpu_matches_cpu(p, RunOpts{});
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
      RunOpts o;
      o.bounds = even_bounds(p.c.V, 3);
      o.placement = pl;
      expect_gpu_matches_cpu(p, o);
    }
  }
}

TEST(GpuNumerics, WideAndTallRowsMatchCpu) {
  DFSEL_REQUIRE_GPUS(1);
  // Wide: every row split over several CTAs, merged by the last. Tall: a CTA folds several
  // tiles and meets the specials in its last one, against a warm list.
  for (Size size : {Size::kWide, Size::kTall})
    for (const auto& make : special_problems(size)) {
      const SpecialProblem p = make();
      expect_gpu_matches_cpu(p, RunOpts{});
      if (size == Size::kWide) {
        RunOpts o;
        o.bounds = even_bounds(p.c.V, 3);
        o.placement = DFSEL_CODEBOOKS_SHARDED;
        expect_gpu_matches_cpu(p, o);
      }
    }
}

TEST(GpuNumerics, SamplingAndPMinMatchCpu) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (const auto& make : special_problems(Size::kNarrow)) {
    const SpecialProblem p = make();
    RunOpts o;
    o.temperature = 0.7f;
    o.seed = seed;
    expect_gpu_matches_cpu(p, o);
    o.temperature = 0.0f;
    o.p_min = 0.3f;
    expect_gpu_matches_cpu(p, o);
  }
}

TEST(GpuNumerics, ShardCountsGiveBitwiseTheSameResult) {
  DFSEL_REQUIRE_GPUS(1);
  for (Size size : {Size::kNarrow, Size::kWide})
    for (const auto& make : special_problems(size)) {
      const SpecialProblem p = make();
      SCOPED_TRACE(p.str());
      RunOpts one;
      one.backend = DFSEL_BACKEND_CUDA;
      const Result base = run_case(p.c, p.d, one);
      ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
      for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
        RunOpts r = one;
        r.bounds = even_bounds(p.c.V, 3);
        r.placement = pl;
        const Result x = run_case(p.c, p.d, r);
        ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
        EXPECT_EQ(bitwise_diff(x, base), "") << "placement " << pl;
      }
    }
}

}  // namespace
}  // namespace dfsel::test
