// The shared host/device arithmetic: conversions, the candidate key, Philox, softmax helpers.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/common/dspark_math.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/philox.cuh"
#include "kernels/common/selector_math.cuh"

namespace dfsel {
namespace {

TEST(Numeric, F16RoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_float((uint16_t)h);
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7c00u, 0x7c00u);
      continue;
    }
    ASSERT_EQ(float_to_f16(f), (uint16_t)h) << "half 0x" << std::hex << h;
  }
  EXPECT_EQ(f16_to_float(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_float(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f16_to_float(0xfc00), -INFINITY);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);  // rounds to inf
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // half of the smallest subnormal: ties to even
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Numeric, Bf16RoundsToNearestEven) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const float f = bf16_to_float((uint16_t)b);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_bf16(f), (uint16_t)b);
  }
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f808000u)), 0x3f80);  // tie, even stays
  EXPECT_EQ(float_to_bf16(bits_to_float(0x3f818000u)), 0x3f82);  // tie, odd rounds up
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(NAN))));
}

TEST(Numeric, Q8_0IsScaleTimesQuant) {
  BlockQ8_0 b[2];
  b[0].d = float_to_f16(0.5f);
  b[1].d = float_to_f16(-0.25f);
  for (int i = 0; i < 32; ++i) {
    b[0].qs[i] = (int8_t)(i - 16);
    b[1].qs[i] = (int8_t)(127 - i);
  }
  EXPECT_EQ(load_elem(b, DFSEL_TYPE_Q8_0, 3), -6.5f);
  EXPECT_EQ(load_elem(b, DFSEL_TYPE_Q8_0, 32 + 2), -0.25f * 125);
  EXPECT_EQ(row_bytes(DFSEL_TYPE_Q8_0, 256), 8u * 34u);
}

// load_elems widens a row with the type decided once; every value must be load_elem's, bit for
// bit (NaN payloads included), for every stored type and for a row that ends inside a Q8_0 block.
TEST(Numeric, LoadElemsIsLoadElemOnEveryType) {
  uint8_t raw[4 * 70];
  for (size_t i = 0; i < sizeof raw; ++i) raw[i] = (uint8_t)(i * 37 + 11);
  BlockQ8_0 q[3];
  for (int b = 0; b < 3; ++b) {
    q[b].d = float_to_f16(0.125f * (float)(b + 1));
    for (int i = 0; i < 32; ++i) q[b].qs[i] = (int8_t)(i * 7 - 100 + b);
  }
  struct Case {
    dfsel_type t;
    const void* row;
    int64_t n;
  };
  for (const Case& c : {Case{DFSEL_TYPE_F32, raw, 70}, Case{DFSEL_TYPE_F16, raw, 140}, Case{DFSEL_TYPE_BF16, raw, 140},
                        Case{DFSEL_TYPE_Q8_0, q, 96}, Case{DFSEL_TYPE_Q8_0, q, 70}}) {
    float out[140];
    load_elems(c.row, c.t, c.n, out);
    for (int64_t i = 0; i < c.n; ++i)
      ASSERT_EQ(float_to_bits(out[i]), float_to_bits(load_elem(c.row, c.t, i)))
          << dfsel_type_name(c.t) << " element " << i << " of " << c.n;
  }
}

TEST(Order, KeyIsTheDesignTotalOrder) {
  const float inf = std::numeric_limits<float>::infinity();
  // Larger values first; ties by ascending id; -0 ties with +0; NaN below -inf.
  EXPECT_GT(cand_key(2.0f, 9), cand_key(1.0f, 0));
  EXPECT_GT(cand_key(1.0f, 3), cand_key(1.0f, 4));
  EXPECT_GT(cand_key(-0.0f, 1), cand_key(0.0f, 2));
  EXPECT_GT(cand_key(0.0f, 1), cand_key(-0.0f, 2));
  EXPECT_GT(cand_key(-inf, 100), cand_key(NAN, 0));
  EXPECT_GT(cand_key(NAN, 0), cand_key(-NAN, 1));
  EXPECT_GT(cand_key(inf, 5), cand_key(3e38f, 0));
  EXPECT_GT(cand_key(-1e-45f, 0), cand_key(-1.0f, 0));
  for (float z : {1.5f, -2.0f, 0.0f, inf, -inf, 1e-40f}) {
    const CandRec c = cand_from_key(cand_key(z, 12345));
    EXPECT_EQ(c.id, 12345);
    EXPECT_EQ(c.z, z);
  }
  EXPECT_TRUE(std::isnan(cand_from_key(cand_key(NAN, 7)).z));
  // The halves' inverses, which the kernels use on their own.
  for (int32_t id : {0, 1, 12345, INT32_MAX}) EXPECT_EQ(id_of_key(cand_key(1.0f, id)), id);
  for (float z : {1.5f, -2.0f, -0.0f, inf, -inf, 1e-40f, -1e-45f}) {
    const float back = bits_to_float(value_bits_of_key(value_key(z)));
    EXPECT_EQ(back, z);
    EXPECT_FALSE(std::signbit(back) && z == 0.0f) << "both zeros come back as +0";
  }
}

