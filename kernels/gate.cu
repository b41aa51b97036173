// gate: g[s][r] = sum_e W_h[r][e] * h[row(s)][e] (DESIGN section 2).
//
// A tall-skinny product bounded by reading W_h once (256 x 5120 BF16 is 2.6 MB, 0.6 us of
// HBM) and, for a decode step, by latency: few rows give little work per byte. So every load
// of a pass is issued before any is used, the next pass's W_h is fetched while the current one
// is multiplied, and n_embd is split over the CTAs of a thread-block cluster whose partial
// sums meet in distributed shared memory in a fixed order (deterministic, no atomics: every
// rank computes bitwise the same g, DESIGN section 3).
//
// One CTA: 8 warps, one W_h row each, against a tile of 16 selected rows; a pass stages
// 16 x kPass hidden values as float in shared memory, read by all 8 warps.
#include "kernels/gate.cuh"

#include <cooperative_groups.h>

#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kWarps = 8;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerCta = kWarps;   // W_h rows, one per warp
constexpr int kTile = 16;             // selected rows
constexpr int kPass = 512;            // n_embd elements staged per pass
constexpr int kVecs = kPass / 8 / 32; // 8-element vectors per lane per pass
constexpr int kMaxSplit = 8;          // portable cluster size
constexpr size_t kSmemBytes = (size_t)kTile * kPass * sizeof(float);

// Elements e0..e0+7 of a row as float. kVec: the 8 elements lie inside the row and the row
// start is aligned for one 16-byte load (F32: two), or 2 bytes for Q8_0 blocks.
template <bool kVec>
__device__ __forceinline__ void load8(const uint8_t* row, dfsel_type t, int64_t e0, int64_t n,
                                      float (&v)[8]) {
  if (!kVec) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = e0 + i < n ? load_elem(row, t, e0 + i) : 0.0f;
    return;
  }
  if (t == DFSEL_TYPE_F32) {
    const float4 a = __ldg((const float4*)(row + e0 * 4));
    const float4 b = __ldg((const float4*)(row + e0 * 4) + 1);
    v[0] = a.x; v[1] = a.y; v[2] = a.z; v[3] = a.w;
    v[4] = b.x; v[5] = b.y; v[6] = b.z; v[7] = b.w;
  } else if (t == DFSEL_TYPE_Q8_0) {
    const BlockQ8_0* blk = (const BlockQ8_0*)row + e0 / kQ8Block;
    const float d = f16_to_float(__ldg(&blk->d));
    const int8_t* qs = blk->qs + e0 % kQ8Block;
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = d * (float)__ldg(qs + i);
  } else {
    const uint4 q = __ldg((const uint4*)(row + e0 * 2));
    const uint32_t w[4] = {q.x, q.y, q.z, q.w};
    const bool half = t == DFSEL_TYPE_F16;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint16_t lo = (uint16_t)(w[i] & 0xffffu), hi = (uint16_t)(w[i] >> 16);
      v[2 * i] = half ? f16_to_float(lo) : bf16_to_float(lo);
      v[2 * i + 1] = half ? f16_to_float(hi) : bf16_to_float(hi);
    }
  }
}

