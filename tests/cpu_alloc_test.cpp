// A run allocates nothing once its plans are set up (SPEC section 6.2; the CPU fallback's
// contract, DFlash2 and DSpark plans alike): every heap allocation of this test binary is counted while runs are enqueued.
// The replacement operators below (every unaligned form, malloc and free underneath, so that
// sanitizer builds still see matched pairs) are this binary's only allocator hooks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

#include "support/dspark_problem.h"
#include "support/problem.h"

namespace {
std::atomic<long> g_allocations{0};
std::atomic<bool> g_counting{false};

// Out of line, so that a debugger can stop on an allocation made while counting.
__attribute__((noinline)) void allocation_while_counting() {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  asm volatile("" ::: "memory");
}

void* counted(std::size_t n) {
  if (g_counting.load(std::memory_order_relaxed)) allocation_while_counting();
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
}  // namespace

void* operator new(std::size_t n) { return counted(n); }
void* operator new[](std::size_t n) { return counted(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }

namespace dfsel::test {
namespace {

TEST(CpuAllocation, RunsAllocateNothingAfterTheFirst) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Case c;
  c.V = 5000;
  c.E = 256;
  for (int S : {1, 3})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED}) {
      SCOPED_TRACE("S=" + std::to_string(S) + " placement=" + std::to_string(pl));
      const Data d = make_data(c, rng());
      RunOpts r;
      r.placement = pl;
      r.temperature = S == 3 ? 0.8f : 0.0f;
      if (S > 1) r.bounds = random_bounds(c.V, S, c.K, rng);
      Session s(c, d, r);
      Result res;
      ASSERT_EQ(s.create(&res), DFSEL_SUCCESS) << res.error;
      ASSERT_EQ(s.run(), DFSEL_SUCCESS);  // the first run of a group may size its scratch
      g_allocations = 0;
      g_counting = true;
      dfsel_status st = DFSEL_SUCCESS;
      for (int i = 0; i < 3 && st == DFSEL_SUCCESS; ++i) st = s.enqueue();
      g_counting = false;
      ASSERT_EQ(st, DFSEL_SUCCESS);
      EXPECT_EQ(g_allocations.load(), 0) << "heap allocations in three runs";
    }
}

// The same for DSpark chains: one rank and three, greedy and sampling.
TEST(CpuAllocation, DSparkRunsAllocateNothingAfterTheFirst) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  DSparkCase c;
  c.V = c.V_target = 3000;
  c.E = 16;
  c.R = 32;
  const DSparkData d = make_dspark_data(c, rng());
  for (int S : {1, 3}) {
    SCOPED_TRACE("S=" + std::to_string(S));
    DSparkRunOpts r;
    r.temperature = S == 3 ? 0.8f : 0.0f;
    if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
    std::vector<dfsel_dspark_plan*> plans(S, nullptr);
    std::vector<dfsel_dspark_inputs> in(S);
    std::vector<dfsel_dspark_outputs> out(S);
    std::vector<std::vector<int32_t>> tokens(S, std::vector<int32_t>((size_t)c.blocks * c.N));
    std::vector<std::vector<int32_t>> n_emitted(S, std::vector<int32_t>(c.blocks));
    for (int s = 0; s < S; ++s) {
      const dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, s);
      ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plans[s], nullptr, 0), DFSEL_SUCCESS);
      in[s] = dspark_inputs(c, d, r, s);
      out[s] = dfsel_dspark_outputs{c.blocks, tokens[s].data(), n_emitted[s].data(), nullptr, nullptr, nullptr, nullptr,
                                    nullptr};
    }
    auto run = [&] { return dfsel_dspark_run_group(S, plans.data(), in.data(), out.data(), nullptr); };
    ASSERT_EQ(run(), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plans[0]);  // sizes the group's scratch
    g_allocations = 0;
    g_counting = true;
    dfsel_status st = DFSEL_SUCCESS;
    for (int i = 0; i < 3 && st == DFSEL_SUCCESS; ++i) st = run();
    g_counting = false;
    EXPECT_EQ(st, DFSEL_SUCCESS);
    EXPECT_EQ(g_allocations.load(), 0) << "heap allocations in three runs";
    for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
  }
}

}  // namespace
}  // namespace dfsel::test
