// The DSpark pass's product on tensor cores (docs/dspark.md, "The CUDA backend"): a warp
// multiplies 16 W2 rows (BF16, as stored, read straight into registers) by the W1 rows of a
// group of blocks with BF16 mma.sync and F32 accumulators: the rows as M, R as K, the blocks
// as N.
//
// The K order is a fixed permutation of R: in each chunk of 32 elements, lane t of a quad
// (t = lane % 4) holds elements 8t .. 8t + 7 of its rows, one 16-byte load, and gives them to
// mma as k 2t, 2t + 1 (a0), 2t + 8, 2t + 9 (a2) of the chunk's first step and the same of its
// second; e's terms are read the same way. Every row goes through the same order, so a
// (row, block) element is the same sum whichever rows and blocks share its tile.
//
// e (floats) enters as BF16 terms that sum to it exactly: one term when it is BF16 already
// (W1 stored as BF16, K-quants widened to it), else three (each the truncation of what the
// terms before it leave: 8 + 8 + 8 bits hold a float's 24). Every product of a W2 element and
// a term is exact, so the tensor cores' F32 sums are the only rounding: the same bits for every
// shard count, placement and batching, and within rounding of the eight chains the CPU sums.
#pragma once

#include <stdint.h>

#include "kernels/block/dspark_rows.cuh"
#include "kernels/common/dspark_args.cuh"
#include "kernels/common/mma.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {

constexpr int kDSparkMmaChunks = 8;  // chunks of 32 elements a row: R at most 256

// The BF16 terms of x, largest first (the bits of each). A non-finite x is its own first term.
template <int TERMS>
__device__ __forceinline__ void dspark_e_terms(float x, uint16_t (&t)[TERMS]) {
  const bool finite = isfinite(x);
#pragma unroll
  for (int i = 0; i < TERMS; ++i) {
    const uint32_t head = __float_as_uint(x) & 0xffff0000u;
    t[i] = i == 0 || finite ? (uint16_t)(head >> 16) : 0;
    if (i + 1 < TERMS) x = x - __uint_as_float(head);  // exact: the bits below the head
  }
}

// The e rows of the active blocks (active[gi], gi < n_act: column gi % NB of group gi / NB) as
// terms in shared memory: row (g * TERMS + q) * NB + j holds term q of block j of group g, R
// elements in W2's order, rows e_pitch bytes apart; eight elements a thread at a time (R a
// multiple of 8, e's rows 32-byte aligned). The rows of columns past n_act are left as they
// are: what they give is never read (mma's columns do not meet).
template <int NB, int TERMS>
__device__ __forceinline__ void dspark_fill_e_terms(uint8_t* e_b, int e_pitch, const float* e, int R8, int R,
                                                    const int32_t* active, int n_act) {
  const int per_row = R / 8;
  for (int i = threadIdx.x; i < n_act * per_row; i += blockDim.x) {
    const int gi = i / per_row, r = 8 * (i - gi * per_row), g = gi / NB, j = gi - g * NB;
    const float4* src = reinterpret_cast<const float4*>(e + (size_t)active[gi] * R8 + r);
    const float4 x0 = src[0], x1 = src[1];
    const float x[8] = {x0.x, x0.y, x0.z, x0.w, x1.x, x1.y, x1.z, x1.w};
    uint32_t w[TERMS][4];
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      uint16_t lo[TERMS], hi[TERMS];
      dspark_e_terms<TERMS>(x[2 * p], lo);
      dspark_e_terms<TERMS>(x[2 * p + 1], hi);
#pragma unroll
      for (int q = 0; q < TERMS; ++q) w[q][p] = (uint32_t)lo[q] | (uint32_t)hi[q] << 16;
    }
#pragma unroll
    for (int q = 0; q < TERMS; ++q)
      *reinterpret_cast<uint4*>(e_b + (size_t)((g * TERMS + q) * NB + j) * e_pitch + 2 * r) =
          make_uint4(w[q][0], w[q][1], w[q][2], w[q][3]);
  }
}

