// pack_records: one warp per record row pair or anchor, copying row_bytes(cb_type, R) bytes
// in the widest unit that the sources, the strides and the row size allow.
#include "kernels/pack_records.cuh"

#include <assert.h>

#include "kernels/cluster_launch.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/common/row_source.cuh"
#include "kernels/dispatch.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {
namespace {

template <typename U>
__device__ __forceinline__ void copy_row(uint8_t* dst, const uint8_t* src, size_t bytes,
                                         int lane) {
  const size_t n = bytes / sizeof(U);
  for (size_t i = lane; i < n; i += 32)
    ((U*)dst)[i] = src ? __ldg((const U*)src + i) : U{};
}

template <typename U>
__global__ void __launch_bounds__(kPackWarps * 32) pack_kernel(PackRecordsArgs a, size_t bytes) {
  chain_release();
  chain_wait();  // the records the top-K before it wrote
  const int lane = threadIdx.x & 31;
  const int64_t item = (int64_t)blockIdx.x * kPackWarps + (threadIdx.x >> 5);
  const ExchangeLayout& l = a.layout;
  const int64_t n_cands = (int64_t)l.n_drafted * l.k;
  if (item < n_cands) {
    const int d = (int)(item / l.k), j = (int)(item % l.k);
    const int32_t id = layout_cands(l, a.send)[item].id;
    const bool mine = owns_token(a.v_begin, a.v_end, id);
    const size_t off = mine ? (size_t)(id - a.v_begin) * a.cb_row_stride : 0;
    copy_row<U>(layout_row(l, a.send, d, j, 0), mine ? (const uint8_t*)a.e_prev + off : nullptr,
                bytes, lane);
    copy_row<U>(layout_row(l, a.send, d, j, 1), mine ? (const uint8_t*)a.e_next + off : nullptr,
                bytes, lane);
  } else if (item < n_cands + l.n_blocks) {
    const int b = (int)(item - n_cands);
    const int32_t anchor = a.anchors[b];
    const bool mine = owns_token(a.v_begin, a.v_end, anchor);
    if (lane < 4) layout_anchor_owned(l, a.send, b)[lane] = lane == 0 && mine ? 1 : 0;
    if (mine)
      copy_row<U>(layout_anchor_row(l, a.send, b),
                  (const uint8_t*)a.e_prev + (size_t)(anchor - a.v_begin) * a.cb_row_stride,
                  bytes, lane);
  }
}

}  // namespace

cudaError_t pack_records(const PackRecordsArgs& a, cudaStream_t stream) {
  const ExchangeLayout& l = a.layout;
  const size_t bytes = a.cb_row_bytes;
  // The plan's arguments: sharded layout, rows of at most row_pad bytes (validated at creation).
  assert(l.sharded && a.send && bytes > 0 && bytes <= l.row_pad);
  const int64_t items = (int64_t)l.n_drafted * l.k + l.n_blocks;
  if (items == 0) return cudaSuccess;
  const int64_t grid = (items + kPackWarps - 1) / kPackWarps;
  if (grid > 0x7fffffff) return cudaErrorInvalidValue;  // a grid dimension's limit

  // The destination rows are 16-byte aligned (layout) when send is; the unit must also divide
  // the sources' alignment, their stride and the row size.
  const uintptr_t mix = (uintptr_t)a.send | (uintptr_t)a.e_prev | (uintptr_t)a.e_next |
                        (uintptr_t)a.cb_row_stride | (uintptr_t)bytes;
  // Chained after the top-K: its launch and first instructions run under the top-K's tail.
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)grid), kPackWarps * 32, 0, stream, 1, true, attr);
  return dispatch_copy_unit(mix, [&](auto unit) {
    return cudaLaunchKernelEx(&cfg, pack_kernel<typename decltype(unit)::type>, a, bytes);
  });
}

}  // namespace dfsel::cuda
