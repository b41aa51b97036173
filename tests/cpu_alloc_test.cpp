// A run allocates nothing once its plans are set up (DESIGN section 3; the CPU fallback's
// contract): every heap allocation of this test binary is counted while runs are enqueued.
// The replacement operators below (every unaligned form, malloc and free underneath, so that
// sanitizer builds still see matched pairs) are this binary's only allocator hooks.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>

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
  std::mt19937_64 rng(fresh_seed());
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

}  // namespace
}  // namespace dfsel::test
