// The block types dfsel widens to BF16 (Q4_0, Q4_1, Q5_0, Q5_1, Q2_K .. Q6_K) decoded without
// ggml: hand-built blocks give the values worked out by hand from ggml's block definitions,
// and any block gives the value of its bit fields (support/block_types.h), bit for bit. The
// ggml stage checks the same decoder against ggml's own (tests/ggml/quant_test.cpp).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

#include "host/gguf/dequant.h"
#include "kernels/common/numeric.cuh"
#include "support/block_types.h"

namespace dfsel::test {
namespace {

struct Byte {
  int at;
  uint8_t value;
};
struct Known {
  int i;
  float value;
};
struct HandBuilt {
  dfsel_type type;
  std::vector<Byte> bytes;  // every other byte is zero
  std::vector<Known> values;
};

// f16: 0x3800 = 0.5, 0x3c00 = 1, 0x4000 = 2, 0xc000 = -2 (little-endian: low byte first).
const HandBuilt kHandBuilt[] = {
    // d = 0.5; element 0 the low nibble of qs[0], 16 its high nibble, less 8.
    {DFSEL_TYPE_Q4_0, {{1, 0x38}, {2, 0xf0}, {17, 0x9a}}, {{0, -4.0f}, {16, 3.5f}, {15, 1.0f}, {31, 0.5f}, {5, -4.0f}}},
    // d = 1, m = -2: q + m.
    {DFSEL_TYPE_Q4_1, {{1, 0x3c}, {3, 0xc0}, {4, 0x3f}}, {{0, 13.0f}, {16, 1.0f}, {1, -2.0f}}},
    // d = 2; fifth bits 0 and 17 set (qh at 2..5); (nibble | fifth << 4) - 16.
    {DFSEL_TYPE_Q5_0, {{1, 0x40}, {2, 0x01}, {4, 0x02}, {6, 0x5f}}, {{0, 30.0f}, {16, -22.0f}, {1, -32.0f}, {17, 0.0f}}},
    // d = 0.5, m = 1; fifth bit 31 (qh at 4..7); qs[15] at 8 + 15.
    {DFSEL_TYPE_Q5_1, {{1, 0x38}, {3, 0x3c}, {7, 0x80}, {23, 0xf0}}, {{15, 1.0f}, {31, 16.5f}, {0, 1.0f}}},
    // d = 1 at 80, dmin = 0.5 at 82; sub-block 0: scale 3, min 2; 1: scale 0, min 1; 2: scale 5;
    // qs[0] (byte 16) = 0b11100100: element 0 takes bits 0-1, element 32 bits 2-3.
    {DFSEL_TYPE_Q2_K,
     {{81, 0x3c}, {83, 0x38}, {0, 0x23}, {1, 0x10}, {2, 0x05}, {16, 0xe4}},
     {{0, -1.0f}, {16, -0.5f}, {32, 5.0f}, {64, 0.0f}}},
    // d = 1 at 108; scale 0 = 34 - 32 = 2 (low nibble of byte 96, bits 0-1 of byte 104);
    // element 0: 2 bits of byte 32 = 3, high bit (hmask[0] bit 0) set; element 1: 1, clear (less 4).
    // Element 255: every field zero, so scale -32 and quant -4.
    {DFSEL_TYPE_Q3_K,
     {{109, 0x3c}, {96, 0x02}, {104, 0x02}, {32, 0x03}, {33, 0x01}, {0, 0x01}},
     {{0, 6.0f}, {1, -6.0f}, {255, 128.0f}}},
    // d = dmin = 1; scale 0 = 5, min 0 = 3 (bytes 4, 8); scale 4 = 17 (byte 12 low nibble 1,
    // top bits of byte 4 = 1), min 4 = 2 (byte 12 high nibble); element 0 = 7, element 128 = 2.
    {DFSEL_TYPE_Q4_K,
     {{1, 0x3c}, {3, 0x3c}, {4, 0x45}, {8, 0x03}, {12, 0x21}, {16, 0x07}, {80, 0x02}},
     {{0, 32.0f}, {128, 32.0f}, {1, -3.0f}}},
    // d = 1, dmin = 0; scale 0 = 1, scale 1 = 2; element 0: nibble 3; element 33: high nibble
    // of qs[1] (byte 49) = 15 with fifth bit 1 of qh[1] (byte 17) set = 31.
    {DFSEL_TYPE_Q5_K,
     {{1, 0x3c}, {4, 0x01}, {5, 0x02}, {48, 0x03}, {49, 0xf0}, {17, 0x02}},
     {{0, 3.0f}, {33, 62.0f}, {1, 0.0f}}},
    // d = 0.5 at 208; scale 0 = -3 (byte 192), scale 12 = 7 (byte 204); element 0: 15 | 3 << 4
    // less 32 = 31; element 200 (half 1, quarter 2, lane 8): high nibble of byte 72 = 1, bits 4-5
    // of byte 168 = 2: 33 less 32 = 1.
    {DFSEL_TYPE_Q6_K,
     {{209, 0x38}, {192, 0xfd}, {204, 0x07}, {0, 0x0f}, {128, 0x03}, {72, 0x10}, {168, 0x20}},
     {{0, -46.5f}, {200, 3.5f}}},
};

TEST(BlockTypes, HandBuiltBlocksGiveTheirValues) {
  for (const HandBuilt& h : kHandBuilt) {
    SCOPED_TRACE(dfsel_type_name(h.type));
    const WidenedBlock b = widened_block(h.type);
    std::vector<uint8_t> block((size_t)b.bytes, 0);
    for (const Byte& x : h.bytes) block[(size_t)x.at] = x.value;
    std::vector<float> got((size_t)b.elems);
    gguf::dequantize_row(h.type, block.data(), b.elems, got.data());
    for (const Known& k : h.values) EXPECT_EQ(got[(size_t)k.i], k.value) << "element " << k.i;
  }
}

// Every bit of a block belongs to exactly one field (random bytes come back from their fields
// unchanged), and the library's value of every element is its fields' value, bit for bit.
TEST(BlockTypes, RandomBlocksDecodeAsTheirFields) {
  std::mt19937_64 rng(29);
  for (dfsel_type t : kWidenedTypes) {
    SCOPED_TRACE(dfsel_type_name(t));
    const BlockKind k = block_kind(t);
    const int n_blocks = 64;
    std::vector<uint8_t> bytes((size_t)(k.bytes * n_blocks));
    for (int b = 0; b < n_blocks; ++b) {
      uint8_t* block = &bytes[(size_t)(b * k.bytes)];
      for (int i = 0; i < k.bytes; ++i) block[i] = uint8_t(rng());
      BlockFields f = unpack_block(t, block);
      const BlockFields r = random_fields(t, rng);  // finite d and dmin
      f.d = r.d, f.dmin = r.dmin;
      std::vector<uint8_t> again((size_t)k.bytes);
      pack_block(t, unpack_block(t, block), again.data());
      ASSERT_EQ(0, memcmp(again.data(), block, (size_t)k.bytes)) << "block " << b << " did not survive its fields";
      pack_block(t, f, block);
    }
    std::vector<float> got((size_t)(k.elems * n_blocks));
    gguf::dequantize_row(t, bytes.data(), (int64_t)got.size(), got.data());
    int bad = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      const BlockFields f = unpack_block(t, &bytes[i / (size_t)k.elems * (size_t)k.bytes]);
      const float want = field_value(t, f, int(i % (size_t)k.elems));
      if (float_to_bits(got[i]) != float_to_bits(want) && bad++ < 5)
        ADD_FAILURE() << "element " << i << ": " << got[i] << ", its fields say " << want;
    }
    EXPECT_EQ(bad, 0);
  }
}

// The widening rounds those values to BF16, row by row at the given pitch.
TEST(BlockTypes, WidenedRowsAreTheValuesRoundedToBf16) {
  std::mt19937_64 rng(31);
  for (dfsel_type t : kWidenedTypes) {
    SCOPED_TRACE(dfsel_type_name(t));
    const BlockKind k = block_kind(t);
    const int64_t n = 2 * k.elems, rows = 3;
    const size_t pitch = row_bytes(t, n) + 6;
    std::vector<uint8_t> src(pitch * rows, 0xee);
    for (int64_t r = 0; r < rows; ++r)
      for (int b = 0; b < 2; ++b) pack_block(t, random_fields(t, rng), &src[(size_t)r * pitch + (size_t)(b * k.bytes)]);
    std::vector<uint16_t> wide((size_t)(rows * n));
    gguf::widen_to_bf16(src.data(), t, rows, n, pitch, wide.data());
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t i = 0; i < n; ++i) {
        const BlockFields f = unpack_block(t, &src[(size_t)r * pitch + (size_t)(i / k.elems * k.bytes)]);
        ASSERT_EQ(wide[(size_t)(r * n + i)], float_to_bf16(field_value(t, f, int(i % k.elems)))) << r << ", " << i;
      }
  }
}

}  // namespace
}  // namespace dfsel::test
