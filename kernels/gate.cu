// gate: g[s][r] = sum_e W_h[r][e] * h[row(s)][e] (DESIGN section 2).
//
// The work is a tall-skinny product: R (~256) W_h rows against at most a few dozen hidden
// rows per step, bounded by reading W_h once. R alone gives too few warps to keep HBM busy,
// so the n_embd axis is split as well, over the CTAs of a thread-block cluster whose partial
// sums meet in distributed shared memory in a fixed order (deterministic, no atomics, no
// scratch: every rank computes bitwise the same g, DESIGN section 3).
//
// One CTA: 4 warps x 2 W_h rows against a tile of 16 selected rows, n_embd streamed in chunks
// of 256 elements (8 per lane, 16-byte loads). The hidden chunk is converted to float in
// shared memory once and read by the 4 warps; each lane keeps 2 x 16 accumulators, so every
// hidden value loaded from shared memory feeds 2 FMAs and every W_h value 16.
#include "kernels/gate.cuh"

#include <cooperative_groups.h>

#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kRowsPerWarp = 2;
constexpr int kRowsPerCta = kWarps * kRowsPerWarp;  // W_h rows
constexpr int kTile = 16;                           // selected rows
constexpr int kChunk = 256;                         // n_embd elements per pass
constexpr int kMaxSplit = 8;                        // portable cluster size
// 128 registers a thread: one gate CTA fits on an SM beside the top-K's CTAs (shard_topk
// sizes its grid to leave that room), so the two kernels of a step overlap.
constexpr int kGateCtasPerSm = 4;
constexpr int kAcc = kRowsPerWarp * kTile;          // accumulators per lane
constexpr int kHiddenPer = kTile * 32 / kThreads;   // 8-element hidden groups per thread

// Elements e0..e0+7 of a row as loaded, converted only where they are used, so that every
// load of a pass is in flight before the first conversion waits on one. kVec (the 8 elements
// inside the row, rows 16-byte aligned, 2 for Q8_0): the bytes as stored (F32 in a and b,
// F16/BF16 in a, Q8_0 the 8 quants in a.x, a.y and the block's scale in a.z); otherwise
// the values already as floats.
struct Raw8 {
  uint4 a, b;
};

template <bool kVec>
__device__ __forceinline__ Raw8 fetch8(const uint8_t* row, dfsel_type t, int64_t e0, int64_t n) {
  Raw8 r = {};
  if (!kVec) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = e0 + i < n ? load_elem(row, t, e0 + i) : 0.0f;
    memcpy(&r, v, sizeof r);
  } else if (t == DFSEL_TYPE_F32) {
    r.a = __ldg((const uint4*)(row + e0 * 4));
    r.b = __ldg((const uint4*)(row + e0 * 4) + 1);
  } else if (t == DFSEL_TYPE_Q8_0) {
    const BlockQ8_0* blk = (const BlockQ8_0*)row + e0 / kQ8Block;
    const uint16_t* qs = (const uint16_t*)(blk->qs + e0 % kQ8Block);  // even: 34 k + 2 + 8 m
    r.a.x = __ldg(qs) | (uint32_t)__ldg(qs + 1) << 16;
    r.a.y = __ldg(qs + 2) | (uint32_t)__ldg(qs + 3) << 16;
    r.a.z = __ldg(&blk->d);
  } else {
    r.a = __ldg((const uint4*)(row + e0 * 2));
  }
  return r;
}

// The floats of fetch8, by the numeric.cuh conversions (Q8_0: scale * quant, as load_elem).
template <bool kVec>
__device__ __forceinline__ void unpack8(const Raw8& r, dfsel_type t, float (&v)[8]) {
  if (!kVec || t == DFSEL_TYPE_F32) {
    memcpy(v, &r, sizeof r);
    return;
  }
  const uint32_t w[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
  if (t == DFSEL_TYPE_Q8_0) {
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = q8_value((uint16_t)r.a.z, (int8_t)(w[i / 4] >> (8 * (i % 4))));
    return;
  }
  const bool half = t == DFSEL_TYPE_F16;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint16_t x = (uint16_t)(w[i / 2] >> (16 * (i % 2)));
    v[i] = half ? f16_to_float(x) : bf16_to_float(x);
  }
}

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
template <bool kVec, bool kCluster>
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
      if (c < n_chunks && r0 + i < a.rank && e0 < n)
        wr[i] = fetch8<kVec>(w + (size_t)(r0 + i) * a.w_row_stride, a.w_type, e0, n);
    }
#pragma unroll
    for (int k = 0; k < kHiddenPer; ++k) {
      const int q = tid + k * kThreads, t = q >> 5, s = s0 + t;
      const int64_t he = c0 + (q & 31) * 8;
      hr[k] = Raw8{};
      if (c < n_chunks && s < a.n_rows && he < n) {
        const int64_t row = (int64_t)(s / a.map.group_rows) * a.map.group_stride +
                            a.map.group_offset + s % a.map.group_rows;
        hr[k] = fetch8<kVec>(h + (size_t)row * a.h_row_stride, a.h_type, he, n);
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
      unpack8<kVec>(hr[k], a.h_type, v);
      *(float4*)&hs[t][0][l * 4] = make_float4(v[0], v[1], v[2], v[3]);
      *(float4*)&hs[t][1][l * 4] = make_float4(v[4], v[5], v[6], v[7]);
    }
    float wv[kRowsPerWarp][8];
#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) unpack8<kVec>(wr[i], a.w_type, wv[i]);
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
    if (r < a.rank && s < a.n_rows) a.g[(size_t)s * a.rank + r] = v;
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
  return cudaLaunchKernelEx(&cfg, gate_kernel<kVec, kCluster>, a, n_split);
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
  const int64_t n_chunks = (a.n_embd + kChunk - 1) / kChunk;

  // Split n_embd only while the grid is short of about two CTAs per SM (few rows).
  int dev = 0, cluster_ok = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  e = cudaDeviceGetAttribute(&cluster_ok, cudaDevAttrClusterLaunch, dev);
  if (e != cudaSuccess) return e;
  int n_split = 1;
  if (cluster_ok) {
    while (n_split < kMaxSplit && 2 * n_split <= n_chunks &&
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