TEST(Philox, KnownAnswers) {
  // The published known-answer vectors of Philox4x32-10.
  Philox4 zero{{0, 0, 0, 0}};
  Philox4 r = philox4x32_10(zero, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  Philox4 pi{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}};
  r = philox4x32_10(pi, 0xa4093822u, 0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
  const float u = philox_uniform(42, 3, 7);
  EXPECT_GE(u, 0.0f);
  EXPECT_LT(u, 1.0f);
  EXPECT_NE(u, philox_uniform(42, 3, 8));
  EXPECT_NE(u, philox_uniform(43, 3, 7));
}

TEST(SelectorMath, ChoicesOnSpecialRows) {
  const float inf = std::numeric_limits<float>::infinity();
  const float ties[4] = {1.0f, 3.0f, 3.0f, 2.0f};
  EXPECT_EQ(argmax_row(ties, 4), 1);
  const float nan_first[3] = {NAN, -5.0f, -inf};
  EXPECT_EQ(argmax_row(nan_first, 3), 1);
  const float all_neg_inf[3] = {-inf, -inf, -inf};
  EXPECT_FLOAT_EQ(softmax_at(all_neg_inf, 3, 1.0f, 2), 1.0f / 3);
  const float two_inf[4] = {inf, 0.0f, inf, NAN};
  EXPECT_FLOAT_EQ(softmax_at(two_inf, 4, 1.0f, 0), 0.5f);
  EXPECT_FLOAT_EQ(softmax_at(two_inf, 4, 1.0f, 1), 0.0f);
  float q[4];
  softmax_row(two_inf, 4, 0.7f, q);
  EXPECT_EQ(sample_row(q, 4, 0.25f), 0);
  EXPECT_EQ(sample_row(q, 4, 0.75f), 2);
  EXPECT_EQ(sample_row(q, 4, 0.9999999f), 2);
  Transform t{2.0f, 10.0f};
  EXPECT_NEAR(transform_logit(t, 1.0f), 10.0f * std::tanh(0.2f), 1e-6);
  EXPECT_FLOAT_EQ(transform_logit(t, 1e30f), 10.0f);
  EXPECT_EQ(transform_logit(Transform{3.0f, 0.0f}, -2.0f), -6.0f);
}

// markov_gumbel_of_word skips portable_logf's special cases (its u is never 0, 1 or subnormal):
// for every one of the 2^24 values u takes, the same bits as the two full calls.
TEST(DSparkMath, GumbelOfEveryWordIsTheFullLogs) {
  int differ = 0;
  for (uint32_t hi = 0; hi < (1u << 24); ++hi) {
    const uint32_t word = hi << 8 | (hi & 0xffu);
    const float u = (float)((word >> 8) | 1u) * (1.0f / 16777216.0f);
    const float full = -portable_logf(-portable_logf(u)), fast = markov_gumbel_of_word(word);
    differ += std::memcmp(&full, &fast, sizeof full) != 0;
  }
  EXPECT_EQ(differ, 0);
  for (float x : {1e-40f, 1.17549435e-38f, 0.5f, 1.0f, 3.0f, 1e30f})
    EXPECT_NEAR(portable_logf(x), std::log((double)x), 2e-7 * std::fabs(std::log((double)x)) + 1e-12) << x;
}

}  // namespace
}  // namespace dfsel
