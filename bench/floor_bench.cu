// Measured floors for shard_topk, timed the same way (graph replay, SPEC section 7):
//   LaunchFloor  an empty kernel with shard_topk's grid: what one launch costs per call in a
//                graph of back-to-back launches, before any byte is read
//   TopKGridRead shard_topk's structure with the selection taken out: as many CTAs a row (its
//                chunks are cut in proportion; shard_topk's are each ceil(vectors / CTAs), the
//                last ones shorter), the same 16-byte streaming loads, 4 per thread in flight,
//                a max per CTA, and the same ticket so that the last CTA of a row combines the
//                row's partial results. It measures that structure, not the hardware (the honest
//                floor is ReadFloor, plain_read_bench.cu); the distance from ShardTopK to it is
//                the selection's own cost.
// Names: TopKGridRead/tokens:16/vocab:124160/f32, bytes = the logits read.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "kernels/shard_topk.cuh"

namespace dfsel::bench {
namespace {

constexpr int kThreads = 256;  // shard_topk's CTA
constexpr int kVecs = 4;       // 16-byte loads in flight per thread

__global__ void __launch_bounds__(kThreads) empty_kernel(int* sink) {
  if (sink != nullptr && threadIdx.x == 0) *sink = blockIdx.x;  // never taken: sink is null
}

// Rows of n_cols floats, 16-byte aligned, n_cols a multiple of 4 (the shapes below).
__global__ void __launch_bounds__(kThreads) read_floor_kernel(const float4* rows, int64_t n_cols, int splits,
                                                              unsigned* counters, float* parts, float* out) {
  __shared__ float warp_max[kThreads / 32];
  __shared__ int last;
  const int row = blockIdx.x / splits;
  const int split = blockIdx.x - row * splits;
  const int64_t nv = n_cols / 4;
  const float4* p = rows + row * nv;
  const int64_t vb = nv * split / splits, ve = nv * (split + 1) / splits;
  float m = -INFINITY;
  for (int64_t b = vb + threadIdx.x; b < ve; b += (int64_t)kVecs * kThreads) {
    float4 v[kVecs];
#pragma unroll
    for (int u = 0; u < kVecs; ++u) {
      const int64_t i = b + (int64_t)u * kThreads;
      v[u] = i < ve ? __ldcs(p + i) : make_float4(-INFINITY, -INFINITY, -INFINITY, -INFINITY);
    }
#pragma unroll
    for (int u = 0; u < kVecs; ++u) m = fmaxf(m, fmaxf(fmaxf(v[u].x, v[u].y), fmaxf(v[u].z, v[u].w)));
  }
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float c = warp_max[0];
    for (int w = 1; w < kThreads / 32; ++w) c = fmaxf(c, warp_max[w]);
    if (splits == 1) {
      out[row] = c;
      last = 0;
    } else {
      parts[blockIdx.x] = c;
      __threadfence();
      last = atomicAdd(counters + row, 1u) == (unsigned)splits - 1u;
      if (last) {
        counters[row] = 0u;
        __threadfence();
      }
    }
  }
  __syncthreads();
  if (!last) return;
  float c = -INFINITY;
  for (int s = threadIdx.x; s < splits; s += kThreads) c = fmaxf(c, __ldcg(parts + (size_t)row * splits + s));
  for (int o = 16; o > 0; o >>= 1) c = fmaxf(c, __shfl_xor_sync(0xffffffffu, c, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = c;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) c = fmaxf(c, warp_max[w]);
    out[row] = fmaxf(c, warp_max[0]);
  }
}

// shard_topk's CTAs per row for rows x vocab F32, K = 16, the top-K alone on the GPU.
int topk_splits(int32_t rows, int64_t vocab, int sms) {
  cuda::ShardTopKArgs a{};
  a.type = DFSEL_TYPE_F32;
  a.n_cols = vocab;
  a.n_rows = rows;
  a.k = 16;
  return cuda::shard_topk_splits(a, sms);
}

std::string shape_name(const char* family, int32_t rows, int64_t vocab) {
  return std::string(family) + "/tokens:" + std::to_string(rows) + "/vocab:" + std::to_string(vocab) + "/f32";
}

void launch_floor(benchmark::State& state, int32_t rows, int64_t vocab) {
  const int grid = rows * topk_splits(rows, vocab, device_sms());
  state.counters["ctas"] = grid;
  time_graph(state, 1, 0.0, [&](int, cudaStream_t st) {
    empty_kernel<<<grid, kThreads, 0, st>>>(nullptr);
    return cudaGetLastError();
  });
}

// splits = 0: shard_topk's own split count for the shape.
void read_floor(benchmark::State& state, int32_t rows, int64_t vocab, int forced_splits) {
  const size_t bytes = (size_t)rows * vocab * 4;
  const int copies = rotation_copies(bytes);
  std::vector<std::unique_ptr<DeviceMem>> in;
  if (!hashed_logits(state, rows, vocab, copies, &in)) return;
  const int splits = forced_splits > 0 ? forced_splits : topk_splits(rows, vocab, device_sms());
  DeviceMem counters, parts, out;
  if (!cuda_ok(state, counters.alloc((size_t)rows * 4), "cudaMalloc") ||
      !cuda_ok(state, parts.alloc((size_t)rows * splits * 4), "cudaMalloc") ||
      !cuda_ok(state, out.alloc((size_t)rows * 4), "cudaMalloc") ||
      !cuda_ok(state, cudaMemset(counters.get(), 0, (size_t)rows * 4), "cudaMemset") ||
      !cuda_ok(state, cudaDeviceSynchronize(), "filling the inputs"))
    return;
  state.counters["ctas"] = rows * splits;
  time_graph(state, copies, (double)bytes, [&](int copy, cudaStream_t st) {
    read_floor_kernel<<<rows * splits, kThreads, 0, st>>>(in[copy]->as<float4>(), vocab, splits, counters.as<unsigned>(),
                                                          parts.as<float>(), out.as<float>());
    return cudaGetLastError();
  });
}

// Registered before main runs; nothing here touches the GPU.
[[maybe_unused]] const bool registered = [] {
  for (int32_t rows : {1, 16, 256})
    for (int64_t v : {(int64_t)124160, (int64_t)248320}) {
      benchmark::RegisterBenchmark(shape_name("LaunchFloor", rows, v).c_str(), launch_floor, rows, v)
          ->UseManualTime()->Unit(benchmark::kMicrosecond);
      benchmark::RegisterBenchmark(shape_name("TopKGridRead", rows, v).c_str(), read_floor, rows, v, 0)
          ->UseManualTime()->Unit(benchmark::kMicrosecond);
    }
  // Other grids for few rows: whether a split count other than shard_topk's reads faster.
  for (int32_t rows : {1, 16})
    for (int splits : {8, 16, 24, 33, 48, 66, 132, 264})
      benchmark::RegisterBenchmark((shape_name("TopKGridReadSplits", rows, 124160) + "/splits:" + std::to_string(splits)).c_str(),
                                   read_floor, rows, (int64_t)124160, splits)
          ->UseManualTime()->Unit(benchmark::kMicrosecond);
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
