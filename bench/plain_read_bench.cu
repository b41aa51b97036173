// ReadFloor: the honest floor of a top-K pass, the fastest plain read of the same logits this
// GPU gives. A kernel reads every logit once with wide streaming loads (4 in flight per thread)
// and folds one max per row through an atomic; nothing else. The grid (1 to 264 CTAs a row)
// and the load width (16 or 32 bytes a thread per load step) are swept for each shape and the
// best is timed, so the figure is the hardware's, not any one kernel structure's.
// Names: ReadFloor/tokens:16/vocab:124160/f32; counters ctas_per_row and load_bytes say which
// configuration won; bytes = the logits read.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "tests/support/case_lists.h"

namespace dfsel::bench {
namespace {

constexpr int kThreads = 256;
constexpr int kInFlight = 4;

// Larger floats have larger keys as unsigned: an atomicMax on keys is a max on floats.
__device__ __forceinline__ unsigned float_key(float f) {
  const unsigned u = __float_as_uint(f);
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// W float4 per load step per thread (16 or 32 bytes). Rows of n_cols floats, 16-byte aligned,
// n_cols a multiple of 4 * W (the shapes below).
template <int W>
__global__ void __launch_bounds__(kThreads) plain_read_kernel(const float4* rows, int64_t n_cols, int ctas,
                                                              unsigned* out) {
  __shared__ float warp_max[kThreads / 32];
  const int row = blockIdx.x / ctas, part = blockIdx.x - row * ctas;
  const int64_t nv = n_cols / (4 * W);
  const float4* p = rows + row * (n_cols / 4);
  const int64_t vb = nv * part / ctas, ve = nv * (part + 1) / ctas;
  float m = -INFINITY;
  for (int64_t b = vb + threadIdx.x; b < ve; b += (int64_t)kInFlight * kThreads) {
    float4 v[kInFlight][W];
#pragma unroll
    for (int u = 0; u < kInFlight; ++u) {
      const int64_t i = b + (int64_t)u * kThreads;
#pragma unroll
      for (int w = 0; w < W; ++w)
        v[u][w] = i < ve ? __ldcs(p + i * W + w) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int u = 0; u < kInFlight; ++u)
#pragma unroll
      for (int w = 0; w < W; ++w) m = fmaxf(m, fmaxf(fmaxf(v[u][w].x, v[u][w].y), fmaxf(v[u][w].z, v[u][w].w)));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) m = fmaxf(m, warp_max[w]);
    atomicMax(out + row, float_key(fmaxf(m, warp_max[0])));
  }
}

cudaError_t launch(int w, const float4* in, int32_t rows, int64_t vocab, int ctas, unsigned* out, cudaStream_t st) {
  if (w == 2) plain_read_kernel<2><<<rows * ctas, kThreads, 0, st>>>(in, vocab, ctas, out);
  else plain_read_kernel<1><<<rows * ctas, kThreads, 0, st>>>(in, vocab, ctas, out);
  return cudaGetLastError();
}

// Median time per call of `replays` replays of a graph of the calls, in seconds.
double graph_median(int copies, int replays, const std::function<cudaError_t(int, cudaStream_t)>& enqueue) {
  const int calls = copies * ((kMinGraphCalls + copies - 1) / copies);
  cudaStream_t st = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaEvent_t a = nullptr, b = nullptr;
  double median = -1.0;
  if (cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking) == cudaSuccess &&
      cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal) == cudaSuccess) {
    cudaError_t e = cudaSuccess;
    for (int i = 0; i < calls && e == cudaSuccess; ++i) e = enqueue(i % copies, st);
    if (cudaStreamEndCapture(st, &graph) == cudaSuccess && e == cudaSuccess &&
        cudaGraphInstantiate(&exec, graph, 0) == cudaSuccess && cudaEventCreate(&a) == cudaSuccess &&
        cudaEventCreate(&b) == cudaSuccess && cudaGraphLaunch(exec, st) == cudaSuccess) {
      std::vector<double> t;
      for (int r = 0; r < replays; ++r) {
        cudaEventRecord(a, st);
        for (int q = 0; q < replays_per_timing(); ++q) cudaGraphLaunch(exec, st);
        cudaEventRecord(b, st);
        if (cudaEventSynchronize(b) != cudaSuccess) break;
        float ms = 0.0f;
        cudaEventElapsedTime(&ms, a, b);
        t.push_back(ms * 1e-3 / ((double)calls * replays_per_timing()));
      }
      if (!t.empty()) {
        std::nth_element(t.begin(), t.begin() + t.size() / 2, t.end());
        median = t[t.size() / 2];
      }
    }
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (graph) cudaGraphDestroy(graph);
  if (a) cudaEventDestroy(a);
  if (b) cudaEventDestroy(b);
  if (st) cudaStreamDestroy(st);
  return median;
}

void read_floor(benchmark::State& state, int32_t rows, int64_t vocab) {
  const size_t bytes = (size_t)rows * vocab * 4;
  const int copies = rotation_copies(bytes);
  std::vector<std::unique_ptr<DeviceMem>> in;
  if (!hashed_logits(state, rows, vocab, copies, &in)) return;
  DeviceMem out;
  if (!cuda_ok(state, out.alloc((size_t)rows * 4), "cudaMalloc") ||
      !cuda_ok(state, cudaMemset(out.get(), 0, (size_t)rows * 4), "cudaMemset") ||
      !cuda_ok(state, cudaDeviceSynchronize(), "filling the inputs"))
    return;
  int best_ctas = 1, best_w = 1;
  double best = 1e30;
  for (int w : {1, 2})
    for (int ctas : {1, 2, 4, 8, 16, 24, 33, 48, 66, 99, 132, 198, 264}) {
      if (rows * ctas > 4 * 132 * 16 || (int64_t)ctas * kThreads * 4 * w > vocab) continue;
      const double t = graph_median(copies, 30, [&](int copy, cudaStream_t st) {
        return launch(w, in[copy]->as<float4>(), rows, vocab, ctas, out.as<unsigned>(), st);
      });
      if (t > 0 && t < best) best = t, best_ctas = ctas, best_w = w;
    }
  state.counters["ctas_per_row"] = best_ctas;
  state.counters["load_bytes"] = 16 * best_w;
  time_graph(state, copies, (double)bytes, [&](int copy, cudaStream_t st) {
    return launch(best_w, in[copy]->as<float4>(), rows, vocab, best_ctas, out.as<unsigned>(), st);
  });
}

// Registered before main runs; nothing here touches the GPU.
[[maybe_unused]] const bool registered = [] {
  // Every F32 ShardTopK shape (tests/support/case_lists.h); a BF16 shape reads the bytes of
  // the F32 one of half the vocabulary.
  for (int32_t rows : cases::kShardTopKTokens)
    for (int64_t v : cases::kShardTopKVocabs)
      benchmark::RegisterBenchmark(("ReadFloor/tokens:" + std::to_string(rows) + "/vocab:" + std::to_string(v) + "/f32").c_str(),
                                   read_floor, rows, v)
          ->UseManualTime()->Unit(benchmark::kMicrosecond);
  // The bytes of 16 x 124160 BF16 logits, read as F32: the floor of the BF16 top-K.
  benchmark::RegisterBenchmark("ReadFloor/tokens:16/vocab:62080/f32", read_floor, 16, (int64_t)62080)
      ->UseManualTime()->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
