// Weights of the block types a plan widens to BF16 at creation (Q4_0, Q4_1, Q5_0, Q5_1,
// Q2_K .. Q6_K: what llama-quantize writes): a DFlash2 plan on them equals, bit for bit, a plan
// given the BF16 of their values as the tests decode them (support/block_types.h); a DSpark
// plan on them, its reference. Rows of 96 values hold whole blocks of the 32-value types, as a
// selector or Markov rank that is not a multiple of 256 does in drafts llama.cpp quantises.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/common/numeric.cuh"
#include "support/block_types.h"
#include "support/dspark_problem.h"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

// rows x cols values stored as t, as BF16 bytes: each element's field value rounded.
std::vector<uint8_t> to_bf16(dfsel_type t, const std::vector<uint8_t>& q, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out((size_t)rows * cols * 2);
  const BlockKind k = block_kind(t);
  const size_t rb = row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const BlockFields f = unpack_block(t, &q[(size_t)r * rb + (size_t)(c / k.elems * k.bytes)]);
      const uint16_t b = float_to_bf16(field_value(t, f, int(c % k.elems)));
      std::memcpy(&out[((size_t)r * cols + c) * 2], &b, 2);
    }
  return out;
}

// The rank a draft of type t would have: 96 for the 32-value blocks, 256 for the K-quants.
int rank_for(dfsel_type t) { return widened_block(t).elems == 32 ? 96 : 256; }

class WidenedWeights : public ::testing::TestWithParam<dfsel_type> {
 protected:
  const dfsel_type t = GetParam();
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng{seed};
};

TEST_P(WidenedWeights, Dflash2PlanEqualsThePlanOnTheBf16Values) {
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Case c;
  c.V = 700;
  c.K = 8;
  c.R = rank_for(t);
  c.E = 256;
  c.cb_t = c.wh_t = DFSEL_TYPE_F32;
  Data d = make_data(c, rng());
  // Quantize the F32 weights, then build the same problem twice: blocks and BF16.
  auto quant = [&](const std::vector<uint8_t>& f32, int64_t rows, int64_t cols) {
    std::vector<uint8_t> out;
    for (int64_t r = 0; r < rows; ++r) {
      const auto q = quantize(t, reinterpret_cast<const float*>(f32.data()) + r * cols, cols);
      out.insert(out.end(), q.begin(), q.end());
    }
    return out;
  };
  Data kq = d, wide = d;
  kq.e_prev = quant(d.e_prev, c.V, c.R);
  kq.e_next = quant(d.e_next, c.V, c.R);
  kq.w_h = quant(d.w_h, c.R, c.E);
  wide.e_prev = to_bf16(t, kq.e_prev, c.V, c.R);
  wide.e_next = to_bf16(t, kq.e_next, c.V, c.R);
  wide.w_h = to_bf16(t, kq.w_h, c.R, c.E);
  Case ck = c, cw = c;
  ck.cb_t = ck.wh_t = t;
  cw.cb_t = cw.wh_t = DFSEL_TYPE_BF16;
  const Result a = run_case(ck, kq, RunOpts{}), b = run_case(cw, wide, RunOpts{});
  ASSERT_EQ(a.status, DFSEL_SUCCESS) << a.error;
  ASSERT_EQ(b.status, DFSEL_SUCCESS) << b.error;
  EXPECT_EQ(first_diff(a.scores, b.scores), -1);
  EXPECT_EQ(first_diff(a.path, b.path), -1);
}

TEST_P(WidenedWeights, DSparkPlanIsBitwiseItsReference) {
  SCOPED_TRACE("seed=" + std::to_string(seed));
  DSparkCase c;
  c.R = rank_for(t);
  c.E = widened_block(t).elems == 32 ? 32 : 256;  // E + R whole blocks for conf_proj
  c.w1_t = c.w2_t = c.conf_t = t;
  DSparkRunOpts r;
  r.bounds = {0, 120, c.V};  // two ranks, W1 rows travelling in the sharded placement
  r.placement = DFSEL_CODEBOOKS_SHARDED;
  const DSparkData d = make_dspark_data(c, rng());
  const DSparkResult got = run_dspark(c, d, r);
  ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
  EXPECT_EQ(dspark_bitwise_diff(got, reference_dspark(c, d, r)), "");
}

INSTANTIATE_TEST_SUITE_P(Types, WidenedWeights, ::testing::ValuesIn(kWidenedTypes),
                         [](const ::testing::TestParamInfo<dfsel_type>& i) { return std::string(dfsel_type_name(i.param)); });

}  // namespace
}  // namespace dfsel::test