// Grid: x = row group * n_split + split rank (one cluster per row group), y = tile of rows.
// Split `split` covers n_embd elements [e_lo, e_hi), a multiple of 8 wide except the last.
template <bool kVec, bool kCluster>
__global__ void __launch_bounds__(kThreads) gate_kernel(GateArgs a, int n_split, int64_t slice) {
  extern __shared__ __align__(16) float hs[];  // [kTile][kPass]
  __shared__ float red[kRowsPerCta * kTile];
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x % n_split;
  const int r = (blockIdx.x / n_split) * kRowsPerCta + warp;
  const int s0 = blockIdx.y * kTile;
  const int64_t n = a.n_embd;
  const int64_t e_lo = split * slice, e_hi = e_lo + slice < n ? e_lo + slice : n;
  const uint8_t* wrow = (const uint8_t*)a.w_h + (size_t)(r < a.rank ? r : 0) * a.w_row_stride;
  const uint8_t* h = (const uint8_t*)a.hidden;

  float acc[kTile];
#pragma unroll
  for (int t = 0; t < kTile; ++t) acc[t] = 0.0f;
  float wv[kVecs][8];
  auto load_w = [&](int64_t p0) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      const int64_t e = p0 + 8 * (lane + 32 * i);
#pragma unroll
      for (int x = 0; x < 8; ++x) wv[i][x] = 0.0f;
      if (r < a.rank && e < e_hi) load8<kVec>(wrow, a.w_type, e, e_hi, wv[i]);
    }
  };
  load_w(e_lo);
  for (int64_t p0 = e_lo; p0 < e_hi; p0 += kPass) {
    // Stage the tile's hidden values of this pass, half at a time (registers), each half's
    // loads all issued before its stores.
    constexpr int kStage = kTile * kPass / 8 / kThreads / 2;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float hv[kStage][8];
#pragma unroll
      for (int q = 0; q < kStage; ++q) {
        const int o = tid + (q + half * kStage) * kThreads, t = o / (kPass / 8), v = o % (kPass / 8);
        const int64_t e = p0 + 8 * v;
#pragma unroll
        for (int x = 0; x < 8; ++x) hv[q][x] = 0.0f;
        if (s0 + t < a.n_rows && e < e_hi) {
          const int64_t s = s0 + t;
          const int64_t row = (s / a.map.group_rows) * a.map.group_stride + a.map.group_offset + s % a.map.group_rows;
          load8<kVec>(h + (size_t)row * a.h_row_stride, a.h_type, e, e_hi, hv[q]);
        }
      }
#pragma unroll
      for (int q = 0; q < kStage; ++q) {
        const int o = tid + (q + half * kStage) * kThreads, t = o / (kPass / 8), v = o % (kPass / 8);
        *(float4*)&hs[t * kPass + 8 * v] = make_float4(hv[q][0], hv[q][1], hv[q][2], hv[q][3]);
        *(float4*)&hs[t * kPass + 8 * v + 4] = make_float4(hv[q][4], hv[q][5], hv[q][6], hv[q][7]);
      }
    }
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      float s = acc[t];
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        const float4 x = *(const float4*)&hs[t * kPass + 8 * (lane + 32 * i)];
        const float4 y = *(const float4*)&hs[t * kPass + 8 * (lane + 32 * i) + 4];
        s = fmaf(wv[i][0], x.x, s); s = fmaf(wv[i][1], x.y, s);
        s = fmaf(wv[i][2], x.z, s); s = fmaf(wv[i][3], x.w, s);
        s = fmaf(wv[i][4], y.x, s); s = fmaf(wv[i][5], y.y, s);
        s = fmaf(wv[i][6], y.z, s); s = fmaf(wv[i][7], y.w, s);
      }
      acc[t] = s;
    }
    // The next pass's W_h is in flight while this pass's staging area drains.
    if (p0 + kPass < e_hi) load_w(p0 + kPass);
    __syncthreads();
  }

  // Warp sums in a fixed butterfly order; red[warp][t] is this CTA's partial for (r, s0 + t).
#pragma unroll
  for (int t = 0; t < kTile; ++t) {
    float v = acc[t];
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    acc[t] = v;
  }
  if (lane < kTile) {
    float v = acc[0];
#pragma unroll
    for (int t = 1; t < kTile; ++t) v = lane == t ? acc[t] : v;
    red[warp * kTile + lane] = v;
  }
  const int per = kRowsPerCta * kTile / n_split;
  const int rg0 = (blockIdx.x / n_split) * kRowsPerCta;
  auto write = [&](int o, float v) {
    const int rr = rg0 + o / kTile, s = s0 + o % kTile;
    if (rr < a.rank && s < a.n_rows) a.g[(size_t)s * a.rank + rr] = v;
  };
  if constexpr (kCluster) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    // Each CTA of the cluster finishes 1/n_split of the outputs, summing ranks in order.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    cluster.sync();
    for (int o = split * per + tid; o < (split + 1) * per; o += kThreads) {
      float v = 0.0f;
      for (int src = 0; src < n_split; ++src) v += cluster.map_shared_rank(red, src)[o];
      write(o, v);
    }
    cluster.sync();  // keep this CTA's red alive until every peer has read it
