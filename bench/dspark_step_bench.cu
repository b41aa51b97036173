// The DSpark chain on the CUDA backend through the public API, CUDA-graph replayed:
//   DSparkStep        one whole chain (N steps of every block): dfsel_dspark_run_group of 1 or
//                     S simulated ranks on one GPU (their plans on one stream)
//   DSparkW2ReadFloor N plain full reads of the W2 shard, nothing else: a read-and-reduce kernel
//                     with wide streaming loads, its grid swept and the fastest timed, so that
//                     the chain's distance to it is the chain's own cost
// V_draft = V_target = 163840, R = 256, N = 7, BF16 W1 and W2, F32 logits (N rows a block,
// sample_from_anchor), no d2t, scale or confidence head. Per chain the W2 rows are read N
// times (N x 84 MB): at 4.27 TB/s that is 137 us, the floor the step is held against. Each
// rank has two plans over two copies of its W2 rows (168 MB together, more than the L2), used
// by turns from one chain to the next, so that no chain starts with its W2 in L2 from the chain
// before it; within a chain every step reads the same W2, as in an engine.
// Counters: us (median time per chain), x_w2_floor (us over N W2 reads at 4.27 TB/s),
// target_us (the figure the chain is to meet, where one is set), GB/s over W2 x N + logits.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "dfsel/dspark.h"
#include "tests/support/case_lists.h"

