// The block types as bit fields (block_types.h). Positions are ggml's block structs in order:
//   Q4_0 {f16 d; u8 qs[16]}                 Q4_1 {f16 d, m; u8 qs[16]}
//   Q5_0 {f16 d; u8 qh[4]; u8 qs[16]}       Q5_1 {f16 d, m; u8 qh[4]; u8 qs[16]}
//   Q2_K {u8 scales[16]; u8 qs[64]; f16 d, dmin}
//   Q3_K {u8 hmask[32]; u8 qs[64]; u8 scales[12]; f16 d}
//   Q4_K {f16 d, dmin; u8 scales[12]; u8 qs[128]}
//   Q5_K {f16 d, dmin; u8 scales[12]; u8 qh[32]; u8 qs[128]}
//   Q6_K {u8 ql[128]; u8 qh[64]; i8 scales[16]; f16 d}
// and the element order of ggml's dequantize_row_* loops.
#include "support/block_types.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/common/numeric.cuh"

namespace dfsel::test {

const std::vector<dfsel_type> kWidenedTypes = {DFSEL_TYPE_Q4_0, DFSEL_TYPE_Q4_1, DFSEL_TYPE_Q5_0,
                                               DFSEL_TYPE_Q5_1, DFSEL_TYPE_Q2_K, DFSEL_TYPE_Q3_K,
                                               DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q5_K, DFSEL_TYPE_Q6_K};

namespace {

// width bits at bit `shift` of byte `byte`.
struct Bits {
  int byte, shift, width;
};

// An integer stored as lo, then hi above it (hi.width 0: none), less bias; or, signed, the
// two's complement of its bits.
struct Field {
  Bits lo, hi = {0, 0, 0};
  int bias = 0;
  bool is_signed = false;
};

// One type: its block, where d and dmin sit (-1: not stored), and its fields (nullptr: scale 1
// and, for min, 1 where dmin is stored, else 0).
struct Layout {
  dfsel_type type;
  int elems, bytes, sub;
  int d_at, dmin_at;
  Field (*quant)(int i);
  Field (*scale)(int s);
  Field (*min)(int s);
};

// Element i of a 32-value block: nibble i % 16 of the quant bytes at qs, low for i < 16.
Bits nibble_32(int qs, int i) { return {qs + i % 16, i < 16 ? 0 : 4, 4}; }

// Element i of a super-block in halves of 128: the 2 bits 2j of byte 32h + l at qs.
Bits two_bits(int qs, int i) { return {qs + 32 * (i / 128) + i % 32, 2 * ((i % 128) / 32), 2}; }

// Element i of Q4_K's and Q5_K's 128 bytes of nibbles at qs: byte 32 (i / 64) + i % 32, low
// nibble for the first 32 of each 64.
Bits nibble_k(int qs, int i) { return {qs + 32 * (i / 64) + i % 32, i % 64 < 32 ? 0 : 4, 4}; }

// Q4_K's and Q5_K's twelve bytes of 6-bit scales and mins at 4.
Field scale_k4(int s) {
  if (s < 4) return {{4 + s, 0, 6}};
  return {{8 + s, 0, 4}, {s, 6, 2}};
}
Field min_k4(int s) {
  if (s < 4) return {{8 + s, 0, 6}};
  return {{8 + s, 4, 4}, {4 + s, 6, 2}};
}

const Layout kLayouts[] = {
    {DFSEL_TYPE_Q4_0, 32, 18, 32, 0, -1, [](int i) { return Field{nibble_32(2, i), {}, 8}; }, nullptr, nullptr},
    {DFSEL_TYPE_Q4_1, 32, 20, 32, 0, 2, [](int i) { return Field{nibble_32(4, i)}; }, nullptr, nullptr},
    {DFSEL_TYPE_Q5_0, 32, 22, 32, 0, -1, [](int i) { return Field{nibble_32(6, i), {2 + i / 8, i % 8, 1}, 16}; },
     nullptr, nullptr},
    {DFSEL_TYPE_Q5_1, 32, 24, 32, 0, 2, [](int i) { return Field{nibble_32(8, i), {4 + i / 8, i % 8, 1}}; }, nullptr,
     nullptr},
    {DFSEL_TYPE_Q2_K, 256, 84, 16, 80, 82, [](int i) { return Field{two_bits(16, i)}; },
     [](int s) { return Field{{s, 0, 4}}; }, [](int s) { return Field{{s, 4, 4}}; }},
    // Q3_K: the high bit (bit 4h + j of hmask[l]) set means the 2 bits as they are, clear less 4.
    {DFSEL_TYPE_Q3_K, 256, 110, 16, 108, -1,
     [](int i) { return Field{two_bits(32, i), {i % 32, 4 * (i / 128) + (i % 128) / 32, 1}, 4}; },
     [](int s) {
       const Bits low = s < 8 ? Bits{96 + s, 0, 4} : Bits{88 + s, 4, 4};
       return Field{low, {104 + s % 4, 2 * (s / 4), 2}, 32};
     },
     nullptr},
    {DFSEL_TYPE_Q4_K, 256, 144, 32, 0, 2, [](int i) { return Field{nibble_k(16, i)}; }, scale_k4, min_k4},
    {DFSEL_TYPE_Q5_K, 256, 176, 32, 0, 2,
     [](int i) { return Field{nibble_k(48, i), {16 + i % 32, 2 * (i / 64) + (i % 64 >= 32), 1}}; }, scale_k4, min_k4},
    {DFSEL_TYPE_Q6_K, 256, 210, 16, 208, -1,
     [](int i) {
       const int h = i / 128, j = (i % 128) / 32, l = i % 32;
       return Field{{64 * h + 32 * (j & 1) + l, j < 2 ? 0 : 4, 4}, {128 + 32 * h + l, 2 * j, 2}, 32};
     },
     [](int s) { return Field{{192 + s, 0, 8}, {}, 0, true}; }, nullptr},
};

const Layout& layout(dfsel_type t) {
  for (const Layout& l : kLayouts)
    if (l.type == t) return l;
  std::abort();  // a test asked for a type that is not widened
}

int width(const Field& f) { return f.lo.width + f.hi.width; }

FieldRange range(const Field& f) {
  const int w = width(f);
  if (f.is_signed) return {-(1 << (w - 1)), (1 << (w - 1)) - 1};
  return {-f.bias, (1 << w) - 1 - f.bias};
}

int read(const Field& f, const uint8_t* b) {
  auto bits = [&](const Bits& p) { return p.width ? (b[p.byte] >> p.shift) & ((1 << p.width) - 1) : 0; };
  const int u = bits(f.lo) | (bits(f.hi) << f.lo.width);
  if (f.is_signed) return u >= (1 << (width(f) - 1)) ? u - (1 << width(f)) : u;
  return u - f.bias;
}

void write(const Field& f, int v, uint8_t* b) {
  const int u = (f.is_signed ? v : v + f.bias) & ((1 << width(f)) - 1);
  auto put = [&](const Bits& p, int x) {
    if (!p.width) return;
    const int mask = (1 << p.width) - 1;
    b[p.byte] = uint8_t((b[p.byte] & ~(mask << p.shift)) | ((x & mask) << p.shift));
  };
  put(f.lo, u);
  put(f.hi, u >> f.lo.width);
}

uint16_t u16_at(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

// The smallest f16 that is >= v (v >= 0 and finite), so a scale never shrinks the range.
uint16_t f16_at_least(float v) {
  uint16_t h = float_to_f16(v);
  if (f16_to_float(h) < v) ++h;
  return h;
}

// The smallest n in [0, hi] with unit * n >= need (hi when none is).
int steps_covering(float unit, float need, int hi) {
  if (!(need > 0) || !(unit > 0)) return 0;
  int n = std::min(hi, int(std::ceil(need / unit)));
  while (n < hi && unit * float(n) < need) ++n;
  return n;
}

}  // namespace

BlockKind block_kind(dfsel_type t) {
  const Layout& l = layout(t);
  const FieldRange one = {1, 1}, none = {0, 0};
  return {l.elems,
          l.bytes,
          l.sub,
          range(l.quant(0)),
          l.scale ? range(l.scale(0)) : one,
          l.min ? range(l.min(0)) : l.dmin_at >= 0 ? one : none,
          l.dmin_at >= 0};
}

// Q4_1 and Q5_1 store m where the others store dmin, and dmin is -m: the sign bit flips.
void pack_block(dfsel_type t, const BlockFields& f, uint8_t* block) {
  const Layout& l = layout(t);
  memset(block, 0, size_t(l.bytes));
  memcpy(block + l.d_at, &f.d, 2);
  if (l.dmin_at >= 0) {
    const uint16_t stored = l.min ? f.dmin : uint16_t(f.dmin ^ 0x8000u);
    memcpy(block + l.dmin_at, &stored, 2);
  }
  for (int s = 0; s < l.elems / l.sub; ++s) {
    if (l.scale) write(l.scale(s), f.scale[s], block);
    if (l.min) write(l.min(s), f.min[s], block);
  }
  for (int i = 0; i < l.elems; ++i) write(l.quant(i), f.q[i], block);
}

BlockFields unpack_block(dfsel_type t, const uint8_t* block) {
  const Layout& l = layout(t);
  const BlockKind k = block_kind(t);
  BlockFields f;
  f.d = u16_at(block + l.d_at);
  if (l.dmin_at >= 0) f.dmin = l.min ? u16_at(block + l.dmin_at) : uint16_t(u16_at(block + l.dmin_at) ^ 0x8000u);
  for (int s = 0; s < l.elems / l.sub; ++s) {
    f.scale[s] = l.scale ? read(l.scale(s), block) : k.scale.lo;
    f.min[s] = l.min ? read(l.min(s), block) : k.min.lo;
  }
  for (int i = 0; i < l.elems; ++i) f.q[i] = read(l.quant(i), block);
  return f;
}

float field_value(dfsel_type t, const BlockFields& f, int i) {
  const int s = i / layout(t).sub;
  const float a = f16_to_float(f.d) * float(f.scale[s]);
  const float m = f16_to_float(f.dmin) * float(f.min[s]);
  return a * float(f.q[i]) - m;
}

BlockFields random_fields(dfsel_type t, std::mt19937_64& rng) {
  const BlockKind k = block_kind(t);
  auto in = [&](FieldRange r) { return r.lo + int(rng() % uint64_t(r.hi - r.lo + 1)); };
  BlockFields f;
  f.d = float_to_f16(std::ldexp(rng() % 2 ? 1.0f : -1.0f, int(rng() % 20) - 16));
  if (k.has_dmin) f.dmin = float_to_f16(std::ldexp(rng() % 2 ? 1.0f : -1.0f, int(rng() % 20) - 16));
  for (int s = 0; s < k.elems / k.sub; ++s) f.scale[s] = in(k.scale), f.min[s] = in(k.min);
  for (int i = 0; i < k.elems; ++i) f.q[i] = in(k.q);
  return f;
}

// Each sub-block's grid: with mins, q >= 0 and the offset f16(dmin) * min covers the most
// negative value (taken <= 0); without, q is signed and the step covers both ends.
void quantize_block(dfsel_type t, const float* x, uint8_t* block) {
  const BlockKind k = block_kind(t);
  const int n_sub = k.elems / k.sub;
  float lo[16], hi[16], max_neg = 0;
  for (int s = 0; s < n_sub; ++s) {
    lo[s] = 0;
    hi[s] = x[s * k.sub];
    for (int i = s * k.sub; i < (s + 1) * k.sub; ++i) lo[s] = std::min(lo[s], x[i]), hi[s] = std::max(hi[s], x[i]);
    max_neg = std::max(max_neg, -lo[s]);
  }
  BlockFields f;
  if (k.has_dmin) f.dmin = f16_at_least(max_neg / float(k.min.hi));
  float off[16] = {}, need[16], max_need = 0;
  for (int s = 0; s < n_sub; ++s) {
    if (k.has_dmin) {
      f.min[s] = std::max(k.min.lo, steps_covering(f16_to_float(f.dmin), -lo[s], k.min.hi));
      off[s] = f16_to_float(f.dmin) * float(f.min[s]);
      need[s] = (hi[s] + off[s]) / float(k.q.hi);
    } else {
      need[s] = std::max({hi[s] / float(k.q.hi), lo[s] / float(k.q.lo), 0.0f});
    }
    max_need = std::max(max_need, need[s]);
  }
  f.d = f16_at_least(max_need / float(k.scale.hi));
  for (int s = 0; s < n_sub; ++s) {
    f.scale[s] = k.scale.lo == k.scale.hi ? k.scale.lo : steps_covering(f16_to_float(f.d), need[s], k.scale.hi);
    const float step = f16_to_float(f.d) * float(f.scale[s]);
    for (int i = s * k.sub; i < (s + 1) * k.sub; ++i)
      f.q[i] = step > 0 ? int(std::clamp(std::lrint((x[i] + off[s]) / step), long(k.q.lo), long(k.q.hi))) : 0;
  }
  pack_block(t, f, block);
}

}  // namespace dfsel::test
