// Tensor-core pieces of the gate (gate.cu): BF16 mma.sync with F32 accumulators, on values
// split into BF16 terms so that the products keep float precision.
//
// A value of type T is the sum of terms_of(T) BF16 numbers exactly (BF16 1, F16 2: 11 bits in
// 8 + 3; F32 3: 24 bits in 8 + 8 + 8; Q8_0 3: a F16 scale times an int8 has at most 18 bits).
// The gate multiplies a W_h term i by a hidden term j where i + j < 3: every product larger
// than 2^-24 of |w h| is made, so each product is within float rounding of w * h and the
// tensor cores' F32 sums are the only other rounding.
#pragma once

#include <cuda_fp16.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "kernels/common/mma.cuh"

namespace dfsel::cuda {

constexpr int terms_of(dfsel_type t) { return t == DFSEL_TYPE_BF16 ? 1 : t == DFSEL_TYPE_F16 ? 2 : 3; }
constexpr int kTermBits = 3;  // products of terms i and j are made while i + j < kTermBits

// Splits (x0, x1) into N BF16 pairs, largest first: t[i] holds term i of x0 in its low half
// and of x1 in its high half (mma's order: the lower k index in the low half). Non-finite
// values give NaN terms (the residual of an infinity is NaN).
template <int N>
__device__ __forceinline__ void to_terms(float x0, float x1, uint32_t (&t)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) {
    uint32_t p;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(p) : "f"(x1), "f"(x0));
    t[i] = p;
    if (i + 1 < N) {
      x0 -= __uint_as_float(p << 16);
      x1 -= __uint_as_float(p & 0xffff0000u);
    }
  }
}

// 16 bytes global -> shared, not waited on; zero-filled where !valid (src is then not read).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  const uint32_t d = (uint32_t)__cvta_generic_to_shared(dst);
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(d), "l"(src), "r"(valid ? 16 : 0) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }

// Four consecutive elements of a staged row (shared memory) as BF16 terms: lo[i] holds term i
// of elements 0 and 1, hi[i] of elements 2 and 3. kRaw: the row holds T as stored (F16 or
// BF16); otherwise floats (F32 rows, and every type staged through registers).
template <dfsel_type T, bool kRaw>
struct StagedTerms {
  static constexpr int kTerms = terms_of(T);
  static constexpr int kBytes = kRaw ? 2 : 4;  // per staged element

  __device__ __forceinline__ static void load(const uint8_t* p, uint32_t (&lo)[kTerms], uint32_t (&hi)[kTerms]) {
    if constexpr (kRaw && T == DFSEL_TYPE_BF16) {
      const uint2 v = *(const uint2*)p;
      lo[0] = v.x;
      hi[0] = v.y;
    } else if constexpr (kRaw) {
      static_assert(T == DFSEL_TYPE_F16, "2-byte staged rows are F16 or BF16");
      const uint2 v = *(const uint2*)p;
      const float2 a = __half22float2(*(const __half2*)&v.x), b = __half22float2(*(const __half2*)&v.y);
      to_terms(a.x, a.y, lo);
      to_terms(b.x, b.y, hi);
    } else {
      const float4 v = *(const float4*)p;
      to_terms(v.x, v.y, lo);
      to_terms(v.z, v.w, hi);
    }
  }
};

}  // namespace dfsel::cuda