namespace dfsel::bench {
namespace {

// The chain's sizes and the shapes timed are the ones tests/gpu_dspark_test.cu checks.
constexpr int64_t kVocab = cases::kDSparkVocab;
constexpr int kRank = cases::kDSparkRank, kDraft = cases::kDSparkDraft;

struct DSparkShape {
  int blocks;
  int ranks;  // simulated on one GPU
  float temperature;
  double target_us;  // 0: none set
  int rows() const { return blocks * kDraft; }
  std::string name(const char* family) const {
    std::string n = std::string(family) + "/";
    if (ranks > 1) n += "ranks:" + std::to_string(ranks) + "/";
    return n + "blocks:" + std::to_string(blocks) + "/vocab:" + std::to_string(kVocab) + "/r:" +
           std::to_string(kRank) + "/n:" + std::to_string(kDraft) + "/f32/bf16/" +
           (temperature > 0.0f ? "sampling" : "greedy");
  }
};

double w2_bytes() { return (double)kVocab * kRank * 2; }
double w2_floor_s() { return kDraft * w2_bytes() / kHbmBytesPerSecond; }

double median(std::vector<double> t) {
  if (t.empty()) return 0.0;
  std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
  return t[t.size() / 2];
}

// One simulated rank: its plan, its W2 rows, rotated copies of its logits rows.
struct DSparkRank {
  DeviceMem w2[2], anchors, tokens, n_emitted, draft_ids, logit_out, probs, log_norm;
  std::vector<std::unique_ptr<DeviceMem>> logits;
  dfsel_dspark_plan* plan[2] = {nullptr, nullptr};  // over w2[0] and w2[1]
  std::vector<dfsel_dspark_inputs> in;
  dfsel_dspark_outputs out{};
  ~DSparkRank() {
    for (dfsel_dspark_plan* p : plan)
      if (p) dfsel_dspark_plan_destroy(p);
  }
};

bool setup_dspark_rank(benchmark::State& state, const DSparkShape& s, int rank, const DeviceMem& w1, int copies,
                       DSparkRank* r) {
  const int64_t vb = kVocab * rank / s.ranks, ve = kVocab * (rank + 1) / s.ranks, vs = ve - vb;
  const size_t cells = (size_t)s.rows();
  const bool sampling = s.temperature > 0.0f;
  if (!cuda_ok(state, r->w2[0].alloc((size_t)vs * kRank * 2), "cudaMalloc w2") ||
      !cuda_ok(state, r->w2[1].alloc((size_t)vs * kRank * 2), "cudaMalloc w2") ||
      !cuda_ok(state, r->anchors.alloc((size_t)s.blocks * 4), "cudaMalloc anchors") ||
      !cuda_ok(state, r->tokens.alloc(cells * 4), "cudaMalloc tokens") ||
      !cuda_ok(state, r->n_emitted.alloc((size_t)s.blocks * 4), "cudaMalloc n_emitted") ||
      !cuda_ok(state, r->draft_ids.alloc(cells * 4), "cudaMalloc draft_ids") ||
      !cuda_ok(state, r->logit_out.alloc(cells * 4), "cudaMalloc logits out") ||
      (sampling && (!cuda_ok(state, r->probs.alloc(cells * 4), "cudaMalloc probs") ||
                    !cuda_ok(state, r->log_norm.alloc(cells * 4), "cudaMalloc log_norm"))))
    return false;
  // Rank-independent values: every rank sees its part of the same global W2 and logits.
  for (DeviceMem& w2 : r->w2) fill_hashed(w2.get(), DFSEL_TYPE_BF16, (size_t)vs * kRank, 0.25f, 21 + vb * kRank);
  std::vector<int32_t> anchors(s.blocks);
  for (int b = 0; b < s.blocks; ++b) anchors[b] = (int32_t)(hash64(b) % (uint64_t)kVocab);
  cudaMemcpy(r->anchors.get(), anchors.data(), anchors.size() * 4, cudaMemcpyHostToDevice);
  for (int c = 0; c < copies; ++c) {
    r->logits.emplace_back(new DeviceMem());
    if (!cuda_ok(state, r->logits.back()->alloc(cells * vs * 4), "cudaMalloc logits")) return false;
    fill_hashed(r->logits.back()->get(), DFSEL_TYPE_F32, cells * vs, 4.0f, 200 + c * 7919 + rank);
  }
  dfsel_dspark_plan_desc d{};
  d.config = dfsel_dspark_config{kVocab, kVocab, 0, kRank, kDraft, 1, 0.0f, 0.0f, s.blocks};
  d.shard = dfsel_shard{rank, s.ranks, vb, ve};
  d.backend = DFSEL_BACKEND_CUDA;
  d.device = 0;
  d.placement = DFSEL_CODEBOOKS_REPLICATED;
  d.w1 = matrix(w1.get(), DFSEL_TYPE_BF16, kRank, kVocab, (size_t)kRank * 2);
  char msg[512] = "";
  if (!cuda_ok(state, cudaDeviceSynchronize(), "filling the inputs")) return false;
  for (int i = 0; i < 2; ++i) {
    d.w2 = matrix(r->w2[i].get(), DFSEL_TYPE_BF16, kRank, vs, (size_t)kRank * 2);
    if (dfsel_dspark_plan_create(&d, &r->plan[i], msg, sizeof msg) != DFSEL_SUCCESS) {
      state.SkipWithError((std::string("dfsel_dspark_plan_create: ") + msg).c_str());
      return false;
    }
  }
  for (int c = 0; c < copies; ++c) {
    dfsel_dspark_inputs in{};
    in.logits = matrix(r->logits[c]->get(), DFSEL_TYPE_F32, vs, s.rows(), (size_t)vs * 4);
    in.anchors = r->anchors.as<int32_t>();
    in.n_blocks = s.blocks;
    in.temperature = s.temperature;
    in.seed = 1234;
    r->in.push_back(in);
  }
  r->out = dfsel_dspark_outputs{s.blocks, r->tokens.as<int32_t>(), r->n_emitted.as<int32_t>(), r->draft_ids.as<int32_t>(),
                                r->logit_out.as<float>(), sampling ? r->probs.as<float>() : nullptr,
                                sampling ? r->log_norm.as<float>() : nullptr, nullptr};
  return true;
}

void dspark_step(benchmark::State& state, DSparkShape s) {
  // Even, so that call c's plans (c % 2) alternate between consecutive calls of the graph.
  const int copies = (rotation_copies((size_t)s.rows() * (kVocab / s.ranks) * 4) + 1) / 2 * 2;
  DeviceMem w1;  // replicated: one copy serves every simulated rank
  if (!cuda_ok(state, w1.alloc((size_t)kVocab * kRank * 2), "cudaMalloc w1") ||
      !cuda_ok(state, fill_hashed(w1.get(), DFSEL_TYPE_BF16, (size_t)kVocab * kRank, 0.25f, 20), "filling w1"))
    return;
  std::vector<std::unique_ptr<DSparkRank>> ranks;
  std::vector<dfsel_dspark_plan*> plans[2];
  for (int i = 0; i < s.ranks; ++i) {
    ranks.emplace_back(new DSparkRank());
    if (!setup_dspark_rank(state, s, i, w1, copies, ranks.back().get())) return;
    for (int w = 0; w < 2; ++w) plans[w].push_back(ranks.back()->plan[w]);
  }
  std::vector<dfsel_dspark_inputs> in(s.ranks);
  std::vector<dfsel_dspark_outputs> out(s.ranks);
  auto run = [&](int c, cudaStream_t st) {
    std::vector<void*> streams(s.ranks, st);
    for (int i = 0; i < s.ranks; ++i) {
      in[i] = ranks[i]->in[c];
      out[i] = ranks[i]->out;
    }
    return dfsel_dspark_run_group(s.ranks, plans[c % 2].data(), in.data(), out.data(), streams.data());
  };
  // A chain of each plan set outside the graph, waited for: a run the device refuses is an
  // error, not a time.
  for (int c = 0; c < 2; ++c) {
    if (run(c, nullptr) != DFSEL_SUCCESS) {
      state.SkipWithError((std::string("dfsel_dspark_run_group: ") + dfsel_dspark_plan_last_error(plans[c][0])).c_str());
      return;
    }
    for (dfsel_dspark_plan* p : plans[c])
      if (dfsel_dspark_plan_wait(p, nullptr, -1) != DFSEL_SUCCESS) {
        state.SkipWithError((std::string("dfsel_dspark_plan_wait: ") + dfsel_dspark_plan_last_error(p)).c_str());
        return;
      }
  }
  const double bytes = kDraft * w2_bytes() + (double)s.rows() * kVocab * 4;
  std::vector<double> per_call;
  time_graph(state, copies, bytes, [&](int c, cudaStream_t st) {
    return run(c, st) == DFSEL_SUCCESS ? cudaSuccess : cudaErrorUnknown;
  }, &per_call);
  if (per_call.empty()) return;
  const double us = median(per_call) * 1e6;
  state.counters["us"] = us;
  state.counters["w2_floor_us"] = w2_floor_s() * 1e6;
  state.counters["x_w2_floor"] = us / (w2_floor_s() * 1e6);
  if (s.target_us > 0) state.counters["target_us"] = s.target_us;
}

// --- DSparkW2ReadFloor --------------------------------------------------------------------

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// Reads n16 16-byte vectors once (W of them per thread per load step, kInFlight steps in
// flight) and folds the largest word into *out, so that the loads cannot be dropped.
template <int W>
__global__ void __launch_bounds__(kThreads) read_reduce_kernel(const uint4* p, int64_t n16, unsigned* out) {
  const int64_t stride = (int64_t)gridDim.x * kThreads * W * kInFlight;
  unsigned m = 0;
  for (int64_t b = ((int64_t)blockIdx.x * kThreads + threadIdx.x) * W; b < n16; b += stride) {
    uint4 v[kInFlight][W];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
#pragma unroll
      for (int w = 0; w < W; ++w) {
        const int64_t i = b + (int64_t)u * gridDim.x * kThreads * W + w;
        v[u][w] = i < n16 ? __ldcs(p + i) : make_uint4(0, 0, 0, 0);
      }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
#pragma unroll
      for (int w = 0; w < W; ++w) m = max(m, max(max(v[u][w].x, v[u][w].y), max(v[u][w].z, v[u][w].w)));
  }
  for (int o = 16; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) atomicMax(out, m);
}

cudaError_t read_w2(int w, const uint4* p, int64_t n16, int ctas, unsigned* out, cudaStream_t st) {
  if (w == 2) read_reduce_kernel<2><<<ctas, kThreads, 0, st>>>(p, n16, out);
  else read_reduce_kernel<1><<<ctas, kThreads, 0, st>>>(p, n16, out);
  return cudaGetLastError();
}

// Median seconds per call of a graph of kMinGraphCalls calls, over `timings` replays.
double sweep_median(int timings, const std::function<cudaError_t(cudaStream_t)>& enqueue) {
  cudaStream_t st = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  std::vector<double> t;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess &&
      cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < kMinGraphCalls && e == cudaSuccess; ++i) e = enqueue(st);
    if (cudaStreamEndCapture(st, &graph) == cudaSuccess && e == cudaSuccess &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && cudaEventCreate(&a) == cudaSuccess &&
        cudaEventCreate(&b) == cudaSuccess && cudaGraphLaunch(exec, st) == cudaSuccess)
      for (int r = 0; r < timings; ++r) {
        cudaEventRecord(a, st);
        cudaGraphLaunch(exec, st);
        cudaEventRecord(b, st);
        if (cudaEventSynchronize(b) != cudaSuccess) break;
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms * 1e-3 / kMinGraphCalls);
      }
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (st) cudaStreamDestroy(st);
  return t.empty() ? -1.0 : median(t);
}

