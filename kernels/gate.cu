// gate: g[s][r] = sum_e W_h[r][e] * h[row(s)][e] (SPEC section 2.3), on the tensor cores.
//
// A tall-skinny product: R (~256) W_h rows against the step's drafted rows (15 a block), n_embd
// (~5120) long. At decode sizes it is a read of W_h (2.6 MB in BF16) that is shorter than the
// memory's latency-bandwidth product, so the whole GPU must issue its share at once; from
// about a hundred rows the products dominate and need the tensor cores.
//
// Each CTA computes a kM x kN tile of g (drafted rows x W_h rows) over a range of n_embd, the
// ranges of one tile split over a thread-block cluster whose partial tiles meet in distributed
// shared memory and are summed in rank order (fixed: every rank computes bitwise the same g,
// SPEC section 4.8; no atomics, no scratch). The range streams through shared memory in stages
// of kKs elements, kStages in flight (cp.async; types that need converting or unaligned rows
// go through registers). Warps take the tile's m16n8k16 BF16 mma tiles, on values split into
// BF16 terms that keep float precision (block/gate_mma.cuh); warps that split a stage's k
// steps add their partial tiles in shared memory in warp order.
#include "kernels/gate.cuh"

#include <cooperative_groups.h>

#include <algorithm>
#include <tuple>

#include "kernels/block/gate_mma.cuh"
#include "kernels/block/gate_rows.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/dispatch.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {
namespace {

// A tile of kernels/policy.cuh's GateTileShape as compile-time constants: warps along M
// (rows), N (W_h rows) and K; mma tiles per warp along M and N; elements per stage; stages in
// flight; CTAs per SM the launch bounds ask for.
template <int WM, int WN, int WK, int MT, int NT, int KS, int P, int MinCtas>
struct Tile {
  static constexpr int kWn = WN, kWk = WK, kMt = MT, kNt = NT, kKs = KS, kStages = P;
  static constexpr int kMinCtas = MinCtas;
  static constexpr int kWarps = WM * WN * WK, kThreads = 32 * kWarps;
  static constexpr int kM = 16 * WM * MT, kN = 8 * WN * NT;
  static constexpr int kSteps = KS / 16;  // k16 steps a stage
  static_assert(kSteps % WK == 0, "the K warps share a stage's k steps evenly");
};
// Decode (a block or two), and hundreds of rows and more. The small tile's launch bounds are
// those the policy's room rule beside the top-K is stated for.
using SmallTile = Tile<kGateSmallTile.wm, kGateSmallTile.wn, kGateSmallTile.wk, kGateSmallTile.mt, kGateSmallTile.nt,
                       kGateSmallTile.ks, kGateSmallTile.stages, kGateSmallTile.min_ctas>;
using LargeTile = Tile<kGateLargeTile.wm, kGateLargeTile.wn, kGateLargeTile.wk, kGateLargeTile.mt, kGateLargeTile.nt,
                       kGateLargeTile.ks, kGateLargeTile.stages, kGateLargeTile.min_ctas>;

// One operand's share of a stage for this thread: the (row, piece) pairs q = tid + k * kThreads
// of kRows rows of kKs elements, their rows found once per row group (nullptr: a row past the
// tensor, staged as zeros). kAsync: 16-byte pieces copied as stored by cp.async; otherwise
// 8-element groups read into registers and staged as floats. kLinear: rows at a fixed stride
// (W_h), kept as one pointer, so that the registers a slot costs do not grow with the tile.
template <dfsel_type T, bool kVec, bool kAsync, int kThreads, int kKs, int kRows, bool kLinear>
struct Stager {
  static constexpr int kEs = T == DFSEL_TYPE_F32 ? 4 : 2;                // async: bytes an element
  static constexpr int kPerElems = kAsync ? 16 / kEs : 8;                // elements a piece
  static constexpr int kPer = kKs / kPerElems;                           // pieces a row
  static constexpr int kPitch = (kKs + 16) * (kAsync && kEs == 2 ? 2 : 4);  // staged row bytes
  static constexpr int kSlots = kRows * kPer / kThreads;
  static constexpr int kRowStep = kThreads / kPer;  // rows between a thread's slots
  static_assert(kRows * kPer % kThreads == 0 && kThreads % kPer == 0 && (kPer & (kPer - 1)) == 0,
                "whole slots, shifts");
  const uint8_t* row[kLinear ? 1 : kSlots];
  size_t stride;  // kLinear
  int rows;       // kLinear: rows of the tile inside the tensor

