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
// Every host-timed iteration starts with the inputs out of L2 (a read of 2x the L2 first, not
// timed). Each benchmark reports its median over the iterations in the counter median_us.
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "../bench_data.cuh"
#include "../bench_util.cuh"
#include "dfsel/dfsel.h"
#include "dfsel/ggml.h"
#include "tests/ggml/llama_selector.h"

namespace dfsel::bench {
namespace {

constexpr int64_t kV = 248320, kE = 5120;
constexpr int kRank = 256, kTopK = 16, kBlock = 16;

using Clock = std::chrono::steady_clock;

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Reads n 16-byte words; writes only if their xor is a value it never is, so nothing is dirty
// in L2 afterwards.
__global__ void read_through(const uint4* p, size_t n, unsigned* sink) {
  unsigned x = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    x ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (x == 0x9e3779b9u && sink) *sink = x;
}

// A buffer of 2x the L2 read before each host-timed iteration, so the inputs come from HBM. Read,
// not written: a write would leave the L2 full of dirty lines for the step to write back.
struct L2Flush {
  void* p = nullptr;
  unsigned* sink = nullptr;
  size_t n = 2 * kL2Bytes;
  L2Flush() {
    cudaMalloc(&p, n);
    cudaMalloc(&sink, sizeof(unsigned));
    cudaMemset(p, 0x5a, n);
    cudaDeviceSynchronize();
  }
  ~L2Flush() {
    cudaFree(p);
    cudaFree(sink);
  }
  void operator()() const {
    read_through<<<1056, 256>>>(static_cast<const uint4*>(p), n / sizeof(uint4), sink);
    cudaDeviceSynchronize();
  }
};

// The draft's tensors on ggml-cuda device 0, the in-graph selector's graph over them, and
// dfsel's plan: everything one blocks value needs.
struct Setup {
  ggml_backend_dev_t dev = nullptr;
  ggml_backend_t backend = nullptr;
  ggml_context *wctx = nullptr, *ictx = nullptr, *gctx = nullptr;
  ggml_backend_buffer_t wbuf = nullptr, ibuf = nullptr;
  ggml_gallocr_t galloc = nullptr;
  ggml_cgraph* graph = nullptr;
  ggml_tensor *e_prev = nullptr, *e_next = nullptr, *w_h = nullptr;
  std::vector<ggml_tensor*> logits;  // rotated copies, {V, n_tokens} F32
  ggml_tensor *embd = nullptr, *tokens = nullptr, *anchors = nullptr;
  ggml_tensor *packed = nullptr, *path = nullptr, *n_emitted = nullptr;
  dfsel_plan* plan = nullptr;
  cudaStream_t stream = nullptr;
  std::string error;

  ~Setup() {
    if (plan) dfsel_plan_destroy(plan);
    if (stream) cudaStreamDestroy(stream);
    if (galloc) ggml_gallocr_free(galloc);
    if (gctx) ggml_free(gctx);
    if (ibuf) ggml_backend_buffer_free(ibuf);
    if (wbuf) ggml_backend_buffer_free(wbuf);
    if (ictx) ggml_free(ictx);
    if (wctx) ggml_free(wctx);
    if (backend) ggml_backend_free(backend);
  }

  dfsel_ggml_step step(int copy) const {
    dfsel_ggml_step s{};
    s.logits = logits[(size_t)copy];
    s.hidden = embd;
    s.anchors = anchors;
    s.packed = packed;
    s.path = path;
    s.n_emitted = n_emitted;
    return s;
  }

  bool build(int blocks, int copies) {
    const int64_t T = (int64_t)blocks * kBlock;
    dev = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_GPU);
    if (!dev) return fail("ggml has no GPU device (ggml-cuda not built in?)");
    backend = ggml_backend_dev_init(dev, nullptr);
    if (!backend) return fail("ggml_backend_dev_init failed");
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);

