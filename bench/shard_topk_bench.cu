// shard_topk against its peers (SPEC section 7); every name carries K:
//   ShardTopK             dfsel's one-launch top-K (K = 1, 16, 64)
//   ShardTopKSplits       the same with the CTAs a row forced (/splits:N): the sweep the split
//                         heuristic is tuned on
//   CubSegmentedSortTopK  sort every row with CUB's segmented radix sort, keep the first K
//                         (the sort-based top-K: the full sort a generic argsort pays for)
//   HostTopK              copy the rows to pinned host memory, top-K on the host (the CPU
//                         selector path; dfsel's CPU reference does the selection)
// Names carry the shape: ShardTopK/tokens:16/vocab:124160/f32/k:16. bytes = the logits read.
#include <cub/device/device_segmented_radix_sort.cuh>
#include <cuda_bf16.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"
#include "host/reference/cpu_reference.h"
#include "kernels/shard_topk.cuh"
#include "tests/support/case_lists.h"

namespace dfsel::bench {
namespace {

struct Shape {
  int32_t tokens;
  int64_t vocab;
  dfsel_type type;
  int32_t k;
  int32_t splits = 0;  // 0: shard_topk's heuristic; > 0 forced (the heuristic's tuning sweep)

  size_t elem() const { return elem_bytes(type); }
  size_t bytes() const { return (size_t)tokens * vocab * elem(); }
  std::string name(const char* family) const {
    return std::string(family) + "/tokens:" + std::to_string(tokens) + "/vocab:" + std::to_string(vocab) + "/" +
           (type == DFSEL_TYPE_F32 ? "f32" : type == DFSEL_TYPE_BF16 ? "bf16" : "f16") + "/k:" + std::to_string(k) +
           (splits > 0 ? "/splits:" + std::to_string(splits) : "");
  }
};

__global__ void fill_ids(int32_t* ids, size_t n, int64_t vocab, int32_t* offsets, int32_t rows) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    ids[i] = (int32_t)(i % vocab);
    if (i <= (size_t)rows && i * vocab <= n) offsets[i] = (int32_t)(i * vocab);
  }
}

// `copies` inputs of the shape, each filled with its own values.
bool make_inputs(benchmark::State& state, const Shape& s, int copies, std::vector<std::unique_ptr<DeviceMem>>* in) {
  for (int c = 0; c < copies; ++c) {
    in->push_back(std::make_unique<DeviceMem>());
    if (!cuda_ok(state, in->back()->alloc(s.bytes()), "cudaMalloc of the inputs") ||
        !cuda_ok(state, fill_hashed(in->back()->get(), s.type, (size_t)s.tokens * s.vocab, 12.0f, 1234567ull * (c + 1)),
                 "filling the inputs"))
      return false;
  }
  return cuda_ok(state, cudaDeviceSynchronize(), "filling the inputs");
}

void shard_topk_bench(benchmark::State& state, Shape s) {
  const int copies = rotation_copies(s.bytes());
  std::vector<std::unique_ptr<DeviceMem>> in;
  if (!make_inputs(state, s, copies, &in)) return;
  const int sms = device_sms();
  const size_t scratch_bytes = std::max<size_t>(
      s.splits > 0 ? cuda::shard_topk_scratch_bytes_split(s.tokens, s.k, s.splits, sms)
                   : cuda::shard_topk_scratch_bytes(s.tokens, s.k, s.vocab, sms), 256);
  DeviceMem out, scratch;
  if (!cuda_ok(state, out.alloc((size_t)s.tokens * s.k * sizeof(CandRec)), "cudaMalloc") ||
      !cuda_ok(state, scratch.alloc(scratch_bytes), "cudaMalloc") ||
      !cuda_ok(state, cudaMemset(scratch.get(), 0, scratch_bytes), "cudaMemset"))
    return;
  cuda::ShardTopKArgs a{};
  a.type = s.type;
  a.n_cols = s.vocab;
  a.row_stride = s.vocab * s.elem();
  a.map = RowMap{1, 1, 0};
  a.n_rows = s.tokens;
  a.k = s.k;
  a.id_offset = 0;
  a.out = out.as<CandRec>();
  a.out_stride = (size_t)s.k;
  a.scratch = scratch.get();
  a.splits = s.splits;
  time_graph(state, copies, (double)s.bytes(), [&](int copy, cudaStream_t st) {
    a.logits = in[copy]->get();
    return cuda::shard_topk(a, sms, st);
  });
}

