// One block of a widened type unpacked into integers and its scales, so that one loop
// (dequant.cpp) computes every type's values. Element i of sub-block s = i / sub is
//   (d * scale[s]) * q[i] - (dmin * min[s])
// in float, which is ggml's arithmetic for each of these types, rounding included: a type
// without mins has dmin = 0 and min[s] = 0 (x - 0 is x, -0 included); Q4_1 and Q5_1 add their
// stored m, as dmin = -m and min[s] = 1; Q4_0, Q4_1, Q5_0, Q5_1 have one sub-block and scale 1.
#pragma once

#include <stdint.h>

namespace dfsel::gguf {

struct Unpacked {
  float d = 0, dmin = 0;
  int scale[16] = {}, min[16] = {};
  int8_t q[256] = {};
};

using UnpackFn = void (*)(const uint8_t* block, Unpacked* out);

// 32 values a block (unpack_legacy.cpp).
void unpack_q4_0(const uint8_t* block, Unpacked* out);
void unpack_q4_1(const uint8_t* block, Unpacked* out);
void unpack_q5_0(const uint8_t* block, Unpacked* out);
void unpack_q5_1(const uint8_t* block, Unpacked* out);

// 256 values a block (unpack_k.cpp).
void unpack_q2_k(const uint8_t* block, Unpacked* out);
void unpack_q3_k(const uint8_t* block, Unpacked* out);
void unpack_q4_k(const uint8_t* block, Unpacked* out);
void unpack_q5_k(const uint8_t* block, Unpacked* out);
void unpack_q6_k(const uint8_t* block, Unpacked* out);

}  // namespace dfsel::gguf
