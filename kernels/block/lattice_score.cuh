// Phases 4 and 5 of the lattice CTA: S = u + (E_prev[P] * g) . E_next[C]^T over R, a small
// GEMM per drafted row. Both factors are staged in shared memory as floats, R in chunks (A and
// B stay near 64 KB for every K), and each thread owns a kT x kT register tile of S. Every row
// is summed in one fixed order whatever the shard count or the placement, so results are
// bitwise identical across them (SPEC section 4.8). One instance per codebook type T.
#pragma once

#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {

// Elements r..r+3 of a codebook row as float, exactly load_elem's values. vec: r + 4 <= R and
// rows aligned for one 16-byte (F32) or 8-byte (F16/BF16) load.
template <dfsel_type T>
__device__ __forceinline__ void load4(const uint8_t* row, int r, int R, bool vec, float (&v)[4]) {
  if (!vec) {
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = r + c < R ? load_elem(row, T, r + c) : 0.0f;
    return;
  }
  if constexpr (T == DFSEL_TYPE_F32) {
    const float4 x = __ldg((const float4*)(row + (size_t)r * 4));
    v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
  } else if constexpr (T == DFSEL_TYPE_Q8_0) {
    const BlockQ8_0* blk = (const BlockQ8_0*)row + r / kQ8Block;
    const uint16_t d = __ldg(&blk->d);
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = q8_value(d, __ldg(blk->qs + r % kQ8Block + c));
  } else {
    const uint2 x = __ldg((const uint2*)(row + (size_t)r * 2));
    const uint16_t h[4] = {(uint16_t)(x.x & 0xffffu), (uint16_t)(x.x >> 16),
                           (uint16_t)(x.y & 0xffffu), (uint16_t)(x.y >> 16)};
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = T == DFSEL_TYPE_F16 ? f16_to_float(h[c]) : bf16_to_float(h[c]);
  }
}

// Elements r..r+7 of an F16 or BF16 row as float, in one 16-byte load (LatticeSmem::vec8).
template <dfsel_type T>
__device__ __forceinline__ void load8(const uint8_t* row, int r, float (&v)[8]) {
  const uint4 x = __ldg((const uint4*)(row + (size_t)r * 2));
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint16_t h = (uint16_t)(w[c / 2] >> (16 * (c % 2)));
    v[c] = T == DFSEL_TYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
  }
}

// Stages the chunk [r0, r0 + rch) of every row: A[i][r] = E_prev[P_i][r] * g[r], B[j][r] =
// E_next[C_j][r]. One gather per iteration: batching several per thread measured slower (11.7
// -> 13.1 us for one block on an H200; with 16-byte loads, four at once 10.1 against 9.94 us),
// so the loop is left to the compiler. 2-byte rows go 8 elements per load, which halves the
// gathers each thread waits on in turn (11.1 -> 9.74 us).
template <int KP, dfsel_type T>
__device__ __forceinline__ void stage_chunk(const LatticeShared<KP>& s, const LatticeSmem& sm, int R, int r0,
                                            float* A, float* B) {
  const int tid = threadIdx.x;
  if constexpr (T == DFSEL_TYPE_F16 || T == DFSEL_TYPE_BF16) {
    if (sm.vec8) {
      const int n8 = sm.rch / 8;
      for (int e = tid; e < 2 * KP * n8; e += kLatticeThreads) {
        const int w = e / (KP * n8), i = (e / n8) % KP, c8 = e % n8, r = r0 + 8 * c8;
        const uint8_t* row = w ? s.nrow[i] : s.prow[i];
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (row && r < R) load8<T>(row, r, v);
        if (!w && r < R) {
#pragma unroll
          for (int c = 0; c < 8; ++c) v[c] *= s.gs[r + c];
        }
        float4* dst = (float4*)&(w ? B : A)[i * sm.ld + 8 * c8];
        dst[0] = make_float4(v[0], v[1], v[2], v[3]);
        dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
      return;
    }
  }
  const int n4 = sm.rch / 4;
  for (int e = tid; e < 2 * KP * n4; e += kLatticeThreads) {
    const int w = e / (KP * n4), i = (e / n4) % KP, c4 = e % n4, r = r0 + 4 * c4;
    const uint8_t* row = w ? s.nrow[i] : s.prow[i];
    float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (row && r < R) load4<T>(row, r, R, sm.vec != 0, v);
    if (!w && r < R) {
#pragma unroll
      for (int c = 0; c < 4; ++c) v[c] *= s.gs[r + c];
    }
    *(float4*)&(w ? B : A)[i * sm.ld + 4 * c4] = make_float4(v[0], v[1], v[2], v[3]);
  }
}

// Leaves S[i][j] = u[j] + dot staged as [KP][KP] in s.region (groups splitting R summed in
// order). Ends with a barrier.
template <int KP, dfsel_type T>
__device__ void score_rows(const LatticeShared<KP>& s, const LatticeSmem& sm, int R) {
  using Tl = LatticeTile<KP>;
  const int tid = threadIdx.x;
  float* A = s.region;
  float* B = s.region + KP * sm.ld;
  const int t = tid % Tl::kTiles, grp = tid / Tl::kTiles;
  const int ti = t / Tl::kSide, tj = t % Tl::kSide;
  float acc[Tl::kT][Tl::kT];
#pragma unroll
  for (int x = 0; x < Tl::kT; ++x)
#pragma unroll
    for (int y = 0; y < Tl::kT; ++y) acc[x][y] = 0.0f;
  const int n4 = sm.rch / 4;
  for (int r0 = 0; r0 < R; r0 += sm.rch) {
    stage_chunk<KP, T>(s, sm, R, r0, A, B);
    __syncthreads();
    for (int c4 = grp; c4 < n4; c4 += Tl::kGroups) {
      float4 av[Tl::kT], bv[Tl::kT];
#pragma unroll
      for (int x = 0; x < Tl::kT; ++x) av[x] = *(const float4*)&A[(ti + x * Tl::kSide) * sm.ld + 4 * c4];
#pragma unroll
      for (int y = 0; y < Tl::kT; ++y) bv[y] = *(const float4*)&B[(tj + y * Tl::kSide) * sm.ld + 4 * c4];
#pragma unroll
      for (int x = 0; x < Tl::kT; ++x)
#pragma unroll
        for (int y = 0; y < Tl::kT; ++y) {
          float v = acc[x][y];
          v = fmaf(av[x].x, bv[y].x, v);
          v = fmaf(av[x].y, bv[y].y, v);
          v = fmaf(av[x].z, bv[y].z, v);
          v = fmaf(av[x].w, bv[y].w, v);
          acc[x][y] = v;
        }
    }
    __syncthreads();
  }
  float* S = s.region;
  float* red = s.region + KP * KP;
#pragma unroll
  for (int x = 0; x < Tl::kT; ++x)
#pragma unroll
    for (int y = 0; y < Tl::kT; ++y) {
      const int i = ti + x * Tl::kSide, j = tj + y * Tl::kSide;
      if (Tl::kGroups == 1) S[i * KP + j] = s.u[j] + acc[x][y];
      else red[grp * KP * KP + i * KP + j] = acc[x][y];
    }
  if (Tl::kGroups > 1) {
    __syncthreads();
    for (int o = tid; o < KP * KP; o += kLatticeThreads) {
      float v = 0.0f;
      for (int g = 0; g < Tl::kGroups; ++g) v += red[g * KP * KP + o];
      S[o] = s.u[o % KP] + v;
    }
  }
  __syncthreads();
}

}  // namespace dfsel::cuda
