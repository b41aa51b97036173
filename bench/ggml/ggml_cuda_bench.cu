// dfsel against llama.cpp's in-graph selector, both on ggml-cuda tensors, in one binary
// (dfsel_ggml_bench). The SelectorStep shape: V 248320, n_embd 5120, R 256, K 16, blocks of 16
// tokens, BF16 codebooks and selector_hidden, F32 t_logits and t_embd; 1 / 4 / 16 / 64 blocks.
//   InGraphSelector   llama.cpp's build_dflash2_selector ops (tests/ggml/llama_selector.h) as
//                     one ggml-cuda graph, timed per ggml_backend_graph_compute on the host,
//                     the way an engine pays for it (ggml-cuda's CUDA graphs replay it)
//   DfselGgml/eager   dfsel_ggml_run on the same ggml tensors between graph computes, then the
//                     wait for it (dfsel_plan_check): the route of docs/ggml.md, host-timed
//   DfselGgml/graph   the same step captured once in a CUDA graph, replayed and waited for
//   DfselGgml/replayed  the step as dfsel_bench's SelectorStep times it: calls back to back in
//                     one CUDA graph, events around each replay, logits rotated through copies
//   DfselParts        where a step between computes spends its time, part by part, and the
//                     floor of any launch and wait (dfsel_parts below)
//   DfselTimeline     one step traced by CUPTI, kernel by kernel (cold_timeline.cu)
// Every host-timed iteration starts with the inputs out of L2 (a read of 2x the L2 first, not
// timed). Each benchmark reports its median over the iterations in the counter median_us.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ggml_cuda_setup.cuh"

