// ggml's quantised and half-precision formats as ggml itself makes and reads them: rows
// quantised by ggml_quantize_chunk decode in dfsel bit for bit as ggml's to_float decodes
// them, and plans on those weights give the lattice of plans on ggml's dequantised floats.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "ggml_support.h"
#include "host/gguf/dequant.h"
#include "kernels/common/numeric.cuh"
#include "plan_run.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

TEST(GgmlFormats, HalfAndBf16EveryBitPatternDecodeAsGgml) {
  std::vector<uint16_t> bits(65536);
  for (size_t i = 0; i < bits.size(); ++i) bits[i] = (uint16_t)i;
  std::vector<float> ggml_f16(bits.size()), ggml_bf16(bits.size());
  ggml_fp16_to_fp32_row(reinterpret_cast<const ggml_fp16_t*>(bits.data()), ggml_f16.data(), (int64_t)bits.size());
  ggml_bf16_to_fp32_row(reinterpret_cast<const ggml_bf16_t*>(bits.data()), ggml_bf16.data(), (int64_t)bits.size());
  int f16_nans = 0;
  for (size_t i = 0; i < bits.size(); ++i) {
    const float f16 = f16_to_float(bits[i]), bf16 = bf16_to_float(bits[i]);
    ASSERT_EQ(0, std::memcmp(&bf16, &ggml_bf16[i], 4)) << "bf16 bits 0x" << std::hex << i;
    if (std::isnan(ggml_f16[i])) {
      // ggml converts with the CPU's F16C instruction, which quiets signalling NaNs; dfsel keeps
      // the payload as it is. Both are NaN, which is all the selector looks at.
      ASSERT_TRUE(std::isnan(f16)) << "f16 bits 0x" << std::hex << i;
      ++f16_nans;
      continue;
    }
    ASSERT_EQ(0, std::memcmp(&f16, &ggml_f16[i], 4)) << "f16 bits 0x" << std::hex << i;
  }
  EXPECT_EQ(2 * 1023, f16_nans);  // exponent all ones, mantissa not zero, either sign
}

// Rows that exercise the quantisers' scale choices: magnitudes from 1e-6 to 1e4, a zero row,
// a row of one outlier, a row of one sign, a constant row.
std::vector<float> varied_rows(std::mt19937_64& rng, int64_t rows, int64_t n) {
  std::vector<float> x((size_t)(rows * n));
  for (int64_t r = 0; r < rows; ++r) {
    float* row = &x[(size_t)(r * n)];
    const float amp = std::pow(10.0f, -6.0f + 10.0f * (float)r / (float)rows);
    const std::vector<float> u = uniform(rng, (size_t)n, amp);
    for (int64_t i = 0; i < n; ++i) {
      switch (r % 6) {
        case 1: row[i] = 0.0f; break;
        case 2: row[i] = i == 77 ? 50 * amp : u[(size_t)i] * 1e-3f; break;
        case 3: row[i] = std::fabs(u[(size_t)i]); break;
        case 4: row[i] = amp; break;
        default: row[i] = u[(size_t)i]; break;
      }
    }
  }
  return x;
}

class GgmlQuantised : public ::testing::TestWithParam<ggml_type> {};

TEST_P(GgmlQuantised, RowsDecodeBitwiseAsGgmlToFloat) {
  const ggml_type type = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + ", " + ggml_type_name(type));
  std::mt19937_64 rng(seed);
  const int64_t rows = 60, n = 1024;
  const std::vector<float> x = varied_rows(rng, rows, n);
  std::vector<uint8_t> q((size_t)rows * ggml_row_size(type, n));
  ASSERT_EQ(q.size(), ggml_quantize_chunk(type, x.data(), q.data(), 0, rows, n, nullptr));
  const size_t row_bytes = ggml_row_size(type, n);
  ASSERT_EQ(row_bytes, dfsel::row_bytes((dfsel_type)type, n));
  std::vector<float> want((size_t)n), got((size_t)n);
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* row = &q[(size_t)r * row_bytes];
    ggml_get_type_traits(type)->to_float(row, want.data(), n);
    if (type == GGML_TYPE_Q8_0) {
      for (int64_t i = 0; i < n; ++i) got[(size_t)i] = load_elem(row, DFSEL_TYPE_Q8_0, i);
    } else {
      gguf::dequantize_row((dfsel_type)type, row, n, got.data());
    }
    const long at = first_bit_diff(want.data(), got.data(), (size_t)n);
    ASSERT_EQ(-1, at) << "row " << r << " element " << at << ": ggml " << want[(size_t)at] << ", dfsel "
                      << got[(size_t)at];
  }
}

