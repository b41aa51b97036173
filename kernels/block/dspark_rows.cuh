// A DSpark pass's W2 rows (docs/dspark.md): a tile of rows staged in shared memory, and each
// row's dot products with the blocks' W1 rows in the eight-chain order of
// kernels/common/dspark_math.cuh. Two threads share a row: half h keeps chains 4h..4h+3 (the
// elements 8c + 4h .. 8c + 4h + 3 of every group c of eight), so that each chain is still one
// thread's fused multiply-adds in element order and the two halves meet exactly as
// chained_dot does.
//
// Staged rows sit `pitch` bytes apart, an odd number of 16-byte units, so that the rows a warp
// reads at once fall in different banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/dspark_math.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {

// The bytes between staged rows of row_bytes: whole 16-byte units, an odd number of them.
DFSEL_HD int dspark_pitch(size_t row_bytes) {
  const int units = (int)((row_bytes + 15) / 16);
  return 16 * (units | 1);
}

// Elements 8c + 4h .. 8c + 4h + 3 of a staged row stored as W (F32, F16, BF16, Q8_0), as float.
template <dfsel_type W>
__device__ __forceinline__ void dspark_load4(const uint8_t* row, int c, int h, float (&w)[4]) {
  if constexpr (W == DFSEL_TYPE_F32) {
    const float4 v = *reinterpret_cast<const float4*>(row + 32 * c + 16 * h);
    w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
  } else if constexpr (W == DFSEL_TYPE_BF16) {
    const uint2 v = *reinterpret_cast<const uint2*>(row + 16 * c + 8 * h);
    w[0] = __uint_as_float(v.x << 16), w[1] = __uint_as_float(v.x & 0xffff0000u);
    w[2] = __uint_as_float(v.y << 16), w[3] = __uint_as_float(v.y & 0xffff0000u);
  } else if constexpr (W == DFSEL_TYPE_F16) {
    const uint2 v = *reinterpret_cast<const uint2*>(row + 16 * c + 8 * h);
    const float2 lo = __half22float2(*reinterpret_cast<const __half2*>(&v.x));
    const float2 hi = __half22float2(*reinterpret_cast<const __half2*>(&v.y));
    w[0] = lo.x, w[1] = lo.y, w[2] = hi.x, w[3] = hi.y;
  } else {  // Q8_0: a group of eight lies in one block of 32; q8_value's one rounding
    const BlockQ8_0* blk = reinterpret_cast<const BlockQ8_0*>(row) + c / 4;
    const float d = f16_to_float(blk->d);
    const int8_t* q = blk->qs + 8 * (c % 4) + 4 * h;
#pragma unroll
    for (int i = 0; i < 4; ++i) w[i] = d * (float)q[i];
  }
}

// acc[j][i] (chain 4h + i of block j) over a staged row: the full groups of eight, then the
// elements of a last partial group that this half has (a chain without an element is left as
// it is). e: nb rows of R8 floats in shared memory.
template <dfsel_type W, int NB>
__device__ __forceinline__ void dspark_row_dots(const uint8_t* row, const float* e, int R8, int R, int h,
                                                float (&acc)[NB][4]) {
#pragma unroll
  for (int j = 0; j < NB; ++j)
#pragma unroll
    for (int i = 0; i < 4; ++i) acc[j][i] = 0.0f;
  const int full = R / kDotChains;
#pragma unroll 4
  for (int c = 0; c < full; ++c) {
    float w[4];
    dspark_load4<W>(row, c, h, w);
#pragma unroll
    for (int j = 0; j < NB; ++j) {
      const float4 x = *reinterpret_cast<const float4*>(e + (size_t)j * R8 + kDotChains * c + 4 * h);
      acc[j][0] = fmaf(w[0], x.x, acc[j][0]);
      acc[j][1] = fmaf(w[1], x.y, acc[j][1]);
      acc[j][2] = fmaf(w[2], x.z, acc[j][2]);
      acc[j][3] = fmaf(w[3], x.w, acc[j][3]);
    }
  }
  if (kDotChains * full == R) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = kDotChains * full + 4 * h + i;
    if (r < R) {
      const float w = load_elem(row, W, r);
#pragma unroll
      for (int j = 0; j < NB; ++j) acc[j][i] = fmaf(w, e[(size_t)j * R8 + r], acc[j][i]);
    }
  }
}