// N full reads of W2 (one call = the N reads of one chain).
void w2_read_floor(benchmark::State& state) {
  const int64_t rows = kVocab;
  const size_t bytes = (size_t)rows * kRank * 2;
  const int64_t n16 = (int64_t)(bytes / 16);
  DeviceMem w2, out;
  if (!cuda_ok(state, w2.alloc(bytes), "cudaMalloc w2") || !cuda_ok(state, out.alloc(4), "cudaMalloc") ||
      !cuda_ok(state, fill_hashed(w2.get(), DFSEL_TYPE_BF16, (size_t)rows * kRank, 0.25f, 21), "filling w2") ||
      !cuda_ok(state, cudaMemset(out.get(), 0, 4), "cudaMemset") ||
      !cuda_ok(state, cudaDeviceSynchronize(), "filling w2"))
    return;
  auto chain_reads = [&](int w, int ctas, cudaStream_t st) {
    cudaError_t e = cudaSuccess;
    for (int k = 0; k < kDraft && e == cudaSuccess; ++k) e = read_w2(w, w2.as<uint4>(), n16, ctas, out.as<unsigned>(), st);
    return e;
  };
  const int sms = device_sms();
  int best_w = 1, best_ctas = sms;
  double best = 1e30;
  for (int w : {1, 2})
    for (int per_sm : {1, 2, 3, 4, 6, 8}) {
      const double t = sweep_median(20, [&](cudaStream_t st) { return chain_reads(w, per_sm * sms, st); });
      if (t > 0 && t < best) best = t, best_w = w, best_ctas = per_sm * sms;
    }
  state.counters["ctas"] = best_ctas;
  state.counters["load_bytes"] = 16 * best_w;
  std::vector<double> per_call;
  time_graph(state, 1, (double)kDraft * bytes, [&](int, cudaStream_t st) { return chain_reads(best_w, best_ctas, st); },
             &per_call);
  if (per_call.empty()) return;
  const double us = median(per_call) * 1e6;
  state.counters["us"] = us;
  state.counters["w2_floor_us"] = kDraft * (double)bytes / kHbmBytesPerSecond * 1e6;
  state.counters["x_w2_floor"] = us / state.counters["w2_floor_us"];
}

// Registered before main runs; nothing here touches the GPU.
[[maybe_unused]] const bool registered = [] {
  // tests/support/case_lists.h: each shape with the figure to meet on one H200, where one is set.
  for (const cases::DSparkStepShape& m : cases::kDSparkStepShapes) {
    const DSparkShape s{m.blocks, m.ranks, m.temperature, m.target_us};
    benchmark::RegisterBenchmark(s.name("DSparkStep").c_str(), dspark_step, s)->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
  // Simulated ranks share one GPU, so every DSparkStep case reads the whole of W2 per step:
  // one floor serves them all.
  benchmark::RegisterBenchmark(("DSparkW2ReadFloor/vocab:" + std::to_string(kVocab) + "/r:" + std::to_string(kRank) +
                                "/n:" + std::to_string(kDraft) + "/bf16").c_str(),
                               w2_read_floor)
      ->UseManualTime()->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
