// The one place where runtime values become template parameters (STYLE: one dispatch point per
// kernel family): the K bucket, the element types, a copy unit and an index into a launcher's
// own list of shapes. A launcher calls a dispatch with a generic lambda that returns the
// launch's cudaError_t; the lambda receives the compile-time value as an std::integral_constant
// (a copy unit as Unit<U>).
//
// A value outside a table is refused: the dispatch returns cudaErrorInvalidValue without
// calling the lambda, and the host reports the launch that failed (cuda_fail). No value falls
// through to another value's instance. Plan creation validates every value first
// (host/plan/validate.cpp), so a refusal here is a caller's bug made loud, never a wrong answer.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <type_traits>

#include "dfsel/dfsel.h"
#include "kernels/common/limits.cuh"
#include "kernels/topk/topk_policy.cuh"

namespace dfsel::cuda {

template <int V>
using Int = std::integral_constant<int, V>;
template <dfsel_type T>
using Type = std::integral_constant<dfsel_type, T>;
template <class U>
struct Unit {
  using type = U;
};

// Every lambda of a dispatch returns the launch's error, so that a refusal has one type.
template <class F, class Arg>
constexpr bool returns_error() {
  return std::is_same_v<std::invoke_result_t<F, Arg>, cudaError_t>;
}

// K buckets: the kernels size their lists and tiles for the bucket and loop to the runtime k. The
// top-K's buckets (kernels/topk/topk_policy.cuh), so that every kernel of a step has the same.
constexpr int k_bucket(int k) { return topk::k_bucket(k); }
static_assert(kMaxTopK == topk::kMaxK && k_bucket(kMaxTopK) == kMaxTopK, "the largest bucket is the K limit");

// k in [1, kMaxTopK], as its bucket.
template <class F>
cudaError_t dispatch_k(int k, F&& f) {
  static_assert(returns_error<F, Int<8>>(), "a dispatch's lambda returns cudaError_t");
  if (k < 1 || k > kMaxTopK) return cudaErrorInvalidValue;
  switch (k_bucket(k)) {
    case 8: return f(Int<8>{});
    case 16: return f(Int<16>{});
    case 32: return f(Int<32>{});
    default: return f(Int<kMaxTopK>{});
  }
}

// Logits and hidden states: F32, F16, BF16 (numeric.cuh's is_float_type).
template <class F>
cudaError_t dispatch_float_type(dfsel_type t, F&& f) {
  static_assert(returns_error<F, Type<DFSEL_TYPE_F32>>(), "a dispatch's lambda returns cudaError_t");
  switch (t) {
    case DFSEL_TYPE_F32: return f(Type<DFSEL_TYPE_F32>{});
    case DFSEL_TYPE_F16: return f(Type<DFSEL_TYPE_F16>{});
    case DFSEL_TYPE_BF16: return f(Type<DFSEL_TYPE_BF16>{});
    default: return cudaErrorInvalidValue;
  }
}

// Codebooks and W_h as the kernels read them: the float types and Q8_0 (numeric.cuh's
// is_stored_weight_type; K-quants are widened to BF16 at plan creation).
template <class F>
cudaError_t dispatch_weight_type(dfsel_type t, F&& f) {
  if (t == DFSEL_TYPE_Q8_0) return f(Type<DFSEL_TYPE_Q8_0>{});
  return dispatch_float_type(t, static_cast<F&&>(f));
}

// The widest copy unit of at most 16 bytes that divides `bits`, the OR of every address, stride
// and size a copy touches (a zero divides by all: 16).
template <class F>
cudaError_t dispatch_copy_unit(uintptr_t bits, F&& f) {
  static_assert(returns_error<F, Unit<uint4>>(), "a dispatch's lambda returns cudaError_t");
  if (bits % 16 == 0) return f(Unit<uint4>{});
  if (bits % 8 == 0) return f(Unit<uint2>{});
  if (bits % 4 == 0) return f(Unit<uint32_t>{});
  if (bits % 2 == 0) return f(Unit<uint16_t>{});
  return f(Unit<uint8_t>{});
}

// i in [0, N): an index into a launcher's own list of instances (gate.cu's tiles).
template <int N, int I = 0, class F>
cudaError_t dispatch_index(int i, F&& f) {
  if constexpr (I == N) {
    return cudaErrorInvalidValue;
  } else {
    static_assert(returns_error<F, Int<I>>(), "a dispatch's lambda returns cudaError_t");
    if (i == I) return f(Int<I>{});
    return dispatch_index<N, I + 1>(i, static_cast<F&&>(f));
  }
}

}  // namespace dfsel::cuda
