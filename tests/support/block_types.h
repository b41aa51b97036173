// ggml's block types that dfsel widens to BF16 (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K), described
// for the tests from ggml's block definitions as bit fields: the bits of each element's quant
// and of each sub-block's scale and min. Blocks are packed from chosen fields and read back by
// the same description, apart from the library's unpackers (host/gguf/unpack_*.cpp); an
// element's value follows from its fields.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

// Every type the library widens, in ggml's id order.
extern const std::vector<dfsel_type> kWidenedTypes;

// The fields of one block. Element i of sub-block s = i / sub is worth
//   (f16(d) * scale[s]) * q[i] - (f16(dmin) * min[s])
// in float: each type's value as ggml computes it. Q4_1 and Q5_1 store m and add it: dmin
// holds -m and min[s] is 1. Types without mins keep dmin = 0 and min[s] = 0; Q4_0 .. Q5_1
// have one sub-block and scale 1.
struct BlockFields {
  uint16_t d = 0, dmin = 0;  // f16 bits
  int scale[16] = {}, min[16] = {};
  int q[256] = {};
};

// What the fields of a type may hold (lo == hi: fixed).
struct FieldRange {
  int lo, hi;
};
struct BlockKind {
  int elems, bytes, sub;
  FieldRange q, scale, min;
  bool has_dmin;  // dmin is stored (a min field, or Q4_1's and Q5_1's m)
};
BlockKind block_kind(dfsel_type t);

void pack_block(dfsel_type t, const BlockFields& f, uint8_t* block);
BlockFields unpack_block(dfsel_type t, const uint8_t* block);

// The value of element i from the fields, by the formula above.
float field_value(dfsel_type t, const BlockFields& f, int i);

// Fields drawn at random over their whole ranges, d and dmin finite powers of two.
BlockFields random_fields(dfsel_type t, std::mt19937_64& rng);

// One block of values quantised by rounding to nearest on a grid that covers them: every
// value within half a step (f16(d) * scale) of its own.
void quantize_block(dfsel_type t, const float* x, uint8_t* block);

}  // namespace dfsel::test
