// StepTimeline: where a selector step's time goes, kernel by kernel, as the GPU ran it. The
// steps of SelectorStep (public API, CUDA-graph replay, rotated inputs) run with CUPTI's
// concurrent-kernel trace on, which timestamps every kernel without serialising them, so a
// chained kernel's start under its predecessor's tail shows. Counters, medians over the traced
// steps, in us from the start of the step's first kernel: <kernel>_start and <kernel>_end for
// gate, topk and lattice, and step (the lattice's end). The reported time is the step's
// span; the gap to the next step is the graph's, not the step's.
#if defined(DFSEL_BENCH_CUPTI)
#include <cupti.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "step_setup.cuh"

namespace dfsel::bench {
namespace {

struct KernelSpan {
  int kind;  // index into kKernels, -1 for others
  uint64_t start, end;
};

constexpr const char* kKernels[] = {"gate", "topk", "lattice"};
constexpr const char* kMangled[] = {"gate_kernel", "shard_topk_kernel", "lattice_kernel"};
constexpr int kKinds = 3;

std::mutex g_mu;
std::vector<KernelSpan>* g_spans = nullptr;  // set while a trace is on

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = (size_t)8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (rec->kind != CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL || !g_spans) continue;
    const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
    int kind = -1;
    for (int i = 0; i < kKinds && k->name; ++i)
      if (std::strstr(k->name, kMangled[i])) kind = i;
    g_spans->push_back(KernelSpan{kind, k->start, k->end});
  }
  std::free(buffer);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void step_timeline(benchmark::State& state, StepShape s) {
  const int copies = rotation_copies((size_t)s.blocks * s.block * s.vocab * elem_bytes(s.logits));
  Rank r;
  if (!setup_rank(state, s, 0, 0, copies, nullptr, &r)) return;
  const int calls = copies * ((kMinGraphCalls + copies - 1) / copies);
  cudaStream_t st = r.stream;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cuda_ok(state, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int c = 0; ok && c < calls; ++c)
    ok = dfsel_plan_run(r.plan, &r.in[c % copies], &r.out, st) == DFSEL_SUCCESS;
  const cudaError_t captured = cudaStreamEndCapture(st, &graph);
  if (!ok || !cuda_ok(state, captured, "cudaStreamEndCapture") ||
      !cuda_ok(state, cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate") ||
      !cuda_ok(state, cudaGraphLaunch(exec, st), "warm-up replay") ||
      !cuda_ok(state, cudaStreamSynchronize(st), "warm-up replay")) {
    if (!state.error_occurred()) state.SkipWithError("enqueue failed");
    if (exec) cudaGraphExecDestroy(exec);
    if (graph) cudaGraphDestroy(graph);
    return;
  }
  std::vector<KernelSpan> spans;
  std::vector<double> at[kKinds][2], step;
  for (auto _ : state) {
    spans.clear();
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_spans = &spans;
    }
    bool traced = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS &&
                  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS;
    traced = traced && cudaGraphLaunch(exec, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess;
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_spans = nullptr;
    }
    if (!traced) {
      state.SkipWithError("CUPTI's kernel trace could not be enabled");
      break;
    }
    // A step is every kernel after one lattice up to the next lattice, in start order (a step's
    // first kernel starts only after the previous step's lattice has completed).
    std::sort(spans.begin(), spans.end(), [](const KernelSpan& a, const KernelSpan& b) { return a.start < b.start; });
    double span_sum = 0.0;
    int steps = 0;
    for (size_t i = 0; i < spans.size();) {
      size_t j = i;
      while (j < spans.size() && spans[j].kind != 2) ++j;
      if (j == spans.size()) break;
      ++j;  // the lattice ends the step
      uint64_t t0 = spans[i].start;
      for (size_t q = i; q < j; ++q) t0 = std::min(t0, spans[q].start);
      uint64_t t_end = t0;
      for (size_t q = i; q < j; ++q) {
        t_end = std::max(t_end, spans[q].end);
        if (spans[q].kind >= 0) {
          at[spans[q].kind][0].push_back((spans[q].start - t0) * 1e-3);
          at[spans[q].kind][1].push_back((spans[q].end - t0) * 1e-3);
        }
      }
      step.push_back((t_end - t0) * 1e-3);
      span_sum += (t_end - t0) * 1e-9;
      ++steps;
      i = j;
    }
    if (steps == 0) {
      state.SkipWithError("no step found in the trace");
      break;
    }
    state.SetIterationTime(span_sum / steps);
  }
  for (int k = 0; k < kKinds; ++k) {
    state.counters[std::string(kKernels[k]) + "_start"] = median(at[k][0]);
    state.counters[std::string(kKernels[k]) + "_end"] = median(at[k][1]);
  }
  state.counters["step"] = median(step);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

const bool registered = [] {
  for (int blocks : {1, 4, 16, 64}) {
    const StepShape s{blocks, 248320, 1, DFSEL_CODEBOOKS_REPLICATED};
    benchmark::RegisterBenchmark(s.name("StepTimeline").c_str(), step_timeline, s)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(10);
  }
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
#endif  // DFSEL_BENCH_CUPTI