#else
    __trap();
#endif
  } else {
    __syncthreads();
    for (int o = tid; o < per; o += kThreads) write(o, red[o]);
  }
}

bool aligned(const void* p, size_t stride, size_t to) {
  return ((uintptr_t)p % to) == 0 && stride % to == 0;
}

// 16-byte loads need 16-byte rows (F32/F16/BF16); Q8_0 groups read the 2-byte scale and bytes.
size_t vec_alignment(dfsel_type t) { return t == DFSEL_TYPE_Q8_0 ? 2 : 16; }

template <bool kVec, bool kCluster>
cudaError_t launch(const GateArgs& a, dim3 grid, int n_split, cudaStream_t stream) {
  cudaError_t e = cudaFuncSetAttribute(gate_kernel<kVec, kCluster>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       (int)kSmemBytes);
  if (e != cudaSuccess) return e;
  // Slices of whole 8-element vectors, so that only the last split has a ragged end.
  const int64_t slice = ((a.n_embd + n_split - 1) / n_split + 7) / 8 * 8;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
  cfg.dynamicSmemBytes = kSmemBytes;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  if (kCluster) {
    attr[0].id = cudaLaunchAttributeClusterDimension;
    attr[0].val.clusterDim.x = n_split;
    attr[0].val.clusterDim.y = 1;
    attr[0].val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = 1;
  }
  return cudaLaunchKernelEx(&cfg, gate_kernel<kVec, kCluster>, a, n_split, slice);
}

}  // namespace

cudaError_t gate(const GateArgs& a, int num_sms, cudaStream_t stream) {
  if (a.n_rows < 0 || a.rank < 0 || a.n_embd <= 0) return cudaErrorInvalidValue;
  if (a.n_rows == 0 || a.rank == 0) return cudaSuccess;
  if (!a.w_h || !a.hidden || !a.g || a.map.group_rows <= 0) return cudaErrorInvalidValue;
  const bool w_ok = a.w_type == DFSEL_TYPE_F32 || a.w_type == DFSEL_TYPE_F16 ||
                    a.w_type == DFSEL_TYPE_BF16 || a.w_type == DFSEL_TYPE_Q8_0;
  const bool h_ok = a.h_type == DFSEL_TYPE_F32 || a.h_type == DFSEL_TYPE_F16 ||
                    a.h_type == DFSEL_TYPE_BF16;
  if (!w_ok || !h_ok) return cudaErrorInvalidValue;
  if (a.w_type == DFSEL_TYPE_Q8_0 && a.n_embd % kQ8Block != 0) return cudaErrorInvalidValue;

  const bool vec = a.n_embd % 8 == 0 &&
                   aligned(a.w_h, a.w_row_stride, vec_alignment(a.w_type)) &&
                   aligned(a.hidden, a.h_row_stride, vec_alignment(a.h_type));
  const int row_groups = (a.rank + kRowsPerCta - 1) / kRowsPerCta;
  const int tiles = (a.n_rows + kTile - 1) / kTile;
  if (tiles > 65535) return cudaErrorInvalidValue;
  const int64_t n_vecs = (a.n_embd + 7) / 8;

  // Split n_embd only while the grid is short of about two CTAs per SM (few rows).
  int dev = 0, cluster_ok = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&cluster_ok, cudaDevAttrClusterLaunch, dev);
  if (e != cudaSuccess) return e;
  int n_split = 1;
  if (cluster_ok) {
    while (n_split < kMaxSplit && 2 * n_split * 32 <= n_vecs &&
           (int64_t)row_groups * tiles * n_split < 2 * (int64_t)num_sms)
      n_split *= 2;
  }
  const dim3 grid(row_groups * n_split, tiles);
  if (n_split > 1) {
    return vec ? launch<true, true>(a, grid, n_split, stream)
               : launch<false, true>(a, grid, n_split, stream);
  }
  return vec ? launch<true, false>(a, grid, 1, stream) : launch<false, false>(a, grid, 1, stream);
}

}  // namespace dfsel::cuda
