// gate: g[s][r] = sum_e W_h[r][e] * h[row(s)][e] (DESIGN section 2).
//
// The work is a tall-skinny product: R (~256) W_h rows against at most a few dozen hidden
// rows per step, bounded by reading W_h (each tile of 16 selected rows reads all of it; from
// the second tile on, mostly out of L2). R alone gives too few warps to keep HBM busy,
// so the n_embd axis is split as well, over the CTAs of a thread-block cluster whose partial
// sums meet in distributed shared memory in a fixed order (deterministic, no atomics, no
// scratch: every rank computes bitwise the same g, DESIGN section 3).
//
// One CTA: 4 warps x 2 W_h rows against a tile of 16 selected rows, n_embd streamed in chunks
// of 256 elements (8 per lane, 16-byte loads). The hidden chunk is converted to float in
// shared memory once and read by the 4 warps; each lane keeps 2 x 16 accumulators, so every
// hidden value loaded from shared memory feeds 2 FMAs and every W_h value 16.
#include "kernels/gate.cuh"

#include <assert.h>
#include <cooperative_groups.h>

#include "kernels/block/gate_rows.cuh"
#include "kernels/dispatch.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // W_h rows
constexpr int kTile = 16;                           // selected rows
constexpr int kChunk = 256;                         // n_embd elements per pass
constexpr int kPortableSplit = 8;                   // the portable cluster size
// 128 registers a thread: one gate CTA fits on an SM beside the top-K's CTAs (shard_topk
// sizes its grid to leave that room), so the two kernels of a step overlap.
constexpr int kGateCtasPerSm = 4;
constexpr int kAcc = kRowsPerWarp * kTile;          // accumulators per lane
constexpr int kHiddenPer = kTile * 32 / kThreads;   // 8-element hidden groups per thread

// One step of a warp reduce-scatter over n values: lanes with bit o set keep the upper half,
// the others the lower half, each adding its partner's copy of the half it keeps.
template <int kN>
__device__ __forceinline__ void reduce_half(float (&v)[kAcc], int o, bool upper) {
#pragma unroll
  for (int i = 0; i < kN / 2; ++i) {
    const float send = upper ? v[i] : v[i + kN / 2];
    const float keep = upper ? v[i + kN / 2] : v[i];
    v[i] = keep + __shfl_xor_sync(0xffffffffu, send, o);
  }
}

// Sums v[0..kAcc) over the 32 lanes of the warp in five halvings. On return lane l holds the
// totals of indices kPerLane * l + i in v[i] (bit o of the lane chose the upper half).
constexpr int kPerLane = kAcc / 32;
__device__ __forceinline__ void warp_reduce_scatter(float (&v)[kAcc], int lane) {
  static_assert(kAcc % 32 == 0, "five halvings leave kAcc / 32 values per lane");
  reduce_half<kAcc>(v, 16, (lane & 16) != 0);
  reduce_half<kAcc / 2>(v, 8, (lane & 8) != 0);
  reduce_half<kAcc / 4>(v, 4, (lane & 4) != 0);
  reduce_half<kAcc / 8>(v, 2, (lane & 2) != 0);
  reduce_half<kAcc / 16>(v, 1, (lane & 1) != 0);
}

// Grid: x = row group * n_split + split rank (one cluster per row group), y = tile of rows.
template <dfsel_type W, dfsel_type H, bool kVec, bool kCluster>
__global__ void __launch_bounds__(kThreads, kGateCtasPerSm) gate_kernel(GateArgs a, int n_split) {
  // Hidden chunk, lane-major halves: element 8l + 4h + c of the chunk sits at [h][4l + c], so
  // that a warp reading one half per lane touches 512 contiguous bytes (no bank conflicts).
  __shared__ __align__(16) float hs[kTile][2][kChunk / 2];
  __shared__ float red[kRowsPerCta * kTile];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int split = blockIdx.x % n_split;
  const int r0 = (blockIdx.x / n_split) * kRowsPerCta + warp * kRowsPerWarp;
  const int s0 = blockIdx.y * kTile;
  const int64_t n = a.n_embd;
  const int64_t n_chunks = (n + kChunk - 1) / kChunk;
  const uint8_t* w = (const uint8_t*)a.w_h;
  const uint8_t* h = (const uint8_t*)a.hidden;

  float acc[kAcc];
#pragma unroll
  for (int i = 0; i < kAcc; ++i) acc[i] = 0.0f;

  // The loads of chunk c (W_h rows, then the hidden tile), all issued before any is used.
  Raw8 wr[kRowsPerWarp], hr[kHiddenPer];
  auto fetch = [&](int64_t c) {
    const int64_t c0 = c * kChunk;
    const int64_t e0 = c0 + lane * 8;
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      wr[i] = Raw8{};
      if (c < n_chunks && r0 + i < a.R && e0 < n)
        wr[i] = fetch8<W, kVec>(w + (size_t)(r0 + i) * a.w_row_stride, e0, n);
    }
#pragma unroll
    for (int k = 0; k < kHiddenPer; ++k) {
      const int q = tid + k * kThreads, t = q >> 5, s = s0 + t;
      const int64_t he = c0 + (q & 31) * 8;
      hr[k] = Raw8{};
      if (c < n_chunks && s < a.n_rows && he < n) {
        hr[k] = fetch8<H, kVec>(h + (size_t)map_row(a.map, s) * a.h_row_stride, he, n);
      }
    }
  };
  fetch(split);
  for (int64_t c = split; c < n_chunks; c += n_split) {
    // Convert this chunk, then issue the next chunk's loads into the same registers: they are
    // in flight during this chunk's products (one memory latency per CTA, not one per chunk).
#pragma unroll
    for (int k = 0; k < kHiddenPer; ++k) {
      const int q = tid + k * kThreads, t = q >> 5, l = q & 31;
      float v[8];
      unpack8<H, kVec>(hr[k], v);
      *(float4*)&hs[t][0][l * 4] = make_float4(v[0], v[1], v[2], v[3]);
      *(float4*)&hs[t][1][l * 4] = make_float4(v[4], v[5], v[6], v[7]);
    }
    float wv[kRowsPerWarp][8];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) unpack8<W, kVec>(wr[i], wv[i]);
    if (c + n_split < n_chunks) fetch(c + n_split);
    __syncthreads();
