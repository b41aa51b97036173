// Row reads of the gate (gate.cu): eight elements of a W_h or hidden row per lane, loaded as
// stored and converted only where they are used, one instance per stored type.
#pragma once

#include <stdint.h>
#include <string.h>

#include "dfsel/dfsel.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {

// Elements e0..e0+7 of a row as loaded, converted only where they are used, so that every
// load of a pass is in flight before the first conversion waits on one. kVec (the 8 elements
// inside the row, rows 16-byte aligned, 2 for Q8_0): the bytes as stored (F32 in a and b,
// F16/BF16 in a, Q8_0 the 8 quants in a.x, a.y and the block's scale in a.z); otherwise
// the values already as floats.
struct Raw8 {
  uint4 a, b;
};

template <dfsel_type t, bool kVec>
__device__ __forceinline__ Raw8 fetch8(const uint8_t* row, int64_t e0, int64_t n) {
  Raw8 r = {};
  if constexpr (!kVec) {
    float v[8];
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = e0 + i < n ? load_elem(row, t, e0 + i) : 0.0f;
    memcpy(&r, v, sizeof r);
  } else if constexpr (t == DFSEL_TYPE_F32) {
    r.a = __ldg((const uint4*)(row + e0 * 4));
    r.b = __ldg((const uint4*)(row + e0 * 4) + 1);
  } else if constexpr (t == DFSEL_TYPE_Q8_0) {
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

// The floats of fetch8, by the numeric.cuh conversions (stored_to_float; Q8_0: q8_value, as
// load_elem).
template <dfsel_type t, bool kVec>
__device__ __forceinline__ void unpack8(const Raw8& r, float (&v)[8]) {
  if constexpr (!kVec || t == DFSEL_TYPE_F32) {
    memcpy(v, &r, sizeof r);
  } else if constexpr (t == DFSEL_TYPE_Q8_0) {
    const uint32_t w[2] = {r.a.x, r.a.y};
#pragma unroll
    for (int i = 0; i < 8; ++i) v[i] = q8_value((uint16_t)r.a.z, (int8_t)(w[i / 4] >> (8 * (i % 4))));
  } else {
    const uint32_t w[4] = {r.a.x, r.a.y, r.a.z, r.a.w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint16_t x = (uint16_t)(w[i / 2] >> (16 * (i % 2)));
      v[i] = stored_to_float<t>(x);
    }
  }
}

}  // namespace dfsel::cuda