// A 16-byte load of W2 that the L1 does not keep: kEvictFirst also marks it first to go from
// the L2 (a pass reads a row once a step); otherwise the L2 keeps it as it would any line, so
// that the next step of a one-launch chain finds the rows this one read last.
template <bool kEvictFirst>
__device__ __forceinline__ uint4 dspark_w2_load(const uint4* p) {
  if constexpr (kEvictFirst) {
    return __ldcs(p);
  } else {
    uint4 r;
    asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
                 : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w)
                 : "l"(p));
    return r;
  }
}

// The lane's 16 bytes of each chunk of rows va and vb (< vs, else zeros): chunks
// c < chunks. W2 16-byte aligned, rows too.
template <bool kEvictFirst = true>
__device__ __forceinline__ void dspark_slice_loads(const uint8_t* w2, size_t stride, int64_t va, int64_t vb, int64_t vs,
                                                   int chunks, int lane, uint4 (&wa)[kDSparkMmaChunks],
                                                   uint4 (&wb)[kDSparkMmaChunks]) {
  const uint4* pa = reinterpret_cast<const uint4*>(w2 + (size_t)va * stride) + (lane & 3);
  const uint4* pb = reinterpret_cast<const uint4*>(w2 + (size_t)vb * stride) + (lane & 3);
#pragma unroll
  for (int c = 0; c < kDSparkMmaChunks; ++c) {
    wa[c] = va < vs && c < chunks ? dspark_w2_load<kEvictFirst>(pa + 4 * c) : make_uint4(0u, 0u, 0u, 0u);
    wb[c] = vb < vs && c < chunks ? dspark_w2_load<kEvictFirst>(pb + 4 * c) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// A warp's slice staged in shared memory (the one launch's staged builds): the lane's 16 bytes
// of chunk c of row va at piece c * 32 + lane, of row vb at (kDSparkMmaChunks + c) * 32 + lane.
// Each lane copies the pieces it reads itself later, so the lanes need no barrier between them.
constexpr int kDSparkStagePieces = 2 * kDSparkMmaChunks * 32;  // 16 bytes each: 8 KB a warp

// An L2 eviction policy for W2's loads (createpolicy: a uniform 64-bit value). kDSparkL2Keep
// ranks a line last to go, kDSparkL2Stream first, kDSparkL2Normal and kDSparkL2None as any line.
enum DSparkL2Priority { kDSparkL2None = 0, kDSparkL2Keep, kDSparkL2Stream, kDSparkL2Normal };

__device__ __forceinline__ uint64_t dspark_l2_policy(int priority) {
  uint64_t p;
  if (priority == kDSparkL2Keep) asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(p));
  else if (priority == kDSparkL2Stream) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(p));
  return p;
}

// 16 bytes global -> shared as cp_async_zfill16, with an L2 eviction policy.
__device__ __forceinline__ void cp_async_zfill16_policy(void* dst, const void* src, bool valid, uint64_t policy) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(d), "l"(src),
               "r"(valid ? 16 : 0), "l"(policy)
               : "memory");
}

// A slice's two rows (va and va + 8, zeros past vs) on their way into the warp's stage, their
// addresses and L2 policy (DSparkL2Priority) found once a slice: copy(c) issues chunk c's
// 16-byte asynchronous copies (the caller commits the group).
struct DSparkSliceCopy {
  const uint4* pa;
  const uint4* pb;
  uint64_t policy;
  bool a_in, b_in;
  __device__ __forceinline__ void copy(uint4* stage, int c, int lane) const {
    cp_async_zfill16_policy(stage + c * 32 + lane, pa + 4 * c, a_in, policy);
    cp_async_zfill16_policy(stage + (kDSparkMmaChunks + c) * 32 + lane, pb + 4 * c, b_in, policy);
  }
};

