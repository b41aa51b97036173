// dfsel_bench's main: Google Benchmark's, plus the GPU in the context; without a GPU there is
// nothing to measure, which is not a failure.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>

#include "bench_util.cuh"

int main(int argc, char** argv) {
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