template <typename Key>
cudaError_t cub_sort(void* temp, size_t& temp_bytes, const Key* keys_in, Key* keys_out, const int32_t* ids_in,
                     int32_t* ids_out, const Shape& s, const int32_t* offsets, cudaStream_t st) {
  return cub::DeviceSegmentedRadixSort::SortPairsDescending(temp, temp_bytes, keys_in, keys_out, ids_in, ids_out,
                                                            (int64_t)s.tokens * s.vocab, (int64_t)s.tokens, offsets,
                                                            offsets + 1, 0, (int)sizeof(Key) * 8, st);
}

// Sorts every full row (keys = logits, values = ids) and copies the first K of each: the sort's
// temporary storage is allocated before timing, and both steps are in the graph.
void cub_bench(benchmark::State& state, Shape s) {
  const int copies = rotation_copies(s.bytes());
  std::vector<std::unique_ptr<DeviceMem>> in;
  if (!make_inputs(state, s, copies, &in)) return;
  const size_t n = (size_t)s.tokens * s.vocab;
  DeviceMem keys_out, ids_in, ids_out, offsets, top_keys, top_ids;
  if (!cuda_ok(state, keys_out.alloc(s.bytes()), "cudaMalloc") || !cuda_ok(state, ids_in.alloc(n * 4), "cudaMalloc") ||
      !cuda_ok(state, ids_out.alloc(n * 4), "cudaMalloc") ||
      !cuda_ok(state, offsets.alloc(((size_t)s.tokens + 1) * 4), "cudaMalloc") ||
      !cuda_ok(state, top_keys.alloc((size_t)s.tokens * s.k * s.elem()), "cudaMalloc") ||
      !cuda_ok(state, top_ids.alloc((size_t)s.tokens * s.k * 4), "cudaMalloc"))
    return;
  fill_ids<<<1024, 256>>>(ids_in.as<int32_t>(), n, s.vocab, offsets.as<int32_t>(), s.tokens);
  const bool f32 = s.type == DFSEL_TYPE_F32;
  size_t temp_bytes = 0;
  cudaError_t e = f32 ? cub_sort<float>(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, s, nullptr, 0)
                      : cub_sort<__nv_bfloat16>(nullptr, temp_bytes, nullptr, nullptr, nullptr, nullptr, s, nullptr, 0);
  if (!cuda_ok(state, e, "CUB temporary storage size") || !cuda_ok(state, cudaDeviceSynchronize(), "fill_ids")) return;
  DeviceMem temp;
  if (!cuda_ok(state, temp.alloc(temp_bytes), "cudaMalloc of CUB's temporary storage")) return;
  time_graph(state, copies, (double)s.bytes(), [&](int copy, cudaStream_t st) {
    size_t tb = temp_bytes;
    const int32_t* off = offsets.as<int32_t>();
    cudaError_t r =
        f32 ? cub_sort<float>(temp.get(), tb, in[copy]->as<float>(), keys_out.as<float>(), ids_in.as<int32_t>(),
                              ids_out.as<int32_t>(), s, off, st)
            : cub_sort<__nv_bfloat16>(temp.get(), tb, in[copy]->as<__nv_bfloat16>(), keys_out.as<__nv_bfloat16>(),
                                      ids_in.as<int32_t>(), ids_out.as<int32_t>(), s, off, st);
    if (r != cudaSuccess) return r;
    r = cudaMemcpy2DAsync(top_keys.get(), s.k * s.elem(), keys_out.get(), s.vocab * s.elem(), s.k * s.elem(), s.tokens,
                          cudaMemcpyDeviceToDevice, st);
    if (r != cudaSuccess) return r;
    return cudaMemcpy2DAsync(top_ids.get(), s.k * 4, ids_out.get(), s.vocab * 4, s.k * 4, s.tokens, cudaMemcpyDeviceToDevice,
                             st);
  });
}

