// CpuDSparkStep: one DSpark chain on the CPU backend (V 163840 draft ids, R 256, N 7 steps,
// BF16 W1 and W2, F32 base logits, greedy), wall-clock time around dfsel_dspark_run_group; the
// arguments are the plan's n_threads (0: every core) and the blocks of a step. CpuW2ReadFloor
// is the floor it is held to: W2 read N times from memory by as many threads, each 32-byte
// load feeding one integer add, and nothing else.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "cpu_steps.h"
#include "dspark_runner.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace {

constexpr int64_t kVocab = 163840;
constexpr int kRank = 256, kSteps = 7;

void CpuDSparkStep(benchmark::State& state) {
  dfsel::tools::DSparkProblem p;
  p.vocab = kVocab;
  p.rank = kRank;
  p.n_draft = kSteps;
  p.threads = (int)state.range(0);
  p.blocks = (int)state.range(1);
  dfsel::tools::DSparkRunner runner;
  if (!time_steps(state, runner, [&](std::string* err) { return runner.setup(p, nullptr, err); })) return;
  state.counters["w2_bytes_per_s"] =
      benchmark::Counter((double)runner.w2_bytes() * kSteps, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(CpuDSparkStep)
    ->ArgNames({"threads", "blocks"})
    ->Args({0, 4})
    ->Args({1, 4})
    ->Args({0, 1})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_slice(const uint8_t* p, size_t bytes, int passes) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (int pass = 0; pass < passes; ++pass)
    for (size_t i = 0; i + 128 <= bytes; i += 128) {
      a0 = _mm256_add_epi32(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
      a1 = _mm256_add_epi32(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
      a2 = _mm256_add_epi32(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
      a3 = _mm256_add_epi32(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
    }
  const __m256i s = _mm256_add_epi32(_mm256_add_epi32(a0, a1), _mm256_add_epi32(a2, a3));
  alignas(32) uint32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  uint64_t sum = 0;
  for (uint32_t x : lanes) sum += x;
  return sum;
}
#else
uint64_t read_slice(const uint8_t* p, size_t bytes, int passes) {
  uint64_t sum = 0;
  for (int pass = 0; pass < passes; ++pass)
    for (size_t i = 0; i < bytes; i += 8) {
      uint64_t x;
      std::memcpy(&x, p + i, 8);
      sum += x;
    }
  return sum;
}
#endif

void CpuW2ReadFloor(benchmark::State& state) {
  const int threads = state.range(0) > 0 ? (int)state.range(0) : (int)std::thread::hardware_concurrency();
  const size_t bytes = (size_t)kVocab * kRank * 2;  // BF16 W2
  std::vector<uint8_t> w2(bytes + 64);
  uint8_t* base = w2.data() + (64 - reinterpret_cast<uintptr_t>(w2.data()) % 64) % 64;
  for (size_t i = 0; i < bytes; ++i) base[i] = (uint8_t)(i * 131);
  const size_t slice = bytes / threads / 128 * 128;
  std::vector<uint64_t> sums(threads);
  for (auto _ : state) {
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back([&, t] { sums[t] = read_slice(base + t * slice, slice, kSteps); });
    sums[0] = read_slice(base, slice, kSteps);
    for (std::thread& t : pool) t.join();
    benchmark::DoNotOptimize(sums.data());
  }
  state.counters["w2_bytes_per_s"] = benchmark::Counter((double)slice * threads * kSteps, benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(CpuW2ReadFloor)->ArgNames({"threads"})->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