#pragma unroll
    for (int t = 0; t < kTile; ++t) {
      const float4 x = *(const float4*)&hs[t][0][lane * 4];
      const float4 y = *(const float4*)&hs[t][1][lane * 4];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        float s = acc[i * kTile + t];
        s = fmaf(wv[i][0], x.x, s); s = fmaf(wv[i][1], x.y, s);
        s = fmaf(wv[i][2], x.z, s); s = fmaf(wv[i][3], x.w, s);
        s = fmaf(wv[i][4], y.x, s); s = fmaf(wv[i][5], y.y, s);
        s = fmaf(wv[i][6], y.z, s); s = fmaf(wv[i][7], y.w, s);
        acc[i * kTile + t] = s;
      }
    }
    __syncthreads();
  }

  // acc index v = i * kTile + t; the CTA's partial for W_h row warp * kRowsPerWarp + i and
  // tile row t is red[warp * kAcc + v], i.e. red[wrow * kTile + t].
  warp_reduce_scatter(acc, lane);
#pragma unroll
  for (int i = 0; i < kPerLane; ++i) red[warp * kAcc + kPerLane * lane + i] = acc[i];

  const int per = kRowsPerCta * kTile / n_split;
  const int rg0 = (blockIdx.x / n_split) * kRowsPerCta;
  auto write = [&](int o, float v) {
    const int r = rg0 + o / kTile, s = s0 + o % kTile;
    if (r < a.R && s < a.n_rows) a.g[(size_t)s * a.R + r] = v;
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

template <dfsel_type W, dfsel_type H, bool kVec, bool kCluster>
cudaError_t launch(const GateArgs& a, dim3 grid, int n_split, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3(kThreads);
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
  if (kCluster && n_split > kPortableSplit) {  // tuning only (GateDevice::max_split)
    const cudaError_t e = cudaFuncSetAttribute(gate_kernel<W, H, kVec, kCluster>,
                                               cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
    if (e != cudaSuccess) return e;
  }
  return cudaLaunchKernelEx(&cfg, gate_kernel<W, H, kVec, kCluster>, a, n_split);
}

}  // namespace

cudaError_t gate_device(int device, GateDevice* out) {
  cudaError_t e = cudaDeviceGetAttribute(&out->num_sms, cudaDevAttrMultiProcessorCount, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&out->cluster_ok, cudaDevAttrClusterLaunch, device);
  out->max_split = kPortableSplit;
  return e;
}

int gate_splits(int32_t n_rows, int32_t R, int64_t n_embd, const GateDevice& dev) {
  // Split n_embd only while the grid is short of about two CTAs per SM (few rows).
  const int row_groups = (R + kRowsPerCta - 1) / kRowsPerCta;
  const int tiles = (n_rows + kTile - 1) / kTile;
  const int64_t n_chunks = (n_embd + kChunk - 1) / kChunk;
  int n_split = 1;
  if (dev.cluster_ok) {
    while (n_split < dev.max_split && 2 * n_split <= n_chunks &&
           (int64_t)row_groups * tiles * n_split < 2 * (int64_t)dev.num_sms)
      n_split *= 2;
  }
  return n_split;
}

cudaError_t gate(const GateArgs& a, const GateDevice& dev, cudaStream_t stream) {
  // The plan validated types, shapes and strides; only the rows' alignment is per run.
  if (a.n_rows == 0) return cudaSuccess;
  const bool vec = a.n_embd % 8 == 0 && aligned(a.w_h, a.w_row_stride, vec_alignment(a.w_type)) &&
                   aligned(a.hidden, a.h_row_stride, vec_alignment(a.h_type));
  const int n_split = gate_splits(a.n_rows, a.R, a.n_embd, dev);
  const dim3 grid(((a.R + kRowsPerCta - 1) / kRowsPerCta) * n_split, (a.n_rows + kTile - 1) / kTile);
  assert(grid.y <= 65535);
  return dispatch_weight_type(a.w_type, [&](auto W) {
    return dispatch_float_type(a.h_type, [&](auto H) {
      return dispatch_bool(vec, [&](auto V) {
        return n_split > 1 ? launch<W.value, H.value, V.value, true>(a, grid, n_split, stream)
                           : launch<W.value, H.value, V.value, false>(a, grid, 1, stream);
      });
    });
  });
}

}  // namespace dfsel::cuda
