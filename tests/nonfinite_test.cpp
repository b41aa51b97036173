// Non-finite values: every float a description or a run gives as a parameter must be finite
// (or, for p_min, in [0, 1]), refused with its name and value otherwise, on both plan kinds;
// so must the scalars of DSpark's w2_scale and conf_w, which multiply every logit of a step or
// decide every confidence (before, a NaN scale gave NaN logits and token 0 with success, and a
// NaN in conf_w a NaN confidence that never stops a block). Logits rows that are all NaN are
// data, not parameters: what they give is specified (SPEC section 3 and 5, dspark.md) and
// checked here.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

#include "support/one_plan.h"

namespace dfsel::test {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
const float kBad[] = {kNaN, kInf, -kInf};

void expect_has(const std::string& msg, const std::string& needle) {
  EXPECT_NE(msg.find(needle), std::string::npos) << "message: " << msg << " lacks " << needle;
}

// A DSpark plan with the weights whose values are checked (w2_scale, conf_w); c may be changed
// before describe().
struct DSparkBase : DSparkPlan {
  DSparkBase() { c = dspark_case_with_every_weight(); }
};

dfsel_status create_dspark(const dfsel_dspark_plan_desc& desc, std::string* msg) {
  dfsel_dspark_plan* plan = nullptr;
  char buf[512] = "";
  const dfsel_status st = dfsel_dspark_plan_create(&desc, &plan, buf, sizeof buf);
  dfsel_dspark_plan_destroy(plan);
  *msg = buf;
  return st;
}

TEST(NonFinite, DSparkScaleValuesAreRefused) {
  for (int rows : {1, 2}) {
    for (float bad : kBad) {
      DSparkBase b;
      b.c.scale_rows = rows;
      b.describe(22);
      const size_t at = rows == 1 ? 0 : 7;
      b.d.scale[at] = bad;
      SCOPED_TRACE("scale rows " + std::to_string(rows) + " value " + std::to_string(bad));
      std::string msg;
      EXPECT_EQ(create_dspark(b.desc, &msg), DFSEL_INVALID_ARGUMENT);
      expect_has(msg, "w2_scale[" + std::to_string(at) + "] = ");
      expect_has(msg, "must be finite");
    }
  }
}

TEST(NonFinite, DSparkConfidenceWeightsAreRefused) {
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16}) {
    for (float bad : kBad) {
      DSparkBase b;
      b.c.conf_t = t;
      b.describe(23);
      store_elem(b.d.conf_w.data(), 5, t, bad);
      SCOPED_TRACE(std::string(dfsel_type_name(t)) + " " + std::to_string(bad));
      std::string msg;
      EXPECT_EQ(create_dspark(b.desc, &msg), DFSEL_INVALID_ARGUMENT);
      expect_has(msg, "conf_w[5] = ");
    }
  }
}

// Every float field of both descriptions: the transform's scale and cap, DSpark's conf_bias.
TEST(NonFinite, DescriptionScalarsAreRefused) {
  for (float bad : kBad) {
    SCOPED_TRACE(std::to_string(bad));
    SelectorPlan s;
    s.describe(24);
    for (int field = 0; field < 2; ++field) {
      dfsel_plan_desc desc = s.desc;
      (field == 0 ? desc.config.logit_scale : desc.config.softcap) = bad;
      dfsel_plan* plan = nullptr;
      char msg[512] = "";
      EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
      expect_has(msg, field == 0 ? "config.logit_scale" : "config.softcap");
    }
    DSparkBase b;
    b.describe(21);
    for (int field = 0; field < 3; ++field) {
      dfsel_dspark_plan_desc desc = b.desc;
      (field == 0 ? desc.config.logit_scale : field == 1 ? desc.config.softcap : desc.conf_bias) = bad;
      std::string msg;
      EXPECT_EQ(create_dspark(desc, &msg), DFSEL_INVALID_ARGUMENT);
      expect_has(msg, field == 0 ? "config.logit_scale" : field == 1 ? "config.softcap" : "conf_bias");
    }
  }
}

