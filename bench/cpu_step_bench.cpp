// CpuStep: one selector step on the CPU backend at the dfsel command's sizes (V 248320, R 256,
// E 5120, one block of 16, K 16, F32 logits, BF16 codebooks and W_h), timed in wall-clock
// (real) time around dfsel_run_group. The argument is the plan's n_threads (0: every core).
// Built with or without CUDA: machines without a GPU run this backend.
#include <benchmark/benchmark.h>

#include <fstream>
#include <string>
#include <thread>

#include "cpu_steps.h"
#include "synthetic.h"

namespace {

void CpuStep(benchmark::State& state) {
  dfsel::tools::Problem p;
  p.backend = DFSEL_BACKEND_CPU;
  p.threads = (int)state.range(0);
  p.blocks = (int)state.range(1);
  dfsel::tools::Runner runner;
  if (!time_steps(state, runner, [&](std::string* err) { return runner.setup(p, err); })) return;
  state.counters["logits_per_s"] = benchmark::Counter(
      (double)p.vocab * p.blocks * (p.block - 1), benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(CpuStep)
    ->ArgNames({"threads", "blocks"})
    ->Args({1, 1})
    ->Args({2, 1})
    ->Args({0, 1})
    ->Args({0, 4})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// "<model name> x <cores>", from /proc/cpuinfo, for the JSON's context.
std::string machine() {
  std::ifstream f("/proc/cpuinfo");
  std::string line, model = "unknown CPU";
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) {
      model = line.substr(line.find(':') + 2);
      break;
    }
  return model + " x " + std::to_string(std::thread::hardware_concurrency()) + " cores";
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("machine", machine());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
