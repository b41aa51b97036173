// StepTimeline: where a selector step's time goes, kernel by kernel, as the GPU ran it. The
// steps of SelectorStep (public API, CUDA-graph replay, rotated inputs) run with CUPTI's
// concurrent-kernel and memcpy traces on, which timestamp every kernel and copy without
// serialising them, so a chained kernel's start under its predecessor's tail shows.
//
// One rank (StepTimeline/tokens:...): counters <part>_start and <part>_end for gate, topk and
// lattice. S simulated ranks on one GPU (StepTimeline/ranks:S/.../replicated|sharded, the
// steps of SimulatedShards: one stream, dfsel_run_group): <part>_r<i>_start and _end for rank
// i and every part it runs: gate, topk, records (the sharded placement's codebook rows),
// agree (what the rank was given), exchange (its S copies of the in-process all-gather, first
// start to last end) and lattice. A part's i-th launch in a step (its i-th S copies, for the
// exchange) is rank i's: the group enqueues every rank's select, then every exchange, then
// every finish, rank by rank. <part>_n is the number of launches (copies) of a part a step.
// All are medians over the traced steps, in us from the start of the step's first kernel;
// step is the last lattice's end. The reported time is the step's span; the gap to the next
// step is the graph's, not the step's.
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

struct Span {
  int part;  // index into kParts, -1 for kernels of no part
  uint64_t start, end;
};

constexpr const char* kParts[] = {"gate", "topk", "records", "agree", "exchange", "lattice"};
// The kernel whose name holds the string is the part's; the exchange is the copies.
constexpr const char* kMangled[] = {"gate_kernel", "shard_topk_kernel", "pack_kernel", "agree_kernel", nullptr,
                                    "lattice_kernel"};
constexpr int kParts_n = 6, kExchange = 4, kLattice = 5;

std::mutex g_mu;
std::vector<Span>* g_spans = nullptr;  // set while a trace is on

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *size = (size_t)8 << 20;
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, *size));
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, uint32_t, uint8_t* buffer, size_t, size_t valid) {
  CUpti_Activity* rec = nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  while (cuptiActivityGetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
    if (!g_spans) continue;
    if (rec->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(rec);
      int part = -1;
      for (int i = 0; i < kParts_n && k->name; ++i)
        if (kMangled[i] && std::strstr(k->name, kMangled[i])) part = i;
      g_spans->push_back(Span{part, k->start, k->end});
    } else if (rec->kind == CUPTI_ACTIVITY_KIND_MEMCPY) {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(rec);
      g_spans->push_back(Span{kExchange, m->start, m->end});
    }
  }
  std::free(buffer);
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The medians of one part of one rank (or of the part on one rank): start and end.
struct PartTimes {
  std::vector<double> start, end;
};

void step_timeline(benchmark::State& state, StepShape s) {
  const int copies = rotation_copies((size_t)s.blocks * s.block * s.vocab * elem_bytes(s.logits));
  SimulatedGroup g;
  if (!g.setup(state, s, copies)) return;
  const int calls = copies * ((kMinGraphCalls + copies - 1) / copies);
  cudaStream_t st = g.ranks[0]->stream;  // SimulatedShards: every rank on one stream
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  bool ok = cuda_ok(state, cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture");
  for (int c = 0; ok && c < calls; ++c) ok = g.enqueue(c % copies, st);
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
  // Launches of a part a step: one a rank, S copies a rank for the exchange (none on one rank).
  auto per_rank = [&](int part) { return part == kExchange ? s.ranks : 1; };
  std::vector<Span> spans;
  std::vector<std::vector<PartTimes>> at(kParts_n, std::vector<PartTimes>(s.ranks));
  std::vector<double> count[kParts_n], step;
  for (auto _ : state) {
    spans.clear();
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_spans = &spans;
    }
    bool traced = cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed) == CUPTI_SUCCESS &&
                  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) == CUPTI_SUCCESS &&
                  cuptiActivityEnable(CUPTI_ACTIVITY_KIND_MEMCPY) == CUPTI_SUCCESS;
    traced = traced && cudaGraphLaunch(exec, st) == cudaSuccess && cudaStreamSynchronize(st) == cudaSuccess;
    cuptiActivityFlushAll(1);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_MEMCPY);
    {
      std::lock_guard<std::mutex> lock(g_mu);
      g_spans = nullptr;
    }
    if (!traced) {
      state.SkipWithError("CUPTI's kernel and memcpy traces could not be enabled");
      break;
    }
    // A step is everything after the previous step's last lattice up to its own S-th lattice, in
    // start order (a step's first kernel starts only after the previous step's lattices end).
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.start < b.start; });
    double span_sum = 0.0;
    int steps = 0;
    for (size_t i = 0; i < spans.size();) {
      size_t j = i;
      int lattices = 0;
      while (j < spans.size() && lattices < s.ranks) lattices += spans[j++].part == kLattice;
      if (lattices < s.ranks) break;  // the trace's tail holds no whole step
      uint64_t t0 = spans[i].start, t_end = spans[i].start;
      for (size_t q = i; q < j; ++q) t0 = std::min(t0, spans[q].start), t_end = std::max(t_end, spans[q].end);
      std::vector<int> seen(kParts_n, 0);
      for (size_t q = i; q < j; ++q) {
        const int part = spans[q].part;
        if (part < 0) continue;
        const int k = seen[part]++, rank = k / per_rank(part);
        if (rank >= s.ranks) continue;  // more launches than ranks: counted in <part>_n, not placed
        PartTimes& pt = at[part][rank];
        const double a = (spans[q].start - t0) * 1e-3, b = (spans[q].end - t0) * 1e-3;
        if (k % per_rank(part) == 0) {  // the rank's first launch (copy) opens its span
          pt.start.push_back(a);
          pt.end.push_back(b);
        } else {
          pt.end.back() = std::max(pt.end.back(), b);
        }
      }
      for (int p = 0; p < kParts_n; ++p) count[p].push_back(seen[p]);
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
  for (int p = 0; p < kParts_n; ++p) {
    for (int r = 0; r < s.ranks; ++r) {
      if (at[p][r].start.empty()) continue;
      const std::string key = std::string(kParts[p]) + (s.ranks > 1 ? "_r" + std::to_string(r) : "");
      state.counters[key + "_start"] = median(at[p][r].start);
      state.counters[key + "_end"] = median(at[p][r].end);
    }
    if (s.ranks > 1 || p != kExchange) state.counters[std::string(kParts[p]) + "_n"] = median(count[p]);
  }
  state.counters["step"] = median(step);
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

const bool registered = [] {
  auto add = [](const StepShape& s) {
    benchmark::RegisterBenchmark(s.name("StepTimeline").c_str(), step_timeline, s)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond)
        ->Iterations(10);
  };
  for (int blocks : {1, 4, 16, 64}) add(StepShape{blocks, 248320, 1, DFSEL_CODEBOOKS_REPLICATED});
  for (int blocks : {1, 16})
    for (dfsel_placement pl : {DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED})
      add(StepShape{blocks, 248320, 2, pl});
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
#endif  // DFSEL_BENCH_CUPTI
