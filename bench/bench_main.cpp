// dfsel_bench's main: Google Benchmark's, plus the GPU in the context; without a GPU there is
// nothing to measure, which is not a failure.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "bench_util.cuh"

int main(int argc, char** argv) {
  if (dfsel::bench::replays_per_timing() == 0) {
    std::fprintf(stderr, "dfsel_bench: DFSEL_BENCH_REPLAYS = '%s': expected a whole number from 1 to 1000\n",
                 std::getenv("DFSEL_BENCH_REPLAYS"));
    return 2;
  }
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("dfsel_bench: no CUDA GPU found, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  dfsel::bench::add_gpu_context();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
