// ggml's K-quants, super-blocks of 256 values laid out as ggml-common.h stores them. Element i
// is named by half h = i / 128 (Q2_K, Q3_K, Q6_K) or pair g = i / 64 (Q4_K, Q5_K), and within it
// quarter j and lane l = i % 32.
//
// Q2_K, 84 bytes: 16 bytes of scales (sub-block s of 16 values: scale = low nibble of byte s,
// min = high nibble), 64 bytes of 2-bit quants (bits 2j of byte 32h + l), f16 d, f16 dmin.
// Q3_K, 110 bytes: 32 bytes of high bits (bit 4h + j of byte l), 64 bytes of 2-bit quants as
// Q2_K's, 12 bytes holding sixteen 6-bit scales, f16 d. The quant is the 2 bits less 4 where
// the high bit is clear; scale s is its 6 bits less 32: low 4 bits from byte s (s < 8) or the
// high nibble of byte s - 8, top 2 bits from bits 2 (s / 4) of byte 8 + s % 4.
// Q4_K, 144 bytes: f16 d, f16 dmin, 12 bytes holding eight 6-bit scales and mins (sub-blocks
// of 32), 128 bytes of nibbles: element i in byte 32g + l, low nibble for the pair's first 32.
// Scale/min s < 4 are the low 6 bits of bytes s / s + 4; s >= 4 take their low 4 bits from
// byte s + 4 (scale low nibble, min high nibble) and their top 2 bits from the top bits of
// bytes s - 4 (scale) and s (min).
// Q5_K, 176 bytes: Q4_K's d, dmin and scales, 32 bytes of fifth bits (bit 2g + 1 for the
// pair's second 32, else 2g, of byte l), then Q4_K's 128 bytes of nibbles.
// Q6_K, 210 bytes: 128 bytes of low 4 bits (byte 64h + 32 (j & 1) + l, low nibble for j < 2),
// 64 bytes of high 2 bits (bits 2j of byte 32h + l), 16 int8 scales (one per 16 values), f16 d.
// The quant is the 6 bits less 32.
#include <cstring>

#include "host/gguf/block_unpack.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

float f16_at(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return f16_to_float(v);
}

// The eight 6-bit scales and mins of Q4_K and Q5_K.
void scales_and_mins_k4(const uint8_t* s, Unpacked* out) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      out->scale[j] = s[j] & 63;
      out->min[j] = s[j + 4] & 63;
    } else {
      out->scale[j] = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
      out->min[j] = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
  }
}

// The 2 bits of element i in Q2_K's and Q3_K's 64 bytes of quants.
int two_bits(const uint8_t* qs, int i) {
  const int h = i / 128, j = (i % 128) / 32, l = i % 32;
  return (qs[32 * h + l] >> (2 * j)) & 3;
}

}  // namespace

void unpack_q2_k(const uint8_t* block, Unpacked* out) {
  out->d = f16_at(block + 80);
  out->dmin = f16_at(block + 82);
  for (int s = 0; s < 16; ++s) {
    out->scale[s] = block[s] & 0x0f;
    out->min[s] = block[s] >> 4;
  }
  for (int i = 0; i < 256; ++i) out->q[i] = int8_t(two_bits(block + 16, i));
}

void unpack_q3_k(const uint8_t* block, Unpacked* out) {
  const uint8_t* high = block;
  const uint8_t* sc = block + 96;
  out->d = f16_at(block + 108);
  for (int s = 0; s < 16; ++s) {
    const int low4 = s < 8 ? (sc[s] & 0x0f) : (sc[s - 8] >> 4);
    const int top2 = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
    out->scale[s] = (low4 | (top2 << 4)) - 32;
  }
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const bool set = (high[l] >> (4 * h + j)) & 1;
    out->q[i] = int8_t(two_bits(block + 32, i) - (set ? 0 : 4));
  }
}

void unpack_q4_k(const uint8_t* block, Unpacked* out) {
  out->d = f16_at(block);
  out->dmin = f16_at(block + 2);
  scales_and_mins_k4(block + 4, out);
  const uint8_t* qs = block + 16;
  for (int i = 0; i < 256; ++i) {
    const int g = i / 64, l = i % 32;
    const uint8_t byte = qs[32 * g + l];
    out->q[i] = int8_t(i % 64 < 32 ? (byte & 0x0f) : (byte >> 4));
  }
}

void unpack_q5_k(const uint8_t* block, Unpacked* out) {
  unpack_q4_k(block, out);  // d, dmin, scales, mins, and nibbles but 32 bytes further on
  const uint8_t* fifth = block + 16;
  const uint8_t* qs = block + 48;
  for (int i = 0; i < 256; ++i) {
    const int g = i / 64, l = i % 32, second = i % 64 >= 32;
    const uint8_t byte = qs[32 * g + l];
    const int nibble = second ? (byte >> 4) : (byte & 0x0f);
    out->q[i] = int8_t(nibble | (((fifth[l] >> (2 * g + second)) & 1) << 4));
  }
}

void unpack_q6_k(const uint8_t* block, Unpacked* out) {
  const uint8_t* ql = block;
  const uint8_t* qh = block + 128;
  out->d = f16_at(block + 208);
  for (int s = 0; s < 16; ++s) out->scale[s] = int8_t(block[192 + s]);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, j = (i % 128) / 32, l = i % 32;
    const uint8_t lo_byte = ql[64 * h + 32 * (j & 1) + l];
    const int lo = j < 2 ? (lo_byte & 0x0f) : (lo_byte >> 4);
    const int hi = (qh[32 * h + l] >> (2 * j)) & 3;
    out->q[i] = int8_t((lo | (hi << 4)) - 32);
  }
}

}  // namespace dfsel::gguf
