// Element types: those read as stored (SPEC section 2.1: codebooks F32, F16, BF16, Q8_0) and
// ggml's block types that plan creation widens to BF16.
#pragma once

#include <stdint.h>
#include <string.h>

#include "dfsel/dfsel.h"
#include "hd.cuh"
#include "kernels/topk/topk_order.cuh"

namespace dfsel {

constexpr int kQ8Block = 32;  // ggml Q8_0: 32 int8 values sharing one f16 scale
constexpr int kQKBlock = 256;  // ggml K-quants: super-blocks of 256 values

// The quiet NaN each type stores where the code makes one (no payload): float, half, bfloat16.
constexpr uint32_t kF32NaNBits = 0x7fc00000u;
constexpr uint16_t kF16NaNBits = 0x7e00u;
constexpr uint16_t kBF16NaNBits = 0x7fc0u;

struct BlockQ8_0 {
  uint16_t d;  // f16 scale
  int8_t qs[kQ8Block];
};
static_assert(sizeof(BlockQ8_0) == 34, "ggml's Q8_0 block is 34 bytes");

DFSEL_HD float bits_to_float(uint32_t u) { return topk::float_of_bits(u); }
DFSEL_HD uint32_t float_to_bits(float f) { return topk::bits_of_float(f); }

// IEEE half and bfloat16 to float, exact (subnormals and NaN payloads kept), bit-level so that
// host and device agree without intrinsics: the top-K's conversions (kernels/topk/topk_order.cuh).
DFSEL_HD float f16_to_float(uint16_t h) { return topk::f16_bits_to_float(h); }

DFSEL_HD float bf16_to_float(uint16_t b) { return topk::bf16_bits_to_float(b); }

// Round to nearest even; used by tests and fixtures to make stored values.
DFSEL_HD uint16_t float_to_bf16(float f) {
  uint32_t u = float_to_bits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

DFSEL_HD uint16_t float_to_f16(float f) {
  const uint32_t u = float_to_bits(f);
  const uint32_t sign = (u >> 16) & 0x8000u;
  const uint32_t au = u & 0x7fffffffu;
  if (au > 0x7f800000u) return (uint16_t)(sign | kF16NaNBits);
  if (au >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u);  // rounds to inf
  if (au < 0x38800000u) {                                      // subnormal or zero
    if (au < 0x33000000u) return (uint16_t)sign;
    const uint32_t e = au >> 23;
    const uint32_t man = (au & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126u - e;  // value = man * 2^(e - 150), in units of 2^-24
    uint32_t q = man >> shift;
    const uint32_t rest = man & ((1u << shift) - 1u);
    const uint32_t half = 1u << (shift - 1);
    if (rest > half || (rest == half && (q & 1u))) ++q;
    return (uint16_t)(sign | q);
  }
  uint32_t h = ((au - 0x38000000u) >> 13);
  const uint32_t rest = au & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1u))) ++h;
  return (uint16_t)(sign | h);
}

// The float of one stored F32, F16 or BF16 element given its bits (a 2-byte type's in the low
// half, the high half zero), by the conversions above: for code templated on the type (the
// top-K's items, the gate's row reads, load_elems).
template <dfsel_type T>
DFSEL_HD float stored_to_float(uint32_t bits) {
  static_assert(T == DFSEL_TYPE_F32 || T == DFSEL_TYPE_F16 || T == DFSEL_TYPE_BF16, "a stored float type");
  if constexpr (T == DFSEL_TYPE_F32) return bits_to_float(bits);
  else if constexpr (T == DFSEL_TYPE_F16) return f16_to_float((uint16_t)bits);
  else return bits_to_float(bits << 16);  // bf16_to_float
}

// A block type that plan creation widens to BF16: values and bytes a block (ggml's layouts,
// ggml-common.h); {0, 0} for any other type.
struct WidenedBlock {
  int elems;
  int bytes;
};
DFSEL_HD WidenedBlock widened_block(dfsel_type t) {
  switch (t) {
    case DFSEL_TYPE_Q4_0: return {32, 18};
    case DFSEL_TYPE_Q4_1: return {32, 20};
    case DFSEL_TYPE_Q5_0: return {32, 22};
    case DFSEL_TYPE_Q5_1: return {32, 24};
    case DFSEL_TYPE_Q2_K: return {kQKBlock, 84};
    case DFSEL_TYPE_Q3_K: return {kQKBlock, 110};
    case DFSEL_TYPE_Q4_K: return {kQKBlock, 144};
    case DFSEL_TYPE_Q5_K: return {kQKBlock, 176};
    case DFSEL_TYPE_Q6_K: return {kQKBlock, 210};
    default: return {0, 0};
  }
}

