// dfsel's batched top-K, the layer another engine can vendor (docs/topk.md): the candidate order
// and the exact reads of a stored element, host and device alike. Nothing here needs CUDA.
//
// The order: raw value descending, then id ascending; NaN below every number (-inf included);
// -0 and +0 equal (so they tie on the id). One 64-bit key carries it, so that "better" is one
// unsigned comparison and keys of distinct ids never tie.
//
// Macros a vendoring build may set before the first include:
//   DFSEL_TOPK_NAMESPACE   the namespace everything is declared in (default dfsel::topk); give
//                          each vendored copy its own, so two copies in one process never meet.
#pragma once

#include <stdint.h>
#include <string.h>

#ifndef DFSEL_TOPK_NAMESPACE
#define DFSEL_TOPK_NAMESPACE dfsel::topk
#endif

#if defined(__CUDACC__)
#define DFSEL_TOPK_HD __host__ __device__ __forceinline__
#else
#define DFSEL_TOPK_HD inline
#endif

namespace DFSEL_TOPK_NAMESPACE {

// A selected element: its value as float and its id (column plus the caller's id offset).
struct Rec {
  float z;
  int32_t id;
};
static_assert(sizeof(Rec) == 8, "records are copied as raw 8-byte words");

// The quiet NaN a padding record holds: with id -1 its key is 0, below every real key.
constexpr uint32_t kNaNBits = 0x7fc00000u;

DFSEL_TOPK_HD float float_of_bits(uint32_t u) {
  float f;
  memcpy(&f, &u, 4);
  return f;
}

DFSEL_TOPK_HD uint32_t bits_of_float(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  return u;
}

// Monotone map of a float to uint32: larger value, larger key. NaN maps to 0, below -inf
// (whose key is 0x007fffff); -0 and +0 share one key.
DFSEL_TOPK_HD uint32_t value_key(float z) {
  uint32_t u = bits_of_float(z);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0u;
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The inverse of value_key for a number's key (not 0, NaN's): the float's bits (+0 for both zeros).
DFSEL_TOPK_HD uint32_t value_bits_of_key(uint32_t vk) { return (vk & 0x80000000u) ? (vk & 0x7fffffffu) : ~vk; }

// Ids are stored inverted, so that the lower id has the larger key.
DFSEL_TOPK_HD uint32_t id_key(int32_t id) { return 0xffffffffu - (uint32_t)id; }
DFSEL_TOPK_HD int32_t id_of_key(uint64_t key) { return (int32_t)(0xffffffffu - (uint32_t)key); }

DFSEL_TOPK_HD uint64_t cand_key(float z, int32_t id) { return ((uint64_t)value_key(z) << 32) | (uint64_t)id_key(id); }
DFSEL_TOPK_HD uint64_t cand_key(Rec c) { return cand_key(c.z, c.id); }

// IEEE half to float from its bits, exact: subnormals widened, NaN payloads kept (bit-level, so
// that host and device agree without intrinsics and whatever the compiler's flush-to-zero mode).
DFSEL_TOPK_HD float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t man = h & 0x3ffu;
  if (exp == 0x1f) return float_of_bits(sign | 0x7f800000u | (man << 13));
  if (exp != 0) return float_of_bits(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return float_of_bits(sign);
  int e = -1;  // subnormal: normalise
  do {
    ++e;
    man <<= 1;
  } while ((man & 0x400u) == 0);
  return float_of_bits(sign | ((uint32_t)(112 - e) << 23) | ((man & 0x3ffu) << 13));
}

// bfloat16 to float from its bits: the high half of a float, exact.
DFSEL_TOPK_HD float bf16_bits_to_float(uint16_t b) { return float_of_bits((uint32_t)b << 16); }

}  // namespace DFSEL_TOPK_NAMESPACE