__device__ __forceinline__ DSparkSliceCopy dspark_slice_copy(const uint8_t* w2, size_t stride, int va, int vs, int lane,
                                                             int priority) {
  const int vb = va + 8;
  DSparkSliceCopy s;
  s.a_in = va < vs, s.b_in = vb < vs;
  s.pa = reinterpret_cast<const uint4*>(w2 + (size_t)(s.a_in ? va : vs - 1) * stride) + (lane & 3);
  s.pb = reinterpret_cast<const uint4*>(w2 + (size_t)(s.b_in ? vb : vs - 1) * stride) + (lane & 3);
  s.policy = dspark_l2_policy(priority);
  return s;
}

// The bytes between e's term rows in shared memory: 2R rounded up to 64, and 64 more where that
// is a multiple of 128, so that the two rows a quarter-warp's 16-byte reads meet (4 lanes a row,
// 64 bytes each) fall on different banks.
DFSEL_HD int dspark_mma_pitch(int R) {
  const int p = (2 * R + 63) / 64 * 64;
  return p % 128 == 0 ? p + 64 : p;
}

struct DSparkNoReload {
  __device__ void operator()(int) const {}
};

// acc[n] = the slice (rows g8 and g8 + 8 in wa, wb) times the e rows 8n .. 8n + 7 from e_g, in
// mma's fragment layout (kernels/common/mma.cuh); chunks c < chunks, steps in order. after(c)
// runs once chunk c's registers are read (to load the next slice's chunk c into them).
template <int NT, class After = DSparkNoReload>
__device__ __forceinline__ void dspark_slice_mma(uint4 (&wa)[kDSparkMmaChunks], uint4 (&wb)[kDSparkMmaChunks],
                                                 const uint8_t* e_g, int e_pitch, int chunks, int lane,
                                                 float (&acc)[NT][4], After after = {}) {
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const uint8_t* e_lane = e_g + (size_t)(lane >> 2) * e_pitch + 16 * (lane & 3);
#pragma unroll
  for (int c = 0; c < kDSparkMmaChunks; ++c) {
    if (c >= chunks) break;
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint4 b = *reinterpret_cast<const uint4*>(e_lane + (size_t)8 * n * e_pitch + 64 * c);
      mma_bf16(acc[n], wa[c].x, wb[c].x, wa[c].y, wb[c].y, b.x, b.y);
      mma_bf16(acc[n], wa[c].z, wb[c].z, wa[c].w, wb[c].w, b.z, b.w);
    }
    after(c);
  }
}

// The same from the warp's stage (the slice's copies landed): each chunk read as it is
// multiplied, so that the slice never sits whole in registers; after(c) may copy the next
// slice's chunk c over it.
template <int NT, class After = DSparkNoReload>
__device__ __forceinline__ void dspark_staged_mma(const uint4* stage, const uint8_t* e_g, int e_pitch, int chunks,
                                                  int lane, float (&acc)[NT][4], After after = {}) {
#pragma unroll
  for (int n = 0; n < NT; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const uint8_t* e_lane = e_g + (size_t)(lane >> 2) * e_pitch + 16 * (lane & 3);
#pragma unroll
  for (int c = 0; c < kDSparkMmaChunks; ++c) {
    if (c >= chunks) break;
    const uint4 wa = stage[c * 32 + lane], wb = stage[(kDSparkMmaChunks + c) * 32 + lane];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      const uint4 b = *reinterpret_cast<const uint4*>(e_lane + (size_t)8 * n * e_pitch + 64 * c);
      mma_bf16(acc[n], wa.x, wb.x, wa.y, wb.y, b.x, b.y);
      mma_bf16(acc[n], wa.z, wb.z, wa.w, wb.w, b.z, b.w);
    }
    after(c);
  }
}

// The block column of a group that slot q of the lane holds in mma's accumulators: 2t, 2t + 1,
// 8 + 2t, 9 + 2t (t = lane % 4).
__device__ __forceinline__ int dspark_mma_column(int q, int lane) { return 8 * (q >> 1) + 2 * (lane & 3) + (q & 1); }