    ggml_init_params wp{16 * ggml_tensor_overhead(), nullptr, true};
    wctx = ggml_init(wp);
    e_prev = named(ggml_new_tensor_2d(wctx, GGML_TYPE_BF16, kRank, kV), "selector_predecessor.weight");
    e_next = named(ggml_new_tensor_2d(wctx, GGML_TYPE_BF16, kRank, kV), "selector_successor.weight");
    w_h = named(ggml_new_tensor_2d(wctx, GGML_TYPE_BF16, kE, kRank), "selector_hidden.weight");
    wbuf = ggml_backend_alloc_ctx_tensors_from_buft(wctx, buft);
    if (!wbuf) return fail("weights: ggml-cuda buffer allocation failed");

    ggml_init_params ip{(size_t)(copies + 8) * ggml_tensor_overhead(), nullptr, true};
    ictx = ggml_init(ip);
    for (int c = 0; c < copies; ++c) logits.push_back(named(ggml_new_tensor_2d(ictx, GGML_TYPE_F32, kV, T), "t_logits"));
    embd = named(ggml_new_tensor_2d(ictx, GGML_TYPE_F32, kE, T), "t_embd");
    tokens = named(ggml_new_tensor_1d(ictx, GGML_TYPE_I32, T), "inp_tokens");
    anchors = named(ggml_new_tensor_1d(ictx, GGML_TYPE_I32, blocks), "anchors");
    packed = named(ggml_new_tensor_2d(ictx, GGML_TYPE_F32, kE, T), "dflash2_lattice");
    path = named(ggml_new_tensor_2d(ictx, GGML_TYPE_I32, kBlock - 1, blocks), "path");
    n_emitted = named(ggml_new_tensor_1d(ictx, GGML_TYPE_I32, blocks), "n_emitted");
    ibuf = ggml_backend_alloc_ctx_tensors_from_buft(ictx, buft);
    if (!ibuf) return fail("inputs: ggml-cuda buffer allocation failed");

    // Values as dfsel_bench's SelectorStep draws them.
    fill_hashed(e_prev->data, DFSEL_TYPE_BF16, (size_t)kRank * kV, 0.1f, 11);
    fill_hashed(e_next->data, DFSEL_TYPE_BF16, (size_t)kRank * kV, 0.1f, 12);
    fill_hashed(w_h->data, DFSEL_TYPE_BF16, (size_t)kRank * kE, 0.02f, 13);
    fill_hashed(embd->data, DFSEL_TYPE_F32, (size_t)T * kE, 1.0f, 14);
    for (int c = 0; c < copies; ++c) fill_hashed(logits[(size_t)c]->data, DFSEL_TYPE_F32, (size_t)T * kV, 8.0f, 100 + c * 7919);
    std::vector<int32_t> tok((size_t)T), anc((size_t)blocks);
    for (int64_t t = 0; t < T; ++t) tok[(size_t)t] = (int32_t)(hash64((uint64_t)t) % (uint64_t)kV);
    for (int b = 0; b < blocks; ++b) anc[(size_t)b] = tok[(size_t)b * kBlock];
    ggml_backend_tensor_set(tokens, tok.data(), 0, ggml_nbytes(tokens));
    ggml_backend_tensor_set(anchors, anc.data(), 0, ggml_nbytes(anchors));
    if (cudaDeviceSynchronize() != cudaSuccess) return fail("filling the inputs failed");

    // The in-graph selector over copy 0's logits.
    ggml_init_params gp{4096 * ggml_tensor_overhead() + ggml_graph_overhead_custom(8192, false), nullptr, true};
    gctx = ggml_init(gp);
    const test::LlamaSelectorInputs in{logits[0], embd, tokens, e_prev, e_next, w_h};
    ggml_tensor* out = test::build_llama_selector(gctx, in, kTopK, kBlock, blocks);
    graph = ggml_new_graph_custom(gctx, 8192, false);
    ggml_build_forward_expand(graph, out);
    galloc = ggml_gallocr_new(buft);
    if (!ggml_gallocr_alloc_graph(galloc, graph)) return fail("the in-graph selector's graph could not be allocated");