  // Non-linear: row_at(r) is row r's pointer or nullptr.
  template <class RowAt>
  __device__ __forceinline__ void init(const RowAt& row_at) {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) row[k] = row_at((int)threadIdx.x / kPer + k * kRowStep);
  }
  // Linear: the tile's row 0, the rows' stride, how many rows lie inside the tensor.
  __device__ __forceinline__ void init_linear(const uint8_t* first, size_t row_stride, int valid_rows) {
    row[0] = first + (size_t)(threadIdx.x / kPer) * row_stride;
    stride = row_stride * kRowStep;
    rows = valid_rows;
  }
  __device__ __forceinline__ const uint8_t* row_of(int k) const {
    if constexpr (kLinear) return (int)threadIdx.x / kPer + k * kRowStep < rows ? row[0] + k * stride : nullptr;
    else return row[k];
  }

  // Stages elements e0 .. e0 + kKs (those past n as zeros) into dst; base: any address of the
  // tensor, the source named by zero-filling copies.
  __device__ __forceinline__ void stage(uint8_t* dst, int64_t e0, int64_t n, const uint8_t* base) const {
#pragma unroll
    for (int k = 0; k < kSlots; ++k) {
      const int q = threadIdx.x + k * kThreads, i = q / kPer, p = q % kPer;
      const int64_t e = e0 + p * kPerElems;
      const uint8_t* r = row_of(k);
      const bool ok = r != nullptr && e < n;
      if constexpr (kAsync) {
        cp_async16(dst + i * kPitch + p * 16, ok ? r + e * kEs : base, ok);
      } else {
        float v[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        if (ok) unpack8<T, kVec>(fetch8<T, kVec>(r, e, n), v);
        float4* d = (float4*)(dst + i * kPitch + p * 32);
        d[0] = make_float4(v[0], v[1], v[2], v[3]);
        d[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    }
  }
};

// Shared memory of one CTA: kStages stages of (kM hidden rows, kN W_h rows) x kKs elements,
// each row padded by 16 elements so that a warp's fragment loads fall in distinct banks; the
// partial tile (kM x kN floats) reuses it after the last stage.
template <class Tl, dfsel_type W, dfsel_type H, bool kVec>
struct Smem {
  static constexpr bool kWRaw = kVec && (W == DFSEL_TYPE_F16 || W == DFSEL_TYPE_BF16);
  static constexpr bool kHRaw = kVec && (H == DFSEL_TYPE_F16 || H == DFSEL_TYPE_BF16);
  // cp.async copies rows as stored; Q8_0 (2-byte aligned blocks) and unaligned rows are read
  // into registers and staged as floats.
  static constexpr bool kWAsync = kVec && W != DFSEL_TYPE_Q8_0, kHAsync = kVec;
  using HStager = Stager<H, kVec, kHAsync, Tl::kThreads, Tl::kKs, Tl::kM, false>;
  using WStager = Stager<W, kVec, kWAsync, Tl::kThreads, Tl::kKs, Tl::kN, true>;
  static constexpr int kWRow = (Tl::kKs + 16) * StagedTerms<W, kWRaw>::kBytes;  // bytes
  static constexpr int kHRow = (Tl::kKs + 16) * StagedTerms<H, kHRaw>::kBytes;
  static_assert(kWRow == WStager::kPitch && kHRow == HStager::kPitch, "one staged layout");
  static constexpr int kStage = Tl::kM * kHRow + Tl::kN * kWRow;
  static constexpr int kBytes = std::max(Tl::kStages * kStage, Tl::kM * Tl::kN * 4);
  static_assert(kWRow % 16 == 0 && kHRow % 16 == 0, "16-byte aligned staged rows");
};

// Grid: x = W_h row group * split + cluster rank, y = first row group (row groups past
// gridDim.y are taken in turn). A cluster's CTAs take consecutive ranges of
// stages_per_cta stages of kKs elements.
template <class Tl, dfsel_type W, dfsel_type H, bool kVec>
__global__ void __launch_bounds__(Tl::kThreads, Tl::kMinCtas)
    gate_kernel(GateArgs a, int split, int stages_per_cta, int row_groups) {
  using S = Smem<Tl, W, H, kVec>;
  using WTerms = StagedTerms<W, S::kWRaw>;
  using HTerms = StagedTerms<H, S::kHRaw>;
  constexpr int nW = WTerms::kTerms, nH = HTerms::kTerms;
  constexpr int kM = Tl::kM, kN = Tl::kN, kKs = Tl::kKs, P = Tl::kStages;
  extern __shared__ __align__(16) uint8_t smem[];

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t = lane & 3;
  const int wk = warp % Tl::kWk, wn = (warp / Tl::kWk) % Tl::kWn, wm = warp / (Tl::kWk * Tl::kWn);
  const int rank = blockIdx.x % split;
  const int n0 = (blockIdx.x / split) * kN;
  const int64_t n = a.n_embd;
  const int64_t total = (n + kKs - 1) / kKs;
  const int64_t st0 = (int64_t)rank * stages_per_cta;
  const int n_st = (int)std::max<int64_t>(0, std::min<int64_t>(st0 + stages_per_cta, total) - st0);
  const uint8_t* w = (const uint8_t*)a.w_h;
  const uint8_t* h = (const uint8_t*)a.hidden;
  chain_release();  // the step's top-K, chained after the gate, starts beside it

  for (int mg = blockIdx.y; mg < row_groups; mg += gridDim.y) {
    const int m0 = mg * kM;
    typename S::HStager hs;
    typename S::WStager ws;
    hs.init([&](int r) { return m0 + r < a.n_rows ? h + (size_t)map_row(a.map, m0 + r) * a.h_row_stride : nullptr; });
    ws.init_linear(w + (size_t)n0 * a.w_row_stride, a.w_row_stride, a.R - n0);
    auto stage = [&](int i, uint8_t* hb) {
      const int64_t e0 = (st0 + i) * kKs;
      hs.stage(hb, e0, n, h);
      ws.stage(hb + kM * S::kHRow, e0, n, w);
    };

    float acc[Tl::kMt][Tl::kNt][4];
#pragma unroll
    for (int i = 0; i < Tl::kMt; ++i)
#pragma unroll
      for (int j = 0; j < Tl::kNt; ++j)
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[i][j][c] = 0.0f;

    // One commit group per stage slot, empty or not, so that "stage i has landed" is always
    // "at most P - 1 groups pending".
#pragma unroll 1
    for (int i = 0; i < P; ++i) {
      if (i < n_st) stage(i, smem + i * S::kStage);
      cp_async_commit();
    }
    int slot = 0;  // i % P
    for (int i = 0; i < n_st; ++i) {
      cp_async_wait<P - 1>();
      __syncthreads();
      uint8_t* const hb = smem + slot * S::kStage;
      const uint8_t* wb = hb + kM * S::kHRow;
#pragma unroll
      for (int jj = 0; jj < Tl::kSteps / Tl::kWk; ++jj) {
        const int j = jj * Tl::kWk + wk;
        // This thread's k of step j: elements 4t .. 4t + 3 (k 2t, 2t + 1, 2t + 8, 2t + 9; any
        // assignment of elements to k is a valid product as long as A and B share it).
        const int ko = j * 16 + 4 * t;
        uint32_t bl[Tl::kNt][nW], bh[Tl::kNt][nW];
#pragma unroll
        for (int nt = 0; nt < Tl::kNt; ++nt)
          WTerms::load(wb + ((wn * Tl::kNt + nt) * 8 + g) * S::kWRow + ko * WTerms::kBytes, bl[nt], bh[nt]);
#pragma unroll
        for (int mt = 0; mt < Tl::kMt; ++mt) {
          const int r = (wm * Tl::kMt + mt) * 16 + g;
          uint32_t l0[nH], h0[nH], l1[nH], h1[nH];
          HTerms::load(hb + r * S::kHRow + ko * HTerms::kBytes, l0, h0);
          HTerms::load(hb + (r + 8) * S::kHRow + ko * HTerms::kBytes, l1, h1);
#pragma unroll
          for (int tw = 0; tw < nW; ++tw)
#pragma unroll
            for (int th = 0; th < nH; ++th)
              if (tw + th < kTermBits) {
#pragma unroll
                for (int nt = 0; nt < Tl::kNt; ++nt)
                  mma_bf16(acc[mt][nt], l0[th], l1[th], h0[th], h1[th], bl[nt][tw], bh[nt][tw]);
              }
        }
      }
      __syncthreads();  // every warp is done with this slot before it is refilled
      if (i + P < n_st) stage(i + P, hb);
      cp_async_commit();
      slot = slot + 1 == P ? 0 : slot + 1;
    }
    cp_async_wait<0>();
    __syncthreads();

    // The CTA's partial tile part[m][n] over the stages (a peer may still be computing, so
    // nothing is sent before the cluster barrier), the K warps added in warp order.
    float* part = (float*)smem;
#pragma unroll
    for (int kw = 0; kw < Tl::kWk; ++kw) {
      if (wk == kw) {
#pragma unroll
        for (int mt = 0; mt < Tl::kMt; ++mt)
#pragma unroll
          for (int nt = 0; nt < Tl::kNt; ++nt) {
            const int m = (wm * Tl::kMt + mt) * 16 + g, c = (wn * Tl::kNt + nt) * 8 + 2 * t;
            float2* p0 = (float2*)&part[m * kN + c];
            float2* p1 = (float2*)&part[(m + 8) * kN + c];
            const float* v = acc[mt][nt];
            if (kw == 0) {
              *p0 = make_float2(v[0], v[1]);
              *p1 = make_float2(v[2], v[3]);
            } else {
              *p0 = make_float2(p0->x + v[0], p0->y + v[1]);
              *p1 = make_float2(p1->x + v[2], p1->y + v[3]);
            }
          }
      }
      __syncthreads();
    }

    auto write = [&](int o, float v) {
      const int m = o / kN, c = o % kN;
      if (m0 + m < a.n_rows && n0 + c < a.R) a.g[(size_t)(m0 + m) * a.R + n0 + c] = v;
    };
    if (split == 1) {
      for (int o = tid; o < kM * kN; o += Tl::kThreads) write(o, part[o]);
    } else {
      // Rank r finishes outputs [r * per, (r + 1) * per), summing the ranks' parts in order.
      namespace cg = cooperative_groups;
      cg::cluster_group cluster = cg::this_cluster();
      cluster.sync();
      const int per = kM * kN / split;  // split is a power of two
      for (int o = rank * per + tid; o < (rank + 1) * per; o += Tl::kThreads) {
        float v[kMaxCluster];  // every rank's load in flight, then the sum in rank order
#pragma unroll
        for (int src = 0; src < kMaxCluster; ++src) v[src] = src < split ? cluster.map_shared_rank(part, src)[o] : 0.0f;
        float sum = 0.0f;
#pragma unroll
        for (int src = 0; src < kMaxCluster; ++src)
          if (src < split) sum += v[src];
        write(o, sum);
      }
      cluster.sync();  // keep this CTA's part alive until every peer has read it
    }
    __syncthreads();  // the next row group restages over part
  }
  chain_wait();  // chained: completes after the kernel before it
}

bool aligned(const void* p, size_t stride, size_t to) {
  return ((uintptr_t)p % to) == 0 && stride % to == 0;
}

// 16-byte loads need 16-byte rows (F32/F16/BF16); Q8_0 groups read the 2-byte scale and bytes.
size_t vec_alignment(dfsel_type t) { return t == DFSEL_TYPE_Q8_0 ? 2 : 16; }

bool vec_rows(const GateArgs& a) {
  return a.n_embd % 8 == 0 && aligned(a.w_h, a.w_row_stride, vec_alignment(a.w_type)) &&
         aligned(a.hidden, a.h_row_stride, vec_alignment(a.h_type));
}

// wave: CTAs an SM the n_embd split aims for (kernels/policy.cuh says where it was measured).
struct TileInfo {
  int m, n, ks, wave;
};
constexpr TileInfo kInfo[kGateTiles] = {{SmallTile::kM, SmallTile::kN, SmallTile::kKs, kGateSmallTile.wave},
                                        {LargeTile::kM, LargeTile::kN, LargeTile::kKs, kGateLargeTile.wave}};
constexpr int kMaxRowGroups = 65535;  // grid.y; more row groups are taken in turn

// The tiles by index (GateShape::tile, GateDevice::force_tile, gate_tile_name), in kInfo's order.
using TileList = std::tuple<SmallTile, LargeTile>;
static_assert(std::tuple_size_v<TileList> == kGateTiles, "one index a tile");

template <class Tl, dfsel_type W, dfsel_type H, bool kVec>
cudaError_t launch(const GateArgs& a, const GateShape& s, cudaStream_t stream) {
  using S = Smem<Tl, W, H, kVec>;
  const int64_t total = (a.n_embd + Tl::kKs - 1) / Tl::kKs;
  const int per = (int)((total + s.split - 1) / s.split);
  const int row_groups = (int)(((int64_t)a.n_rows + Tl::kM - 1) / Tl::kM);  // n_rows may be 2^31 - 1
  auto* kernel = gate_kernel<Tl, W, H, kVec>;
  cudaError_t e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kBytes);
  if (e == cudaSuccess && s.split > kPortableCluster) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  // The most shared memory and the least L1 on the SMs it runs on, as the top-K asks too:
  // otherwise an SM configured for the other kernel has no room for this one beside it.
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(
      dim3((unsigned)(((a.R + Tl::kN - 1) / Tl::kN) * s.split), (unsigned)std::min(row_groups, kMaxRowGroups)),
      Tl::kThreads, S::kBytes, stream, s.split, a.chained != 0, attr);
  return cudaLaunchKernelEx(&cfg, kernel, a, s.split, per, row_groups);
}

}  // namespace

const char* gate_tile_name(int tile) {
  static const char* const names[kGateTiles] = {"16x32", "64x256"};
  return tile >= 0 && tile < kGateTiles ? names[tile] : "?";
}

namespace {

// Whether a cluster of kMaxCluster small-tile CTAs can be resident on the current device. The
// instance with the most shared memory (F32 rows staged as floats) stands for all.
bool largest_cluster_fits() {
  auto* kernel = gate_kernel<SmallTile, DFSEL_TYPE_F32, DFSEL_TYPE_F32, false>;
  constexpr int kBytes = Smem<SmallTile, DFSEL_TYPE_F32, DFSEL_TYPE_F32, false>::kBytes;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kBytes) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return cluster_fits((const void*)kernel, SmallTile::kThreads, kBytes, kMaxCluster);
}

}  // namespace