namespace dfsel::bench {
namespace {

void report(benchmark::State& state, const std::vector<double>& s, int blocks) {
  state.counters["median_us"] = median(s) * 1e6;
  state.counters["tokens"] = blocks * kBlock;
}

void in_graph_selector(benchmark::State& state, int blocks) {
  Setup s;
  if (!s.build(blocks, 1)) return state.SkipWithError(s.error.c_str());
  const L2Flush flush;
  // Warm-up: ggml-cuda captures its CUDA graph on the first computes.
  for (int i = 0; i < 3; ++i)
    if (ggml_backend_graph_compute(s.backend, s.graph) != GGML_STATUS_SUCCESS)
      return state.SkipWithError("ggml_backend_graph_compute failed");
  std::vector<double> t;
  for (auto _ : state) {
    flush();
    const auto t0 = Clock::now();
    const ggml_status st = ggml_backend_graph_compute(s.backend, s.graph);
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (st != GGML_STATUS_SUCCESS) return state.SkipWithError("ggml_backend_graph_compute failed");
    state.SetIterationTime(sec);
    t.push_back(sec);
  }
  report(state, t, blocks);
}

void dfsel_eager(benchmark::State& state, int blocks) {
  Setup s;
  if (!s.build(blocks, 1)) return state.SkipWithError(s.error.c_str());
  const L2Flush flush;
  for (int i = 0; i < 3; ++i)
    if (!s.run_dfsel(0, s.stream) || dfsel_plan_check(s.plan, s.stream) != DFSEL_SUCCESS)
      return state.SkipWithError(s.error.empty() ? dfsel_plan_last_error(s.plan) : s.error.c_str());
  std::vector<double> t;
  for (auto _ : state) {
    flush();
    const auto t0 = Clock::now();
    const bool ok = s.run_dfsel(0, s.stream) && dfsel_plan_check(s.plan, s.stream) == DFSEL_SUCCESS;
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    if (!ok) return state.SkipWithError(s.error.empty() ? dfsel_plan_last_error(s.plan) : s.error.c_str());
    state.SetIterationTime(sec);
    t.push_back(sec);
  }
  report(state, t, blocks);
}

void dfsel_graph(benchmark::State& state, int blocks) {
  Setup s;
  if (!s.build(blocks, 1)) return state.SkipWithError(s.error.c_str());
  const L2Flush flush;
  if (!s.capture()) return state.SkipWithError(s.error.c_str());
  cudaGraphExec_t exec = s.exec;
  std::vector<double> t;
  bool ok = true;
  for (int i = 0; i < 3 && ok; ++i)
    ok = cudaGraphLaunch(exec, s.stream) == cudaSuccess && dfsel_plan_check(s.plan, s.stream) == DFSEL_SUCCESS;
  for (auto _ : state) {
    if (!ok) break;
    flush();
    const auto t0 = Clock::now();
    ok = cudaGraphLaunch(exec, s.stream) == cudaSuccess && dfsel_plan_check(s.plan, s.stream) == DFSEL_SUCCESS;
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    state.SetIterationTime(sec);
    t.push_back(sec);
  }
  if (!ok) return state.SkipWithError(dfsel_plan_last_error(s.plan));
  report(state, t, blocks);
}

// Where the time of a step between computes goes, each timed alone (host clock, inputs out of
// L2): `what` picks the part.
//   plan_eager   dfsel_plan_run on the same views (no ggml tensors), then dfsel_plan_check
//   graph_sync   the captured step replayed, then cudaStreamSynchronize (no error report)
//   graph_gpu    the captured step replayed between two events: its GPU time when isolated
//   graph_query  the captured step replayed, cudaStreamQuery polled until it is done, then
//                dfsel_plan_check (another way to wait: the spin in the caller's thread)
//   null_sync    a captured graph of one empty kernel replayed, then cudaStreamSynchronize: the
//                floor any GPU work between two graph computes pays for its launch and wait
//   checks       dfsel_ggml_run's memory checks alone: dfsel_plan_check_memory of each tensor
__global__ void empty_kernel() {}

void dfsel_parts(benchmark::State& state, int blocks, std::string what) {
  Setup s;
  if (!s.build(blocks, 1)) return state.SkipWithError(s.error.c_str());
  const L2Flush flush;
  const dfsel_ggml_step st = s.step(0);
  dfsel_inputs in{};
  dfsel_outputs out{};
  char msg[512];
  dfsel_ggml_tensor(st.logits, &in.logits, msg, sizeof msg);
  dfsel_ggml_tensor(st.hidden, &in.hidden, msg, sizeof msg);
  in.anchors = static_cast<const int32_t*>(st.anchors->data);
  in.n_blocks = blocks;
  out.packed = static_cast<float*>(st.packed->data);
  out.path = static_cast<int32_t*>(st.path->data);
  out.n_emitted = static_cast<int32_t*>(st.n_emitted->data);
  auto empty = [](Setup&, cudaStream_t st) {
    empty_kernel<<<1, 32, 0, st>>>();
    return cudaGetLastError() == cudaSuccess;
  };
  if (!s.capture(what == "null_sync" ? +empty : nullptr)) return state.SkipWithError(s.error.c_str());
  cudaGraphExec_t exec = s.exec;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  const ggml_tensor* tensors[6] = {st.logits, st.hidden, st.anchors, st.packed, st.path, st.n_emitted};
  auto once = [&]() -> double {  // seconds
    if (what == "plan_eager") {
      const auto t0 = Clock::now();
      if (dfsel_plan_run(s.plan, &in, &out, s.stream) != DFSEL_SUCCESS || dfsel_plan_check(s.plan, s.stream) != DFSEL_SUCCESS)
        return -1;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (what == "graph_query") {
      const auto t0 = Clock::now();
      if (cudaGraphLaunch(exec, s.stream) != cudaSuccess) return -1;
      cudaError_t e;
      while ((e = cudaStreamQuery(s.stream)) == cudaErrorNotReady) {
      }
      if (e != cudaSuccess || dfsel_plan_check(s.plan, s.stream) != DFSEL_SUCCESS) return -1;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (what == "graph_sync" || what == "null_sync") {
      const auto t0 = Clock::now();
      if (cudaGraphLaunch(exec, s.stream) != cudaSuccess || cudaStreamSynchronize(s.stream) != cudaSuccess) return -1;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (what == "graph_gpu") {
      cudaEventRecord(e0, s.stream);
      cudaGraphLaunch(exec, s.stream);
      cudaEventRecord(e1, s.stream);
      if (cudaEventSynchronize(e1) != cudaSuccess) return -1;
      float ms = 0;
      cudaEventElapsedTime(&ms, e0, e1);
      return ms * 1e-3;
    }
    const auto t0 = Clock::now();
    for (const ggml_tensor* t : tensors)
      if (dfsel_plan_check_memory(s.plan, t->data, t->name, msg, sizeof msg) != DFSEL_SUCCESS) return -1;
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  std::vector<double> t;
  for (int i = 0; i < 3; ++i) once();
  for (auto _ : state) {
    flush();
    const double sec = once();
    if (sec < 0) {
      state.SkipWithError(("the step failed: " + std::string(dfsel_plan_last_error(s.plan))).c_str());
      break;
    }
    state.SetIterationTime(sec);
    t.push_back(sec);
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  report(state, t, blocks);
}

void dfsel_replayed(benchmark::State& state, int blocks) {
  const int copies = rotation_copies((size_t)blocks * kBlock * kV * 4);
  Setup s;
  if (!s.build(blocks, copies)) return state.SkipWithError(s.error.c_str());
  std::vector<double> t;
  time_graph(state, copies, 0.0,
             [&](int c, cudaStream_t st) { return s.run_dfsel(c, st) ? cudaSuccess : cudaErrorUnknown; }, &t);
  report(state, t, blocks);
}

// DFSEL_GGML_LABEL=NAME names the ggml-cuda the in-graph selector runs on, for runs of one binary
// on two builds of it (scripts/ggml-topk-gpu-check.sh: dfsel's top-K patched into ggml_top_k or
// not): InGraphSelector/ggml:NAME/blocks:N. Only the in-graph selector is registered then, since
// nothing else here calls into ggml-cuda's ops.
const char* ggml_label() {
  const char* v = std::getenv("DFSEL_GGML_LABEL");
  return v && *v ? v : nullptr;
}

const bool registered = [] {
  const char* label = ggml_label();
  for (int blocks : {1, 4, 16, 64}) {
    const std::string b = "/blocks:" + std::to_string(blocks);
    const std::string in_graph = label ? "InGraphSelector/ggml:" + std::string(label) + b : "InGraphSelector" + b;
    benchmark::RegisterBenchmark(in_graph.c_str(), in_graph_selector, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    if (label) continue;
    benchmark::RegisterBenchmark(("DfselGgml/eager" + b).c_str(), dfsel_eager, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfselGgml/graph" + b).c_str(), dfsel_graph, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfselGgml/replayed" + b).c_str(), dfsel_replayed, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    for (const char* part : {"plan_eager", "graph_sync", "graph_query", "graph_gpu", "null_sync", "checks"})
      benchmark::RegisterBenchmark(("DfselParts/" + std::string(part) + b).c_str(), dfsel_parts, blocks, std::string(part))
          ->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  return true;
}();

}  // namespace
}  // namespace dfsel::bench

int main(int argc, char** argv) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    std::printf("dfsel_ggml_bench: no CUDA GPU found, nothing to measure\n");
    return 0;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  dfsel::bench::add_gpu_context();
  benchmark::AddCustomContext("peer", "llama.cpp's in-graph selector (build_dflash2_selector ops) on ggml-cuda");
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
