// agree_records: each CTA sums the digest terms (kernels/common/digest.cuh) of one drafted row
// of its block, adds them to the block's sum (a sum mod 2^64: any order gives the same bits),
// and the block's last CTA, by its ticket, writes the record and resets the scratch.
#include "kernels/agree_records.cuh"

#include "kernels/cluster_launch.cuh"
#include "kernels/common/agree_record.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/common/digest.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/common/warp.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {
namespace {

// The terms of one row's words, a thread's share: 8-byte words from 8-byte aligned rows loaded
// kAgreeLoads at a time before any is mixed, so that their latencies overlap.
__device__ __forceinline__ uint64_t row_terms(const uint8_t* row, size_t n, uint64_t k, int tid) {
  const size_t words = n / 8;
  if (((uintptr_t)row & 7) != 0 || n % 8 != 0) return digest_row(row, n, k, tid, kAgreeThreads);
  const uint64_t* w64 = reinterpret_cast<const uint64_t*>(row);
  uint64_t h = 0;
  for (size_t w0 = tid; w0 < words; w0 += (size_t)kAgreeLoads * kAgreeThreads) {
    uint64_t x[kAgreeLoads];
#pragma unroll
    for (int u = 0; u < kAgreeLoads; ++u) {
      const size_t w = w0 + (size_t)u * kAgreeThreads;
      x[u] = w < words ? __ldg(reinterpret_cast<const unsigned long long*>(w64 + w)) : 0;
    }
#pragma unroll
    for (int u = 0; u < kAgreeLoads; ++u) {
      const size_t w = w0 + (size_t)u * kAgreeThreads;
      if (w < words) h += digest_term((k << 32) + w, x[u]);
    }
  }
  return h;
}

// CTA (b, p): block b's drafted row p.
__global__ void __launch_bounds__(kAgreeThreads) agree_kernel(const AgreeRecordsArgs a) {
  chain_release();
  __shared__ uint64_t warp_sum[kAgreeThreads / 32];
  const int b = blockIdx.x, p = blockIdx.y, tid = threadIdx.x;
  const int32_t anchor = tid == 0 ? a.anchors[b] : 0;
  const size_t n = row_bytes(a.h_type, a.n_embd);
  uint64_t h = row_terms(a.hidden + map_row(a.map, (int64_t)b * a.L + p) * a.h_row_stride, n, (uint64_t)p, tid);
  for (int off = 16; off > 0; off >>= 1) h += shfl_down_u64(h, off);
  if ((tid & 31) == 0) warp_sum[tid >> 5] = h;
  __syncthreads();
  chain_wait();  // chained: completes after the kernels before it (none reads or writes this)
  if (tid != 0) return;
  for (int w = 1; w < kAgreeThreads / 32; ++w) h += warp_sum[w];
  atomicAdd((unsigned long long*)&a.sums[b], (unsigned long long)h);
  __threadfence();
  if (atomicAdd(&a.tickets[b], 1u) != (unsigned)gridDim.y - 1) return;
  __threadfence();
  const uint64_t total = atomicExch((unsigned long long*)&a.sums[b], 0ull);
  a.tickets[b] = 0;
  const uint32_t hidden = digest_fold(total + digest_term(kDigestType, (uint32_t)a.h_type));
  *layout_agree(a.layout, a.send, b) = AgreeRecord{anchor, a.scalars, hidden, a.weights};
}

}  // namespace

cudaError_t agree_records(const AgreeRecordsArgs& a, cudaStream_t stream) {
  if (a.layout.agree_off == 0) return cudaErrorInvalidValue;
  if (a.layout.n_blocks == 0) return cudaSuccess;
  if (a.L <= 0 || a.L > 65535) return cudaErrorInvalidValue;  // a grid's y limit
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg =
      launch_config(dim3((unsigned)a.layout.n_blocks, (unsigned)a.L), kAgreeThreads, 0, stream, 1, true, attr);
  return cudaLaunchKernelEx(&cfg, agree_kernel, a);
}

}  // namespace dfsel::cuda
