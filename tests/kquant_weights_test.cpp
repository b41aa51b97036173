// Q4_K and Q6_K weights given to a plan are widened to BF16 at creation: the result equals a
// plan given those BF16 values directly, bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "host/gguf/gguf.h"
#include "kernels/common/numeric.cuh"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

std::vector<uint8_t> to_bf16(dfsel_type t, const std::vector<uint8_t>& q, int64_t rows, int64_t cols) {
  std::vector<uint8_t> out((size_t)rows * cols * 2);
  std::vector<float> row((size_t)cols);
  const size_t rb = row_bytes(t, cols);
  for (int64_t r = 0; r < rows; ++r) {
    if (t == DFSEL_TYPE_Q4_K) gguf::dequantize_q4_k(&q[(size_t)r * rb], cols, row.data());
    else gguf::dequantize_q6_k(&q[(size_t)r * rb], cols, row.data());
    for (int64_t c = 0; c < cols; ++c) {
      const uint16_t b = float_to_bf16(row[(size_t)c]);
      std::memcpy(&out[((size_t)r * cols + c) * 2], &b, 2);
    }
  }
  return out;
}

TEST(KQuantWeights, WidenedToBf16AtPlanCreation) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type t : {DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q6_K}) {
    Case c;
    c.V = 700;
    c.K = 8;
    c.R = 256;
    c.E = 256;
    c.cb_t = c.wh_t = DFSEL_TYPE_F32;
    Data d = make_data(c, rng());
    // Quantize the F32 weights, then build the same problem twice: K-quant and BF16.
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
    EXPECT_EQ(first_diff(a.scores, b.scores), -1) << dfsel_type_name(t);
    EXPECT_EQ(first_diff(a.path, b.path), -1) << dfsel_type_name(t);
  }
}

}  // namespace
}  // namespace dfsel::test
