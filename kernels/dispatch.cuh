// The one place where runtime sizes and element types become template parameters (STYLE:
// one dispatch point per kernel family). A launcher calls a dispatch with a generic lambda;
// the lambda receives the compile-time value as an std::integral_constant.
#pragma once

#include <type_traits>

#include "dfsel/dfsel.h"
#include "kernels/common/limits.cuh"

namespace dfsel::cuda {

template <int V>
using Int = std::integral_constant<int, V>;
template <dfsel_type T>
using Type = std::integral_constant<dfsel_type, T>;

// K buckets: the kernels size their lists and tiles for the bucket and loop to the runtime k.
constexpr int k_bucket(int k) { return k <= 8 ? 8 : k <= 16 ? 16 : k <= 32 ? 32 : kMaxTopK; }
static_assert(k_bucket(kMaxTopK) == kMaxTopK, "the largest bucket is the K limit");

template <class F>
decltype(auto) dispatch_k(int k, F&& f) {
  switch (k_bucket(k)) {
    case 8: return f(Int<8>{});
    case 16: return f(Int<16>{});
    case 32: return f(Int<32>{});
    default: return f(Int<kMaxTopK>{});
  }
}

// Logits and hidden states: F32, F16, BF16 (validated at plan creation and per run).
template <class F>
decltype(auto) dispatch_float_type(dfsel_type t, F&& f) {
  switch (t) {
    case DFSEL_TYPE_F16: return f(Type<DFSEL_TYPE_F16>{});
    case DFSEL_TYPE_BF16: return f(Type<DFSEL_TYPE_BF16>{});
    default: return f(Type<DFSEL_TYPE_F32>{});
  }
}

// Codebooks and W_h as the kernels read them: the float types and Q8_0 (K-quants are widened
// to BF16 at plan creation).
template <class F>
decltype(auto) dispatch_weight_type(dfsel_type t, F&& f) {
  if (t == DFSEL_TYPE_Q8_0) return f(Type<DFSEL_TYPE_Q8_0>{});
  return dispatch_float_type(t, static_cast<F&&>(f));
}

template <class F>
decltype(auto) dispatch_bool(bool b, F&& f) {
  if (b) return f(std::true_type{});
  return f(std::false_type{});
}

}  // namespace dfsel::cuda