// Q8_0, read as stored, and every type dfsel widens to BF16 (what llama-quantize writes).
INSTANTIATE_TEST_SUITE_P(Types, GgmlQuantised,
                         ::testing::Values(GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
                                           GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K),
                         [](const ::testing::TestParamInfo<ggml_type>& i) { return std::string(ggml_type_name(i.param)); });

dfsel_tensor view_of(const ggml_tensor* t) {
  dfsel_tensor v = dfsel_tensor_2d(t->data, (dfsel_type)t->type, t->ne[0], t->ne[1], t->nb[1]);
  return v;
}

// The gate of one token in double, and its absolute terms G_r = sum_e |W_h[r, e] h[e]|.
void gate_terms(const std::vector<float>& wh, const float* h, int64_t E, int R, std::vector<double>* g,
                std::vector<double>* gabs) {
  g->assign((size_t)R, 0.0);
  gabs->assign((size_t)R, 0.0);
  for (int r = 0; r < R; ++r) {
    for (int64_t e = 0; e < E; ++e) {
      const double t = (double)wh[(size_t)(r * E + e)] * h[e];
      (*g)[(size_t)r] += t;
      (*gabs)[(size_t)r] += std::fabs(t);
    }
  }
}

// The score's rounding bound when Ep, En and W_h are each rounded to BF16 (relative 2^-9 per
// value) against exact floats: 2^-8 * sum_r |Ep g En| + 2^-9 * sum_r |Ep| G_r |En|, with a
// margin for the float rounding of the sums.
double bf16_bound(const std::vector<float>& ep, const std::vector<float>& en, const std::vector<double>& g,
                  const std::vector<double>& gabs, int R, int32_t pred, int32_t cand) {
  double s = 0;
  for (int r = 0; r < R; ++r) {
    const double pe = std::fabs((double)ep[(size_t)pred * R + r] * en[(size_t)cand * R + r]);
    s += pe * (std::ldexp(std::fabs(g[(size_t)r]), -8) + std::ldexp(gabs[(size_t)r], -9));
  }
  return s * 1.05 + 1e-5;
}

