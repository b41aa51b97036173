// ggml's 32-value blocks, laid out as ggml-common.h stores them: f16 d, for Q4_1 and Q5_1 an
// f16 m, for Q5_0 and Q5_1 four bytes of fifth bits (bit i of the little-endian word for
// element i), then 16 bytes of nibbles: element j < 16 in the low nibble of byte j, element
// j + 16 in its high nibble. The quant is the nibble with its fifth bit above it; the types
// without m subtract the middle of the range (8, or 16 with a fifth bit) and scale by d, the
// others scale the quant by d and add m.
#include <cstring>

#include "host/gguf/block_unpack.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

void unpack_32(const uint8_t* block, bool has_m, bool has_fifth_bit, Unpacked* out) {
  const uint8_t* p = block + 2;
  out->d = f16_to_float(u16_at(block));
  out->scale[0] = 1;
  if (has_m) {
    out->dmin = -f16_to_float(u16_at(p));  // - (-m * 1) adds m, as ggml does
    out->min[0] = 1;
    p += 2;
  }
  uint32_t fifth = 0;
  if (has_fifth_bit) {
    memcpy(&fifth, p, 4);
    p += 4;
  }
  const int bias = has_m ? 0 : has_fifth_bit ? 16 : 8;
  for (int i = 0; i < 32; ++i) {
    const int nibble = i < 16 ? (p[i] & 0x0f) : (p[i - 16] >> 4);
    out->q[i] = int8_t((nibble | int((fifth >> i) & 1u) << 4) - bias);
  }
}

}  // namespace

void unpack_q4_0(const uint8_t* block, Unpacked* out) { unpack_32(block, false, false, out); }
void unpack_q4_1(const uint8_t* block, Unpacked* out) { unpack_32(block, true, false, out); }
void unpack_q5_0(const uint8_t* block, Unpacked* out) { unpack_32(block, false, true, out); }
void unpack_q5_1(const uint8_t* block, Unpacked* out) { unpack_32(block, true, true, out); }

}  // namespace dfsel::gguf
