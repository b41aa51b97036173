// DfselTimeline: where one step between graph computes spends its time, as the host and the GPU
// saw it. Each iteration takes the inputs out of L2, then runs the step on the ggml-cuda tensors
// and waits for it with dfsel_plan_check, as DfselGgml times it: /graph replays the captured
// step, /eager calls dfsel_ggml_run. CUPTI's runtime-API and concurrent-kernel traces are on.
// Counters, medians in us from just before the step's first call (CUPTI's clock throughout):
//   wait_start    the wait's cudaStreamSynchronize is called: the host has enqueued the step
//   first_kernel  the step's first kernel starts on the GPU
//   <part>_start, <part>_end   topk, gate, lattice
//   last_kernel   the step's last kernel ends
//   sync_end      the wait's cudaStreamSynchronize returns
// The tracing adds its own cost to each call, so the span is longer than DfselGgml's; the
// parts' shares are what it is for.
#if defined(DFSEL_BENCH_CUPTI)
#include <benchmark/benchmark.h>
#include <cupti.h>

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "ggml_cuda_setup.cuh"

namespace dfsel::bench {
namespace {

constexpr const char* kParts[] = {"topk", "gate", "lattice"};
constexpr const char* kKernels[] = {"shard_topk_kernel", "gate_kernel", "lattice_kernel"};
constexpr int kNParts = 3;

struct Trace {
  std::vector<std::pair<uint64_t, uint64_t>> kernels[kNParts + 1];  // the parts', then any other
  uint64_t sync_start = 0, sync_end = 0;
};

std::mutex g_mu;
Trace* g_trace = nullptr;

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = (size_t)4 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (!g_trace) continue;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      int part = kNParts;
      for (int i = 0; i < kNParts && k->name; ++i)
        if (std::strstr(k->name, kKernels[i])) part = i;
      g_trace->kernels[part].emplace_back(k->start, k->end);
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_RUNTIME) {
      const auto* a = reinterpret_cast<const CUpti_ActivityAPI*>(rec);
      if (a->cbid == CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020) {
        g_trace->sync_start = a->start;
        g_trace->sync_end = a->end;
      }
    }
  }
  std::free(buffer);
}

void dfsel_timeline(benchmark::State& state, int blocks, bool graph) {
  Setup s;
  if (!s.build(blocks, 1)) return state.SkipWithError(s.error.c_str());
  const L2Flush flush;
  if (graph && !s.capture()) return state.SkipWithError(s.error.c_str());
  auto step = [&] { return graph ? cudaGraphLaunch(s.exec, s.stream) == cudaSuccess : s.run_dfsel(0, s.stream); };
  for (int i = 0; i < 3; ++i)
    if (!step() || dfsel_plan_check(s.plan, s.stream) != DFSEL_SUCCESS) return state.SkipWithError("the step failed");
  if (cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS)
    return state.SkipWithError("CUPTI's callbacks could not be registered");
  std::vector<double> at[4 + 2 * kNParts];  // wait_start, first_kernel, last_kernel, sync_end, parts
  for (auto _ : state) {
    flush();
    Trace t;
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_trace = &t;
    }
    bool ok = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
              cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME) == CUPTI_SUCCESS;
    uint64_t start = 0;
    ok = ok && cuptiGetTimestamp(&start) == CUPTI_SUCCESS;
    const auto t0 = Clock::now();
    ok = ok && step() && dfsel_plan_check(s.plan, s.stream) == DFSEL_SUCCESS;
    const double sec = std::chrono::duration<double>(Clock::now() - t0).count();
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_trace = nullptr;
    }
    if (!ok || t.sync_end == 0) {
      state.SkipWithError("the traced step failed, or CUPTI recorded no wait");
      break;
    }
    uint64_t first = UINT64_MAX, last = 0;
    for (const auto& part : t.kernels)
      for (const auto& k : part) first = std::min(first, k.first), last = std::max(last, k.second);
    if (last == 0) {
      state.SkipWithError("CUPTI recorded no kernel of the step");
      break;
    }
    auto us = [&](uint64_t x) { return ((double)x - (double)start) * 1e-3; };
    at[0].push_back(us(t.sync_start));
    at[1].push_back(us(first));
    at[2].push_back(us(last));
    at[3].push_back(us(t.sync_end));
    for (int p = 0; p < kNParts; ++p) {
      if (t.kernels[p].empty()) continue;
      uint64_t a = UINT64_MAX, b = 0;
      for (const auto& k : t.kernels[p]) a = std::min(a, k.first), b = std::max(b, k.second);
      at[4 + 2 * p].push_back(us(a));
      at[5 + 2 * p].push_back(us(b));
    }
    state.SetIterationTime(sec);
  }
  const char* names[4] = {"wait_start", "first_kernel", "last_kernel", "sync_end"};
  for (int i = 0; i < 4; ++i) state.counters[names[i]] = median(at[i]);
  for (int p = 0; p < kNParts; ++p) {
    if (at[4 + 2 * p].empty()) continue;
    state.counters[std::string(kParts[p]) + "_start"] = median(at[4 + 2 * p]);
    state.counters[std::string(kParts[p]) + "_end"] = median(at[5 + 2 * p]);
  }
  state.counters["tokens"] = blocks * kBlock;
}

const bool registered = [] {
  for (int blocks : {1, 16})
    for (bool graph : {true, false})
      benchmark::RegisterBenchmark(
          ("DfselTimeline/" + std::string(graph ? "graph" : "eager") + "/blocks:" + std::to_string(blocks)).c_str(),
          dfsel_timeline, blocks, graph)
          ->UseManualTime()
          ->Unit(benchmark::kMicrosecond)
          ->Iterations(50);
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
#endif  // DFSEL_BENCH_CUPTI