// The rows to pinned host memory, then the CPU reference's top-K (a 64-bit key per element and
// a partial sort per row); wall clock, copy included.
void host_bench(benchmark::State& state, Shape s) {
  std::vector<std::unique_ptr<DeviceMem>> in;
  if (!make_inputs(state, s, 1, &in)) return;
  void* host = nullptr;
  if (!cuda_ok(state, cudaMallocHost(&host, s.bytes()), "cudaMallocHost")) return;
  std::vector<CandRec> out((size_t)s.tokens * s.k);
  dfsel_tensor t{};
  t.data = host;
  t.type = s.type;
  t.ne[0] = s.vocab;
  t.ne[1] = s.tokens;
  t.nb[0] = s.elem();
  t.nb[1] = s.vocab * s.elem();
  time_host(state, (double)s.bytes(), [&] {
    if (cudaMemcpy(host, in[0]->get(), s.bytes(), cudaMemcpyDeviceToHost) != cudaSuccess) return false;
    ref::shard_topk(t, RowMap{1, 1, 0}, s.tokens, s.k, 0, out.data());
    benchmark::DoNotOptimize(out.data());
    return true;
  });
  cudaFreeHost(host);
}

void add(const char* family, void (*fn)(benchmark::State&, Shape), const Shape& s) {
  benchmark::RegisterBenchmark(s.name(family).c_str(), fn, s)->UseManualTime()->Unit(benchmark::kMicrosecond);
}

// Registered before main runs; nothing here touches the GPU.
[[maybe_unused]] const bool registered = [] {
  // The token and vocabulary grid the top-K test also checks (tests/support/case_lists.h).
  for (int32_t tokens : cases::kShardTopKTokens)
    for (int64_t v : cases::kShardTopKVocabs) add("ShardTopK", shard_topk_bench, {tokens, v, DFSEL_TYPE_F32, 16});
  add("ShardTopK", shard_topk_bench, {16, 124160, DFSEL_TYPE_BF16, 16});
  add("ShardTopK", shard_topk_bench, {1024, 248320, DFSEL_TYPE_BF16, 16});
  add("ShardTopK", shard_topk_bench, {16, 124160, DFSEL_TYPE_F32, 1});
  add("ShardTopK", shard_topk_bench, {16, 124160, DFSEL_TYPE_F32, 64});
  // The sweep the split heuristic is tuned on: each shape of the targets at several CTAs a row.
  struct Sweep {
    Shape shape;
    std::vector<int> splits;
  };
  const Sweep sweeps[] = {
      {{1, 124160, DFSEL_TYPE_F32, 16}, {16, 24, 32, 48, 60}},
      {{1, 248320, DFSEL_TYPE_F32, 16}, {32, 48, 64, 96, 121, 128}},
      {{16, 124160, DFSEL_TYPE_F32, 16}, {8, 16, 24, 33, 48, 60}},
      {{16, 248320, DFSEL_TYPE_F32, 16}, {16, 24, 33, 48, 66, 96, 121}},
      {{16, 124160, DFSEL_TYPE_BF16, 16}, {8, 16, 24, 33, 48, 60}},
      {{16, 124160, DFSEL_TYPE_F32, 1}, {16, 24, 33, 48, 60}},
      {{16, 124160, DFSEL_TYPE_F32, 64}, {8, 16, 24, 32}},
      {{256, 124160, DFSEL_TYPE_F32, 16}, {1, 2, 4, 8, 16}},
      {{256, 248320, DFSEL_TYPE_F32, 16}, {1, 2, 4, 8, 16}},
  };
  for (const Sweep& w : sweeps)
    for (int splits : w.splits) {
      Shape s = w.shape;
      s.splits = splits;
      add("ShardTopKSplits", shard_topk_bench, s);
    }
  // The peers take milliseconds to seconds a call: the shapes of SPEC section 7 and a few more.
  for (int32_t tokens : cases::kShardTopKTokens)
    for (int64_t v : cases::kShardTopKVocabs)
      if (tokens <= 1024) add("CubSegmentedSortTopK", cub_bench, {tokens, v, DFSEL_TYPE_F32, 16});
  add("CubSegmentedSortTopK", cub_bench, {16, 124160, DFSEL_TYPE_BF16, 16});
  for (int32_t tokens : {1, 16, 256})
    for (int64_t v : {(int64_t)124160, (int64_t)248320}) add("HostTopK", host_bench, {tokens, v, DFSEL_TYPE_F32, 16});
  return true;
}();

}  // namespace
}  // namespace dfsel::bench