    dfsel_plan_desc desc{};
    desc.config = dfsel_config{kV, kE, kRank, kTopK, kBlock, 1.0f, 0.0f, blocks};
    desc.shard = dfsel_shard{0, 1, 0, kV};
    desc.backend = DFSEL_BACKEND_CUDA;
    char msg[512];
    if (dfsel_ggml_tensor(e_prev, &desc.e_prev, msg, sizeof msg) != DFSEL_SUCCESS ||
        dfsel_ggml_tensor(e_next, &desc.e_next, msg, sizeof msg) != DFSEL_SUCCESS ||
        dfsel_ggml_tensor(w_h, &desc.w_h, msg, sizeof msg) != DFSEL_SUCCESS)
      return fail(msg);
    if (dfsel_plan_create(&desc, &plan, msg, sizeof msg) != DFSEL_SUCCESS) return fail(msg);
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return fail("cudaStreamCreate");
    return true;
  }

  bool run_dfsel(int copy, cudaStream_t st) {
    const dfsel_ggml_step s = step(copy);
    char msg[512];
    if (dfsel_ggml_run(plan, &s, st, msg, sizeof msg) == DFSEL_SUCCESS) return true;
    error = msg;
    return false;
  }

 private:
  static ggml_tensor* named(ggml_tensor* t, const char* name) {
    ggml_set_name(t, name);
    return t;
  }
  bool fail(const std::string& why) {
    error = why;
    return false;
  }
};

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
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal);
  const bool captured = s.run_dfsel(0, s.stream);
  if (cudaStreamEndCapture(s.stream, &g) != cudaSuccess || !captured ||
      cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
    return state.SkipWithError(("capturing the step failed: " + s.error).c_str());
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
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
  if (!ok) return state.SkipWithError(dfsel_plan_last_error(s.plan));
  report(state, t, blocks);
}

// Where the time of a step between computes goes, each timed alone (host clock, inputs out of
// L2): `what` picks the part.
//   plan_eager   dfsel_plan_run on the same views (no ggml tensors), then dfsel_plan_check
//   graph_sync   the captured step replayed, then cudaStreamSynchronize (no error report)
//   graph_gpu    the captured step replayed between two events: its GPU time when isolated
//   checks       dfsel_ggml_run's memory checks alone: dfsel_plan_check_memory of each tensor
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
  cudaGraph_t g = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t e0 = nullptr, e1 = nullptr;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  cudaStreamBeginCapture(s.stream, cudaStreamCaptureModeThreadLocal);
  const bool captured = s.run_dfsel(0, s.stream);
  if (cudaStreamEndCapture(s.stream, &g) != cudaSuccess || !captured || cudaGraphInstantiate(&exec, g, 0) != cudaSuccess)
    return state.SkipWithError("capturing the step failed");
  const ggml_tensor* tensors[6] = {st.logits, st.hidden, st.anchors, st.packed, st.path, st.n_emitted};
  auto once = [&]() -> double {  // seconds
    if (what == "plan_eager") {
      const auto t0 = Clock::now();
      if (dfsel_plan_run(s.plan, &in, &out, s.stream) != DFSEL_SUCCESS || dfsel_plan_check(s.plan, s.stream) != DFSEL_SUCCESS)
        return -1;
      return std::chrono::duration<double>(Clock::now() - t0).count();
    }
    if (what == "graph_sync") {
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
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(g);
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

const bool registered = [] {
  for (int blocks : {1, 4, 16, 64}) {
    const std::string b = "/blocks:" + std::to_string(blocks);
    benchmark::RegisterBenchmark(("InGraphSelector" + b).c_str(), in_graph_selector, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfselGgml/eager" + b).c_str(), dfsel_eager, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfselGgml/graph" + b).c_str(), dfsel_graph, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("DfselGgml/replayed" + b).c_str(), dfsel_replayed, blocks)
        ->UseManualTime()->Unit(benchmark::kMicrosecond);
    for (const char* part : {"plan_eager", "graph_sync", "graph_gpu", "checks"})
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