// Bytes of one row of n elements (n a multiple of the block size for a block type).
DFSEL_HD size_t row_bytes(dfsel_type t, int64_t n) {
  switch (t) {
    case DFSEL_TYPE_F32: return (size_t)n * 4;
    case DFSEL_TYPE_F16:
    case DFSEL_TYPE_BF16: return (size_t)n * 2;
    case DFSEL_TYPE_Q8_0: return (size_t)(n / kQ8Block) * sizeof(BlockQ8_0);
    default: {  // a type widened to BF16 at set-up, or 0
      const WidenedBlock b = widened_block(t);
      return b.elems ? (size_t)(n / b.elems) * (size_t)b.bytes : 0;
    }
  }
}

// ggml's nb[0] of a type: the element size, or the block size of a quantised type; 0 if unknown.
DFSEL_HD size_t type_block_bytes(dfsel_type t) {
  switch (t) {
    case DFSEL_TYPE_F32: return 4;
    case DFSEL_TYPE_F16:
    case DFSEL_TYPE_BF16: return 2;
    case DFSEL_TYPE_Q8_0: return sizeof(BlockQ8_0);
    default: return (size_t)widened_block(t).bytes;
  }
}

// Which types may stand where: logits and hidden states are floats; codebooks and W_h are
// floats or Q8_0 as the kernels read them, and the block types plan creation widens to BF16.
DFSEL_HD bool is_float_type(dfsel_type t) {
  return t == DFSEL_TYPE_F32 || t == DFSEL_TYPE_F16 || t == DFSEL_TYPE_BF16;
}
DFSEL_HD bool is_widened_type(dfsel_type t) { return widened_block(t).elems != 0; }
DFSEL_HD bool is_stored_weight_type(dfsel_type t) { return is_float_type(t) || t == DFSEL_TYPE_Q8_0; }
DFSEL_HD bool is_weight_type(dfsel_type t) { return is_stored_weight_type(t) || is_widened_type(t); }

// The weight types, as messages list them (dfsel_type_name's spelling).
constexpr const char* kWeightTypeList = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K or Q6_K";

// One Q8_0 value: the block scale (f16 bits) times the quant, in float. The one definition
// of the dequantisation; kernels that load blocks their own way convert through it.
DFSEL_HD float q8_value(uint16_t d_bits, int8_t q) { return f16_to_float(d_bits) * (float)q; }

// Element i of a row stored as t, as float.
DFSEL_HD float load_elem(const void* row, dfsel_type t, int64_t i) {
  switch (t) {
    case DFSEL_TYPE_F32: return ((const float*)row)[i];
    case DFSEL_TYPE_F16: return f16_to_float(((const uint16_t*)row)[i]);
    case DFSEL_TYPE_BF16: return bf16_to_float(((const uint16_t*)row)[i]);
    case DFSEL_TYPE_Q8_0: {
      const BlockQ8_0* b = (const BlockQ8_0*)row + i / kQ8Block;
      return q8_value(b->d, b->qs[i % kQ8Block]);
    }
    default: return 0.0f;
  }
}

// Elements [0, n) of a row stored as t, as floats: load_elem's values, with the type decided
// once a row instead of once an element (host code: the CPU reference and backends widen rows
// with it).
inline void load_elems(const void* row, dfsel_type t, int64_t n, float* out) {
  switch (t) {
    case DFSEL_TYPE_F32: memcpy(out, row, (size_t)n * 4); return;
    case DFSEL_TYPE_F16:
      for (int64_t i = 0; i < n; ++i) out[i] = stored_to_float<DFSEL_TYPE_F16>(((const uint16_t*)row)[i]);
      return;
    case DFSEL_TYPE_BF16:
      for (int64_t i = 0; i < n; ++i) out[i] = stored_to_float<DFSEL_TYPE_BF16>(((const uint16_t*)row)[i]);
      return;
    case DFSEL_TYPE_Q8_0: {
      const BlockQ8_0* b = (const BlockQ8_0*)row;
      int64_t i = 0;
      for (; i + kQ8Block <= n; i += kQ8Block, ++b)
        for (int j = 0; j < kQ8Block; ++j) out[i + j] = q8_value(b->d, b->qs[j]);
      for (; i < n; ++i) out[i] = load_elem(row, t, i);  // a row ending inside a block
      return;
    }
    default:
      for (int64_t i = 0; i < n; ++i) out[i] = load_elem(row, t, i);
  }
}

}  // namespace dfsel