cudaError_t gate_device(int device, GateDevice* out) {
  *out = GateDevice{};
  cudaError_t e = cudaDeviceGetAttribute(&out->num_sms, cudaDevAttrMultiProcessorCount, device);
  int clusters = 0;
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&clusters, cudaDevAttrClusterLaunch, device);
  int current = -1;
  if (e == cudaSuccess) e = cudaGetDevice(&current);
  // Clusters of 16 where the device holds one (the query needs the device current), else
  // the portable 8.
  out->max_split = !clusters ? 1 : current == device && largest_cluster_fits() ? kMaxCluster : kPortableCluster;
  out->force_tile = -1;
  out->force_split = 0;
  return e;
}

GateShape gate_shape(const GateArgs& a, const GateDevice& dev) {
  GateShape s{};
  // Rows staged through registers (unaligned, odd n_embd) take the small tile only: one
  // instance per type instead of three, for shapes no model is expected to have.
  s.tile = !vec_rows(a) ? 0 : dev.force_tile >= 0 && dev.force_tile < kGateTiles ? dev.force_tile
                        : a.n_rows <= kGateSmallTileMaxRows ? 0 : 1;
  const TileInfo& t = kInfo[s.tile];
  const int64_t row_groups = ((int64_t)a.n_rows + t.m - 1) / t.m;  // n_rows may be 2^31 - 1
  const int64_t base = (int64_t)((a.R + t.n - 1) / t.n) * std::min<int64_t>(row_groups, kMaxRowGroups);
  const int64_t stages = std::max<int64_t>(1, (a.n_embd + t.ks - 1) / t.ks);
  // Split n_embd while the grid is short of one resident wave: a power of two (the finishing
  // shares are shifts), at most the stages (a rank may still get none: it sends zeros).
  int64_t want = dev.force_split > 0 ? dev.force_split
                                     : std::max<int64_t>(1, (int64_t)dev.num_sms * t.wave / std::max<int64_t>(base, 1));
  want = std::min<int64_t>({want, std::max(dev.max_split, 1), stages});
  s.split = 1;
  while (2 * s.split <= want) s.split *= 2;
  s.ctas = base * s.split;
  return s;
}

cudaError_t gate(const GateArgs& a, const GateDevice& dev, cudaStream_t stream) {
  // The plan validated types, shapes and strides; only the rows' alignment is per run.
  if (a.n_rows == 0) return cudaSuccess;
  const GateShape s = gate_shape(a, dev);
  return dispatch_weight_type(a.w_type, [&](auto W) {
    return dispatch_float_type(a.h_type, [&](auto H) {
      if (!vec_rows(a)) return launch<SmallTile, W.value, H.value, false>(a, s, stream);
      return dispatch_index<kGateTiles>(s.tile, [&](auto I) {
        return launch<std::tuple_element_t<I.value, TileList>, W.value, H.value, true>(a, s, stream);
      });
    });
  });
}

}  // namespace dfsel::cuda
