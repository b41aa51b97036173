// Timing for dfsel_bench: GPU work is captured in a CUDA graph and replayed, each replay timed
// with CUDA events (SPEC section 7 measures the same way); host work is timed by the wall
// clock. Every benchmark reports its time per call and, for the bytes it must read:
//   GB/s      bytes / time
//   floor_us  bytes / 4.27 TB/s, the H200's device-to-device copy rate
//   x_floor   time / floor
// DFSEL_BENCH_REPLAYS=N times N back-to-back replays between the two events instead of one: the
// GPU then never waits on the host between replays, and only the first launch's latency is in
// the figure, divided by N times more calls (the context's "replays_per_timing" says which;
// the default 1 is what every recorded figure used). Host code only, so that bench_main.cpp
// can include it too.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

namespace dfsel::bench {

constexpr double kHbmBytesPerSecond = 4.27e12;  // SPEC section 7
constexpr size_t kL2Bytes = (size_t)60 << 20;    // H200 L2, rounded up
constexpr int kMinGraphCalls = 16;               // calls per replay, so launch gaps average out

// Graph replays per timed interval of time_graph: DFSEL_BENCH_REPLAYS, 1 (unset) to 1000; 0
// when the variable holds anything else (bench_main refuses to run then).
inline int replays_per_timing() {
  static const int n = [] {
    const char* v = std::getenv("DFSEL_BENCH_REPLAYS");
    if (v == nullptr) return 1;
    char* end = nullptr;
    const long r = std::strtol(v, &end, 10);
    return end != v && *end == '\0' && r >= 1 && r <= 1000 ? (int)r : 0;
  }();
  return n;
}

// The GPU's name and SM count in the benchmark context; call before RunSpecifiedBenchmarks
// (the context is printed before the first benchmark runs).
inline void add_gpu_context() {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, 0) != cudaSuccess) return;
  benchmark::AddCustomContext("gpu", p.name);
  benchmark::AddCustomContext("sms", std::to_string(p.multiProcessorCount));
  benchmark::AddCustomContext("replays_per_timing", std::to_string(replays_per_timing()));
}

inline int device_sms() {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  return n;
}

// Copies of an input of this size to rotate through so that back-to-back calls do not find
// their input in L2: together they span twice the L2 (capped: tiny inputs stay latency-bound).
inline int rotation_copies(size_t bytes) {
  if (bytes == 0 || bytes >= 2 * kL2Bytes) return 1;
  return (int)std::min<size_t>((2 * kL2Bytes + bytes - 1) / bytes, 128);
}

inline void report_bytes(benchmark::State& state, double bytes, double seconds_per_call) {
  if (bytes <= 0.0) return;  // a launch floor reads nothing
  const double floor_s = bytes / kHbmBytesPerSecond;
  state.counters["GB/s"] = bytes / seconds_per_call / 1e9;
  state.counters["floor_us"] = floor_s * 1e6;
  state.counters["x_floor"] = seconds_per_call / floor_s;
}

inline bool cuda_ok(benchmark::State& state, cudaError_t e, const char* what) {
  if (e == cudaSuccess) return true;
  state.SkipWithError((std::string(what) + ": " + cudaGetErrorString(e)).c_str());
  return false;
}

// Times enqueue(copy, stream), which must enqueue one call reading input copy `copy`: the
// calls for copies 0, 1, ..., copies - 1, 0, ... (at least kMinGraphCalls of them) are captured
// in one graph; each benchmark iteration replays it between two events and reports the time
// per call. Register the benchmark with UseManualTime(). per_call, when given, receives every
// iteration's time per call (for a median; Google Benchmark reports the mean).
inline void time_graph(benchmark::State& state, int copies, double bytes,
                       const std::function<cudaError_t(int, cudaStream_t)>& enqueue,
                       std::vector<double>* per_call = nullptr) {
  const int calls = copies * ((kMinGraphCalls + copies - 1) / copies);
  cudaStream_t st = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t start = nullptr, stop = nullptr;
  auto cleanup = [&] {
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (st) cudaStreamDestroy(st);
  };
  if (!cuda_ok(state, cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate")) return cleanup();
  if (!cuda_ok(state, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture"))
    return cleanup();
  cudaError_t enqueued = cudaSuccess;
  for (int i = 0; i < calls && enqueued == cudaSuccess; ++i) enqueued = enqueue(i % copies, st);
  const cudaError_t captured = cudaStreamEndCapture(st, &graph);
  if (!cuda_ok(state, enqueued, "enqueue") || !cuda_ok(state, captured, "cudaStreamEndCapture") ||
      !cuda_ok(state, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate") ||
      !cuda_ok(state, cudaEventCreate(&start), "cudaEventCreate") ||
      !cuda_ok(state, cudaEventCreate(&stop), "cudaEventCreate") ||
      !cuda_ok(state, cudaGraphLaunch(exec, st), "warm-up replay") ||
      !cuda_ok(state, cudaStreamSynchronize(st), "warm-up replay"))
    return cleanup();
  double total = 0.0;
  int64_t n = 0;
  const int replays = replays_per_timing();
  for (auto _ : state) {
    cudaEventRecord(start, st);
    for (int r = 0; r < replays; ++r) cudaGraphLaunch(exec, st);
    cudaEventRecord(stop, st);
    if (!cuda_ok(state, cudaEventSynchronize(stop), "replay")) break;
    float ms = 0.0f;
    cudaEventElapsedTime(&ms, start, stop);
    const double per_call_s = ms * 1e-3 / ((double)calls * replays);
    state.SetIterationTime(per_call_s);
    if (per_call != nullptr) per_call->push_back(per_call_s);
    total += per_call_s;
    ++n;
  }
  if (n > 0) report_bytes(state, bytes, total / n);
  cleanup();
}

// Times host work (which may include its own copies from the device) by the wall clock.
inline void time_host(benchmark::State& state, double bytes, const std::function<bool()>& work) {
  double total = 0.0;
  int64_t n = 0;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (!work()) {
      state.SkipWithError("host work failed");
      break;
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    state.SetIterationTime(s);
    total += s;
    ++n;
  }
  if (n > 0) report_bytes(state, bytes, total / n);
}

}  // namespace dfsel::bench