// temperature and p_min of a run, both plan kinds.
TEST(NonFinite, RunScalarsAreRefused) {
  SelectorPlan s;
  s.describe(25);
  ASSERT_EQ(s.create_plan(), DFSEL_SUCCESS) << s.create_message;
  s.place_outputs(0);
  DSparkBase b;
  b.describe(21);
  ASSERT_EQ(b.create_plan(), DFSEL_SUCCESS) << b.create_message;
  b.place_outputs(0);
  for (float bad : kBad) {
    for (int field = 0; field < 2; ++field) {
      SCOPED_TRACE(std::to_string(bad) + (field == 0 ? " temperature" : " p_min"));
      const char* name = field == 0 ? "inputs.temperature" : "inputs.p_min";
      dfsel_inputs in = s.in;
      (field == 0 ? in.temperature : in.p_min) = bad;
      EXPECT_EQ(dfsel_plan_run(s.plan, &in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_has(dfsel_plan_last_error(s.plan), name);
      dfsel_dspark_inputs din = b.in;
      (field == 0 ? din.temperature : din.p_min) = bad;
      EXPECT_EQ(dfsel_dspark_plan_run(b.plan, &din, &b.out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_has(dfsel_dspark_plan_last_error(b.plan), name);
    }
  }
}

// SPEC sections 3 and 5: a drafted row of all-NaN logits yields the K lowest ids, NaN unary
// values and NaN scores; the softmax of a lattice row with nothing above -inf is uniform, so the
// greedy walk takes j = 0 (the lowest id), a draw takes j = floor(x K), and p_min stops the
// block exactly when p_min > 1/K.
TEST(NonFinite, SelectorRowsOfNaNGiveTheLowestIds) {
  Case c;
  Data d = make_data(c, 26);
  const int64_t n_rows = (int64_t)c.blocks * c.block;
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t v = 0; v < c.V; ++v) store_elem(d.logits.data() + r * d.logits_nb1, v, c.logits_t, kNaN);
  for (float temperature : {0.0f, 1.0f}) {
    for (float p_min : {0.0f, 1.0f / c.K, 1.5f / c.K}) {
      SCOPED_TRACE("temperature " + std::to_string(temperature) + " p_min " + std::to_string(p_min));
      RunOpts r;
      r.temperature = temperature;
      r.p_min = p_min;
      const Result res = run_case(c, d, r);
      ASSERT_EQ(res.status, DFSEL_SUCCESS) << res.error;
      const int L = c.block - 1;
      for (int blk = 0; blk < c.blocks; ++blk) {
        EXPECT_EQ(res.n_emitted[blk], p_min > 1.0f / c.K ? 0 : L);
        for (int p = 0; p < res.n_emitted[blk]; ++p) {
          const int32_t tok = res.path[(size_t)blk * L + p];
          if (temperature > 0.0f) {
            EXPECT_TRUE(tok >= 0 && tok < c.K) << tok;
          } else {
            EXPECT_EQ(tok, 0);
          }
        }
      }
      for (int64_t row = 0; row < (int64_t)c.blocks * L; ++row)
        for (int k = 0; k < c.K; ++k) {
          EXPECT_EQ(res.cand_ids[row * c.K + k], k);
          EXPECT_TRUE(std::isnan(res.unary[row * c.K + k]));
        }
      for (float s : res.scores) EXPECT_TRUE(std::isnan(s));
    }
  }
}

// dspark.md: a step whose logits row is all NaN has every l NaN; NaN never wins over a number
// and ties go to the lowest id, so the step drafts draft id 0, greedy or sampling; l at it is
// NaN; sampling gives it probability 0 and the row log-normaliser -inf.
TEST(NonFinite, DSparkRowsOfNaNDraftTheLowestId) {
  for (float temperature : {0.0f, 1.0f}) {
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    DSparkCase c;
    c.E = 0;
    c.scale_rows = 0;
    DSparkData d = make_dspark_data(c, 27);
    const int64_t n_rows = (int64_t)c.blocks * c.rows();
    for (int64_t r = 0; r < n_rows; ++r)
      for (int64_t v = 0; v < c.V; ++v) store_elem(d.logits.data() + r * d.logits_nb1, v, c.logits_t, kNaN);
    DSparkRunOpts r;
    r.temperature = temperature;
    const DSparkResult res = run_dspark(c, d, r);
    ASSERT_EQ(res.status, DFSEL_SUCCESS) << res.error;
    for (int blk = 0; blk < c.blocks; ++blk) EXPECT_EQ(res.n_emitted[blk], c.N);
    for (size_t i = 0; i < res.tokens.size(); ++i) {
      EXPECT_EQ(res.tokens[i], 0) << i;
      EXPECT_EQ(res.draft_ids[i], 0) << i;
      EXPECT_TRUE(std::isnan(res.logits[i])) << i;
      if (temperature > 0.0f) {  // (the harness asks for probs and log_norm when sampling)
        EXPECT_EQ(res.probs[i], 0.0f) << i;
        EXPECT_EQ(res.log_norm[i], -kInf) << i;
      }
    }
  }
}

}  // namespace
}  // namespace dfsel::test