// The base-logits rows of the lane's slots in group g of the active list (z_row, n_act of
// them) and, as bit q of the result, whether slot q holds a block; a slot past n_act keeps
// group 0's first row, so that its loads need no test.
template <int NB>
__device__ __forceinline__ uint32_t dspark_slot_rows(const uint8_t* const* z_row, int n_act, int g, int lane,
                                                     const uint8_t* (&zr)[NB / 4]) {
  uint32_t held = 0;
#pragma unroll
  for (int q = 0; q < NB / 4; ++q) {
    const int gi = g * NB + dspark_mma_column(q, lane);
    held |= gi < n_act ? 1u << q : 0u;
    zr[q] = z_row[gi < n_act ? gi : 0];
  }
  return held;
}

// The base logits and W2 scales of the lane's elements of a slice, loaded before its product:
// rows va and va + 8 of the shard (past vs: z 0, s 1) of the rows zr (dspark_slot_rows). F32
// logits, the usual case, as streamed loads; the type is tested once a slice.
template <int NB>
__device__ __forceinline__ void dspark_slice_z(const DSparkChainArgs& a, const uint8_t* const (&zr)[NB / 4], int va,
                                               int vs, float (&z)[2][NB / 4], float (&s)[2]) {
  constexpr int kSlots = NB / 4;
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int v = va + 8 * ri;
    s[ri] = v < vs && a.scale ? a.scale[a.scale_rows == 1 ? 0 : v] : 1.0f;
  }
  if (a.logits_type == DFSEL_TYPE_F32) {
#pragma unroll
    for (int ri = 0; ri < 2; ++ri)
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        const int v = va + 8 * ri;
        z[ri][q] = v < vs ? __ldcs(reinterpret_cast<const float*>(zr[q]) + v) : 0.0f;
      }
  } else {
#pragma unroll
    for (int ri = 0; ri < 2; ++ri)
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        const int v = va + 8 * ri;
        z[ri][q] = v < vs ? load_elem(zr[q], a.logits_type, v) : 0.0f;
      }
  }
}

// The base logits and W2 scales of the lane's elements of a slice, loaded before its product:
// rows va and va + 8 (past vs: z 0, s 1) for the blocks of its columns of group g of the active
// list, whose base-logits rows are z_row (past n_act: 0).
template <int NB>
__device__ __forceinline__ void dspark_slice_inputs(const DSparkChainArgs& a, const uint8_t* const* z_row, int n_act,
                                                    int g, int64_t va, int64_t vs, int lane, float (&z)[2][NB / 4],
                                                    float (&s)[2], bool stream_z = false) {
#pragma unroll
  for (int ri = 0; ri < 2; ++ri) {
    const int64_t v = va + 8 * ri;
    s[ri] = v < vs && a.scale ? a.scale[a.scale_rows == 1 ? 0 : v] : 1.0f;
#pragma unroll
    for (int q = 0; q < NB / 4; ++q) {
      const int gi = g * NB + dspark_mma_column(q, lane);
      z[ri][q] = !(v < vs && gi < n_act)                         ? 0.0f
                 : stream_z && a.logits_type == DFSEL_TYPE_F32 ? __ldcs(reinterpret_cast<const float*>(z_row[gi]) + v)
                                                                : load_elem(z_row[gi], a.logits_type, v);
    }
  }
}

// W2[v] . e of the lane's element of row va + 8 ri and slot q: the terms' accumulators summed in
// term order (acc from dspark_slice_mma of TERMS * NB / 8 tiles).
template <int NB, int TERMS>
__device__ __forceinline__ float dspark_slice_dot(const float (&acc)[TERMS * NB / 8][4], int ri, int q) {
  const int n = q >> 1, c = 2 * ri + (q & 1);  // the block's eighth; c0 c1 row g8, c2 c3 row g8 + 8
  float dot = acc[n][c];
  if (TERMS > 1) dot = dot + acc[NB / 8 + n][c];
  if (TERMS > 2) dot = dot + acc[2 * NB / 8 + n][c];
  return dot;
}

}  // namespace dfsel::cuda
