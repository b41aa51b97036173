// What dfsel_ggml_bench's benchmarks share: the SelectorStep shape's tensors on ggml-cuda
// device 0, llama.cpp's in-graph selector graph over them, dfsel's plan, and the read that
// takes the inputs out of L2 before a host-timed iteration.
#pragma once

#include <cuda_runtime.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "../bench_data.cuh"
#include "../bench_util.cuh"
#include "dfsel/dfsel.h"
#include "dfsel/ggml.h"
#include "tests/ggml/llama_selector.h"

namespace dfsel::bench {

constexpr int64_t kV = 248320, kE = 5120;
constexpr int kRank = 256, kTopK = 16, kBlock = 16;

using Clock = std::chrono::steady_clock;

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Reads n 16-byte words; writes only if their xor is a value it never is, so nothing is dirty
// in L2 afterwards.
static __global__ void read_through(const uint4* p, size_t n, unsigned* sink) {
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
  cudaGraphExec_t exec = nullptr;  // capture()'s
  std::string error;

  ~Setup() {
    if (exec) cudaGraphExecDestroy(exec);
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

  // Captures what enqueue(stream) enqueues on this set-up's stream as the CUDA graph exec (the
  // step by default), instantiated once and replayed by the host-timed benchmarks.
  bool capture(bool (*enqueue)(Setup&, cudaStream_t) = nullptr) {
    cudaGraph_t g = nullptr;
    if (exec) cudaGraphExecDestroy(exec);
    exec = nullptr;
    if (cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal) != cudaSuccess) return fail("capture failed");
    const bool ok = enqueue ? enqueue(*this, stream) : run_dfsel(0, stream);
    const bool made = cudaStreamEndCapture(stream, &g) == cudaSuccess && ok && cudaGraphInstantiate(&exec, g, 0) == cudaSuccess;
    if (g) cudaGraphDestroy(g);
    return made || fail("capturing the step failed: " + error);
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

}  // namespace dfsel::bench