TEST_P(GgmlQuantised, PlanOnGgmlBlocksGivesTheLatticeOfGgmlFloats) {
  const ggml_type type = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed) + ", " + ggml_type_name(type));
  std::mt19937_64 rng(seed);
  const int64_t V = 2000, E = 512;
  const int R = 256, K = 16, block = 16, blocks = 2;
  const int64_t T = (int64_t)blocks * block;
  GgmlContext ctx(64u << 20);
  ggml_context* c = ctx.get();
  const std::vector<float> ep = uniform(rng, (size_t)(V * R), 1.0f), en = uniform(rng, (size_t)(V * R), 1.0f);
  const std::vector<float> wh = uniform(rng, (size_t)(E * R), 0.05f);
  const std::vector<float> z = uniform(rng, (size_t)(V * T), 8.0f), h = uniform(rng, (size_t)(E * T), 1.0f);
  ggml_tensor* q_ep = new_filled(c, type, R, V, ep.data(), "selector_predecessor.weight");
  ggml_tensor* q_en = new_filled(c, type, R, V, en.data(), "selector_successor.weight");
  ggml_tensor* q_wh = new_filled(c, type, E, R, wh.data(), "selector_hidden.weight");
  // ggml's dequantised floats of the same blocks, and (for the widened types) those rounded to
  // BF16 by ggml's converter: what dfsel's plan widens them to.
  auto dequant = [&](const ggml_tensor* t, ggml_type as, const char* name) {
    std::vector<float> all;
    for (int64_t r = 0; r < t->ne[1]; ++r) {
      const std::vector<float> row = ggml_row_to_float(t, r);
      all.insert(all.end(), row.begin(), row.end());
    }
    return std::make_pair(new_filled(c, as, t->ne[0], t->ne[1], all.data(), name), all);
  };
  auto [f_ep, ep_f] = dequant(q_ep, GGML_TYPE_F32, "ep f32");
  auto [f_en, en_f] = dequant(q_en, GGML_TYPE_F32, "en f32");
  auto [f_wh, wh_f] = dequant(q_wh, GGML_TYPE_F32, "wh f32");
  std::vector<int32_t> anchors = {(int32_t)(rng() % V), (int32_t)(rng() % V)};

  PlanIo io;
  io.cfg = make_config(V, E, R, K, block, blocks, 1.0f, 20.0f);
  io.logits = dfsel_tensor_2d(z.data(), DFSEL_TYPE_F32, V, T, (size_t)V * 4);
  io.hidden = dfsel_tensor_2d(h.data(), DFSEL_TYPE_F32, E, T, (size_t)E * 4);
  io.anchors = anchors.data();
  io.n_blocks = blocks;
  io.e_prev = view_of(q_ep), io.e_next = view_of(q_en), io.w_h = view_of(q_wh);
  const PlanOut on_blocks = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, on_blocks.status) << on_blocks.error;
  io.e_prev = view_of(f_ep), io.e_next = view_of(f_en), io.w_h = view_of(f_wh);
  const PlanOut on_floats = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, on_floats.status) << on_floats.error;
  ASSERT_EQ(on_floats.cand_ids, on_blocks.cand_ids);  // the candidates depend on the logits alone
  ASSERT_EQ(-1, first_bit_diff(on_floats.unary.data(), on_blocks.unary.data(), on_blocks.unary.size()));

  if (type == GGML_TYPE_Q8_0) {
    // Q8_0 is read as stored, each value the float ggml's to_float gives: the same lattice.
    ASSERT_EQ(-1, first_bit_diff(on_floats.scores.data(), on_blocks.scores.data(), on_blocks.scores.size()));
    ASSERT_EQ(-1, first_bit_diff(on_floats.packed.data(), on_blocks.packed.data(), on_blocks.packed.size()));
    return;
  }
  // The other block types are widened to BF16 at plan creation: bitwise the plan on ggml's
  // floats rounded to BF16 by ggml's converter, and the plan on the floats themselves within
  // BF16 rounding.
  io.e_prev = view_of(dequant(q_ep, GGML_TYPE_BF16, "ep bf16").first);
  io.e_next = view_of(dequant(q_en, GGML_TYPE_BF16, "en bf16").first);
  io.w_h = view_of(dequant(q_wh, GGML_TYPE_BF16, "wh bf16").first);
  const PlanOut on_bf16 = run_plan(io);
  ASSERT_EQ(DFSEL_SUCCESS, on_bf16.status) << on_bf16.error;
  ASSERT_EQ(-1, first_bit_diff(on_bf16.scores.data(), on_blocks.scores.data(), on_blocks.scores.size()));
  ASSERT_EQ(-1, first_bit_diff(on_bf16.packed.data(), on_blocks.packed.data(), on_blocks.packed.size()));
  const int L = block - 1;
  double worst = 0;
  for (int b = 0; b < blocks; ++b) {
    for (int p = 1; p <= L; ++p) {
      const size_t d = (size_t)(b * L + p - 1);
      std::vector<double> g, gabs;
      gate_terms(wh_f, &h[(size_t)((b * block + p) * E)], E, R, &g, &gabs);
      for (int i = 0; i < K; ++i) {
        const int32_t pred = p == 1 ? anchors[(size_t)b] : on_floats.cand_ids[(d - 1) * K + (size_t)i];
        for (int j = 0; j < K; ++j) {
          const int32_t cand = on_floats.cand_ids[d * K + (size_t)j];
          const size_t at = (d * K + (size_t)i) * K + (size_t)j;
          const double diff = std::fabs((double)on_blocks.scores[at] - on_floats.scores[at]);
          const double bound = bf16_bound(ep_f, en_f, g, gabs, R, pred, cand);
          ASSERT_LE(diff, bound) << "block " << b << " p " << p << " i " << i << " j " << j;
          worst = std::max(worst, diff / bound);
        }
      }
    }
  }
  std::printf("%s plan against ggml's floats: largest score difference %.3f of the BF16 bound\n",
              ggml_type_name(type), worst);
}

}  // namespace
}  // namespace dfsel::test