// The dot product of block j from this half's chains and its partner's (lane ^ 1), in
// chained_dot's meeting order. Every lane of the warp calls it.
template <int NB>
__device__ __forceinline__ void dspark_meet_halves(const float (&acc)[NB][4], int h, float (&dot)[NB]) {
#pragma unroll
  for (int j = 0; j < NB; ++j) {
    float c[kDotChains];  // chains 0..3 from half 0, 4..7 from half 1
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float other = __shfl_xor_sync(0xffffffffu, acc[j][i], 1);
      c[i] = h ? other : acc[j][i];
      c[4 + i] = h ? acc[j][i] : other;
    }
    dot[j] = meet_chains(c);
  }
}

// 16-byte asynchronous copies global -> shared (sm_80 and later), completed per thread in
// commit groups: a thread waits for its own, a barrier then shows every thread's.
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
// All but the newest `pending` groups of this thread complete (pending 0 to 2).
__device__ __forceinline__ void cp_async_wait(int pending) {
  if (pending >= 2) asm volatile("cp.async.wait_group 2;" ::: "memory");
  else if (pending == 1) asm volatile("cp.async.wait_group 1;" ::: "memory");
  else asm volatile("cp.async.wait_group 0;" ::: "memory");
}

// 16 bytes global -> shared, not waited on; zeros where !valid (src, still an address inside
// the tensor, is then not read).
__device__ __forceinline__ void cp_async_zfill16(void* dst, const void* src, bool valid) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}

// A thread's share of staging a tile by asynchronous 16-byte copies (16-byte aligned rows):
// units u = tid, tid + threads, ... of the tile's rows x units_per_row, row-major, so that a
// warp's copy instruction reads 512 contiguous bytes. Where a thread's units start and how they
// advance are fixed for the pass, found once (a division), then followed by additions alone.
struct DSparkStageCopy {
  int units;                 // 16-byte units a row
  int first, step;           // the thread's first unit of a tile, and the threads
  int col, dcol;             // its first unit's column, and the column step mod units
  size_t src0, src_step, src_wrap;  // byte offsets in W2 from the tile's first row
  uint32_t dst0, dst_step, dst_wrap;  // and in the stage
};

__device__ __forceinline__ DSparkStageCopy dspark_stage_copy(uint32_t row_bytes, size_t stride, int pitch, int tid,
                                                              int threads) {
  DSparkStageCopy c;
  c.units = (int)(row_bytes / 16);
  c.first = tid;
  c.step = threads;
  const int row = tid / c.units, drow = threads / c.units;
  c.col = tid - row * c.units;
  c.dcol = threads - drow * c.units;
  c.src0 = (size_t)row * stride + 16 * (size_t)c.col;
  c.src_step = (size_t)drow * stride + 16 * (size_t)c.dcol;
  c.src_wrap = stride - 16 * (size_t)c.units;
  c.dst0 = (uint32_t)(row * pitch + 16 * c.col);
  c.dst_step = (uint32_t)(drow * pitch + 16 * c.dcol);
  c.dst_wrap = (uint32_t)(pitch - 16 * c.units);
  return c;
}

// Rows [0, rows) of a tile (its first row at tile) into a stage.
__device__ __forceinline__ void dspark_stage_async(const DSparkStageCopy& c, uint8_t* stage, const uint8_t* tile,
                                                   int rows) {
  const int total = c.units * rows;
  const uint8_t* src = tile + c.src0;
  uint32_t dst = smem_addr(stage) + c.dst0;
  int col = c.col;
  for (int u = c.first; u < total; u += c.step) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
    src += c.src_step;
    dst += c.dst_step;
    col += c.dcol;
    if (col >= c.units) col -= c.units, src += c.src_wrap, dst += c.dst_wrap;
  }
}

// The same by the CTA's threads with ordinary loads, for rows that are not 16-byte aligned:
// `unit` bytes at a time, the largest power of two that divides the address, stride and row.
__device__ __forceinline__ void dspark_stage_threads(uint8_t* stage, int pitch, const uint8_t* w2, size_t stride,
                                                     uint32_t row_bytes, int64_t row0, int rows, int unit) {
  const uint32_t per_row = row_bytes / (uint32_t)unit;
  for (uint32_t i = threadIdx.x; i < per_row * (uint32_t)rows; i += blockDim.x) {
    const uint32_t t = i / per_row, at = (i % per_row) * (uint32_t)unit;
    const uint8_t* src = w2 + (size_t)(row0 + t) * stride + at;
    uint8_t* dst = stage + (size_t)t * pitch + at;
    switch (unit) {
      case 16: *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(src); break;
      case 8: *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src); break;
      case 4: *reinterpret_cast<uint32_t*>(dst) = *reinterpret_cast<const uint32_t*>(src); break;
      case 2: *reinterpret_cast<uint16_t*>(dst) = *reinterpret_cast<const uint16_t*>(src); break;
      default: *dst = *src; break;
    }
  }
}

}  // namespace dfsel::cuda
