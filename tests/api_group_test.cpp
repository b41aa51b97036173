// In-process groups and the last error of dfsel_run_group, and the aliasing rule of dfsel.h,
// on CPU plans: plans that describe different selectors are refused, each difference by name
// (the rule the NCCL set-up applies, host/exchange/group_rule.h); a call that names no plan leaves every
// plan's record as it was; outputs that share memory are refused before anything is written;
// ranks given different anchors, hidden rows or run scalars, or holding different W_h, are
// refused, the first difference and its rank named, before anything runs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/common/numeric.cuh"
#include "support/gguf_writer.h"
#include "support/one_plan.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

Case two_shard_case() {
  Case c;
  c.V = 600;
  c.cb_t = DFSEL_TYPE_F16;
  c.wh_t = DFSEL_TYPE_F16;
  return c;
}

RunOpts two_shards() {
  RunOpts r;
  r.bounds = {0, 250, 600};
  return r;
}

struct Mismatch {
  void (*edit)(int shard, dfsel_plan_desc* d);
  const char* names;
};

TEST(ApiGroup, PlansThatDescribeAnotherSelectorAreRefused) {
  // F16 and BF16 rows have the same bytes: only the type field tells the plans apart.
  const Mismatch cases[] = {
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->e_prev.type = d->e_next.type = DFSEL_TYPE_BF16; },
       "plans[1] describes another selector than plans[0]: e_prev.type = BF16, against F16"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->w_h.type = DFSEL_TYPE_BF16; },
       "plans[1] describes another selector than plans[0]: w_h.type = BF16, against F16"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->config.logit_scale = 0.5f; },
       "plans[1] describes another selector than plans[0]: config.logit_scale = 0.5, against 1"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->config.softcap = 30.0f; },
       "plans[1] describes another selector than plans[0]: config.softcap = 30, against 0"},
      {[](int s, dfsel_plan_desc* d) { if (s == 0) d->config.softcap = -0.0f; },
       "plans[1] describes another selector than plans[0]: config.softcap = 0, against -0"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->config.top_k = 4; },
       "plans[1] describes another selector than plans[0]: config.top_k = 4, against 8"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->config.max_blocks = 3; },
       "plans[1] describes another selector than plans[0]: config.max_blocks = 3, against 2"},
      {[](int s, dfsel_plan_desc* d) { if (s == 1) d->shard.rank = 0; },
       "plans[1] has shard.rank = 0, which another rank of the group has too"},
  };
  const Case c = two_shard_case();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  for (const Mismatch& m : cases) {
    RunOpts r = two_shards();
    r.edit_desc = m.edit;
    const Result res = run_case(c, d, r);
    for (size_t s = 0; s < res.create_status.size(); ++s)
      ASSERT_EQ(res.create_status[s], DFSEL_SUCCESS) << res.create_errors[s];
    EXPECT_EQ(res.status, DFSEL_INVALID_ARGUMENT) << m.names;
    EXPECT_NE(res.error.find(m.names), std::string::npos) << res.error;
  }
  // And the plans as made agree.
  const Result ok = run_case(c, d, two_shards());
  EXPECT_EQ(ok.status, DFSEL_SUCCESS) << ok.error;
}

// Two ranks whose weights are the same F32 values stored as each rank's own types (block types
// quantised, the float types converted), so that only the types the caller gave differ.
class GroupWeightTypes : public testing::Test {
 protected:
  void SetUp() override {
    c.V = 600;
    c.R = c.E = 256;  // whole blocks of every type (32 or 256 values)
    c.K = 8;
    c.block = 4;
    d = make_data(c, 23);
  }
  // dfsel_run_group of the two ranks, rank s holding codebooks of type cb[s] and W_h of type
  // wh[s]; the status, with the message of plans[0] in *why.
  dfsel_status run(const dfsel_type (&cb)[2], const dfsel_type (&wh)[2], std::string* why) {
    const int64_t bounds[3] = {0, 250, c.V}, n_tokens = (int64_t)c.blocks * c.block;
    const size_t nd = (size_t)c.blocks * (c.block - 1);
    Data own[2];
    dfsel_plan* plans[2] = {nullptr, nullptr};
    dfsel_inputs in[2]{};
    dfsel_outputs out[2]{};
    std::vector<int32_t> bufs[2];
    for (int s = 0; s < 2; ++s) {
      Case cs = c;
      cs.cb_t = cb[s];
      cs.wh_t = wh[s];
      own[s].e_prev = stored_as(cb[s], d.e_prev);
      own[s].e_next = stored_as(cb[s], d.e_next);
      own[s].w_h = stored_as(wh[s], d.w_h);
      const dfsel_plan_desc desc = cpu_desc(cs, own[s], s, 2, bounds[s], bounds[s + 1]);
      char msg[256] = "";
      EXPECT_EQ(dfsel_plan_create(&desc, &plans[s], msg, sizeof msg), DFSEL_SUCCESS) << msg;
      in[s].logits = make_matrix(d.logits.data() + bounds[s] * 4, c.logits_t, bounds[s + 1] - bounds[s], n_tokens,
                                 d.logits_nb1);
      in[s].hidden = make_matrix(d.hidden.data(), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
      in[s].anchors = d.anchors.data();
      in[s].n_blocks = c.blocks;
      bufs[s].assign(nd + c.blocks, 0);
      out[s].path = bufs[s].data();
      out[s].n_emitted = out[s].path + nd;
    }
    const dfsel_status st = plans[0] && plans[1] ? dfsel_run_group(2, plans, in, out, nullptr) : DFSEL_INTERNAL_ERROR;
    if (plans[0]) *why = dfsel_plan_last_error(plans[0]);
    for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
    return st;
  }
  // F32 weights (make_data's) stored as type t.
  static std::vector<uint8_t> stored_as(dfsel_type t, const std::vector<uint8_t>& f32) {
    return quantize(t, reinterpret_cast<const float*>(f32.data()), (int64_t)(f32.size() / 4));
  }

  Case c;
  Data d;
};

// Creation widens the block types to BF16; the group rule must still see the types the caller
// gave, as the NCCL set-up does, and refuse a Q4_K rank beside a BF16 one as it refuses F16
// beside BF16 (once the in-process check read the widened types and ran such a group).
TEST_F(GroupWeightTypes, BlockTypesAreComparedAsGivenNotAsWidened) {
  const dfsel_type f32[2] = {DFSEL_TYPE_F32, DFSEL_TYPE_F32};
  const struct {
    dfsel_type cb[2], wh[2];
    const char* names;
  } cases[] = {
      {{DFSEL_TYPE_Q4_K, DFSEL_TYPE_BF16}, {DFSEL_TYPE_F32, DFSEL_TYPE_F32}, "e_prev.type = BF16, against Q4_K"},
      {{DFSEL_TYPE_BF16, DFSEL_TYPE_Q5_0}, {DFSEL_TYPE_F32, DFSEL_TYPE_F32}, "e_prev.type = Q5_0, against BF16"},
      {{DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q6_K}, {DFSEL_TYPE_F32, DFSEL_TYPE_F32}, "e_prev.type = Q6_K, against Q4_K"},
      {{DFSEL_TYPE_F32, DFSEL_TYPE_F32}, {DFSEL_TYPE_Q4_0, DFSEL_TYPE_BF16}, "w_h.type = BF16, against Q4_0"},
      {{DFSEL_TYPE_F16, DFSEL_TYPE_BF16}, {DFSEL_TYPE_F32, DFSEL_TYPE_F32}, "e_prev.type = BF16, against F16"},
  };
  for (const auto& m : cases) {
    std::string why;
    EXPECT_EQ(run(m.cb, m.wh, &why), DFSEL_INVALID_ARGUMENT) << m.names;
    EXPECT_NE(why.find(std::string("plans[1] describes another selector than plans[0]: ") + m.names), std::string::npos)
        << why;
  }
  // The same block type on both ranks is one selector.
  std::string why;
  const dfsel_type q4_k[2] = {DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q4_K};
  EXPECT_EQ(run(q4_k, f32, &why), DFSEL_SUCCESS) << why;
}

TEST(ApiGroup, ACallThatNamesNoPlanChangesNoPlansRecord) {
  const Case c = two_shard_case();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  Session s(c, d, two_shards());
  Result created;
  ASSERT_EQ(s.create(&created), DFSEL_SUCCESS) << created.error;
  // A failure names its reason in every plan given...
  EXPECT_EQ(dfsel_run_group(2, s.plans.data(), nullptr, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[0]), "inputs is NULL");
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[1]), "inputs is NULL");
  // ...a success clears it...
  ASSERT_EQ(s.run(), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plans[0]);
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[0]), "");
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[1]), "");
  // ...and a call that names no plan is answered by its status alone.
  for (int n : {0, -1}) EXPECT_EQ(dfsel_run_group(n, s.plans.data(), nullptr, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_run_group(2, nullptr, nullptr, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[0]), "");
  EXPECT_STREQ(dfsel_plan_last_error(s.plans[1]), "");
  // A NULL entry is named in the plans that are there.
  dfsel_plan* with_hole[2] = {s.plans[0], nullptr};
  EXPECT_EQ(dfsel_run_group(2, with_hole, nullptr, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(s.plans[0])).find("NULL"), std::string::npos);
}

// One plan, outputs placed by hand so that two of them share memory.
class Aliasing : public OnePlan {
 protected:
  void SetUp() override {
    c.V = 300;
    describe(7);
    create();
    nd = (size_t)c.blocks * (c.block - 1);
    buf.assign(nd * c.K * c.K * 8, 0);
    out.path = reinterpret_cast<int32_t*>(buf.data());
    out.n_emitted = out.path + nd;
    out.scores = reinterpret_cast<float*>(out.n_emitted + c.blocks);
  }

  size_t nd = 0;
  std::vector<int32_t> buf;
};

TEST_F(Aliasing, SeparateOutputsRun) {
  ASSERT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
}

TEST_F(Aliasing, OutputsThatOverlapEachOtherAreRefused) {
  out.cand_ids = out.path + 1;
  EXPECT_NE(refused().find("outputs.cand_ids"), std::string::npos);
  out.cand_ids = nullptr;
  out.unary = out.scores + nd;  // inside the scores
  EXPECT_NE(refused().find("outputs.unary"), std::string::npos);
}

TEST_F(Aliasing, OutputsOverAnInputAreRefused) {
  std::vector<int32_t> anchors = d.anchors;
  in.anchors = anchors.data();
  out.n_emitted = anchors.data();
  const std::string why = refused();
  EXPECT_NE(why.find("outputs.n_emitted"), std::string::npos) << why;
  EXPECT_NE(why.find("inputs.anchors"), std::string::npos) << why;
  EXPECT_EQ(anchors, d.anchors) << "nothing was written";
  out.n_emitted = reinterpret_cast<int32_t*>(buf.data()) + nd;
  out.unary = reinterpret_cast<float*>(d.logits.data());
  EXPECT_NE(refused().find("inputs.logits"), std::string::npos);
  out.unary = reinterpret_cast<float*>(d.e_next.data()) + 3;
  EXPECT_NE(refused().find("e_next"), std::string::npos);
}

// Two shards of an in-process group with their own outputs; then one plan's outputs placed
// over the other plan's outputs or inputs.
class GroupAliasing : public testing::Test {
 protected:
  void SetUp() override {
    c.V = 300;
    d = make_data(c, 11);
    const int64_t n_tokens = (int64_t)c.blocks * c.block;
    const int64_t bounds[3] = {0, 140, c.V};
    nd = (size_t)c.blocks * (c.block - 1);
    for (int s = 0; s < 2; ++s) {
      const dfsel_plan_desc desc = cpu_desc(c, d, s, 2, bounds[s], bounds[s + 1]);
      char msg[256];
      ASSERT_EQ(dfsel_plan_create(&desc, &plans[s], msg, sizeof msg), DFSEL_SUCCESS) << msg;
      const size_t es = c.logits_t == DFSEL_TYPE_F32 ? 4 : 2;
      in[s].logits = make_matrix(d.logits.data() + bounds[s] * es, c.logits_t, bounds[s + 1] - bounds[s], n_tokens,
                                 d.logits_nb1);
      in[s].hidden = make_matrix(d.hidden.data(), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
      anchors[s] = d.anchors;
      in[s].anchors = anchors[s].data();
      in[s].n_blocks = c.blocks;
      bufs[s].assign(nd * (2 + c.K), 0);
      out[s].path = bufs[s].data();
      out[s].n_emitted = out[s].path + nd;
      out[s].cand_ids = out[s].n_emitted + c.blocks;
    }
  }
  void TearDown() override {
    for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
  }
  std::string refused() {
    EXPECT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_INVALID_ARGUMENT);
    return dfsel_plan_last_error(plans[0]);
  }

  Case c;
  Data d;
  size_t nd = 0;
  dfsel_plan* plans[2] = {nullptr, nullptr};
  dfsel_inputs in[2]{};
  dfsel_outputs out[2]{};
  std::vector<int32_t> anchors[2], bufs[2];
};

TEST_F(GroupAliasing, SeparateOutputsRun) {
  ASSERT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plans[0]);
}

TEST_F(GroupAliasing, SharedOutputsAreRefused) {
  out[1].cand_ids = out[0].cand_ids + 3;
  const std::string why = refused();
  EXPECT_NE(why.find("plans[0]'s outputs.cand_ids"), std::string::npos) << why;
  EXPECT_NE(why.find("plans[1]'s outputs.cand_ids"), std::string::npos) << why;
}

TEST_F(GroupAliasing, AnOutputOverAnotherPlansInputIsRefused) {
  out[1].n_emitted = anchors[0].data();
  const std::string why = refused();
  EXPECT_NE(why.find("plans[1]'s outputs.n_emitted"), std::string::npos) << why;
  EXPECT_NE(why.find("plans[0]'s inputs.anchors"), std::string::npos) << why;
  EXPECT_EQ(anchors[0], d.anchors) << "nothing was written";
}

// The same two shards given per-run inputs that the ranks must agree on (dfsel.h: in-process
// groups of CPU plans): equal values in other buffers run, any difference is refused before
// anything is written.
class GroupInputs : public GroupAliasing {
 protected:
  void SetUp() override {
    GroupAliasing::SetUp();
    hidden1 = d.hidden;  // rank 1's own copy, same values
    in[1].hidden = make_matrix(hidden1.data(), c.hidden_t, c.E, (int64_t)c.blocks * c.block, d.hidden_nb1);
    for (std::vector<int32_t>& b : bufs) std::fill(b.begin(), b.end(), -7);
  }
  // The call is refused with a message holding `words`, recorded in both plans, and no output
  // was written.
  void expect_refused(const std::string& words,
                      const char* rule = "must be given the same anchors, hidden rows, temperature, p_min and seed") {
    EXPECT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_INVALID_ARGUMENT) << words;
    for (dfsel_plan* p : plans) {
      const std::string why = dfsel_plan_last_error(p);
      EXPECT_NE(why.find(words), std::string::npos) << why;
      EXPECT_NE(why.find(rule), std::string::npos) << why;
    }
    for (const std::vector<int32_t>& b : bufs)
      for (int32_t v : b) ASSERT_EQ(v, -7) << "an output was written before the refusal";
  }
  // The hidden element at token row t of rank 1's copy, changed by one unit in the last place.
  void nudge_hidden(int64_t t) { hidden1[(size_t)t * d.hidden_nb1] ^= 1; }

  std::vector<uint8_t> hidden1;
};

TEST_F(GroupInputs, EqualInputsInOtherBuffersRun) {
  ASSERT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plans[0]);
  EXPECT_EQ(bufs[0], bufs[1]);
}

TEST_F(GroupInputs, DifferentAnchorsAreRefused) {
  anchors[1][1] = (anchors[0][1] + 1) % (int32_t)c.V;
  expect_refused("inputs[1].anchors[1] = " + std::to_string(anchors[1][1]) + " differs from inputs[0].anchors[1] = " +
                 std::to_string(anchors[0][1]));
}

TEST_F(GroupInputs, DifferentHiddenRowsAreRefused) {
  // Block 1, position 2: token row 1 * block + 2, which the gate reads.
  const int64_t t = c.block + 2;
  nudge_hidden(t);
  expect_refused("inputs[1].hidden row " + std::to_string(t) + " (block 1, position 2) differs from inputs[0].hidden");
}

TEST_F(GroupInputs, AnAnchorPositionsHiddenRowIsNotCompared) {
  nudge_hidden(c.block);  // block 1, position 0: never read (SPEC section 1)
  ASSERT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plans[0]);
  EXPECT_EQ(bufs[0], bufs[1]);
}

TEST_F(GroupInputs, HiddenRowsOfAnotherTypeAreRefused) {
  ASSERT_EQ(c.hidden_t, DFSEL_TYPE_F32);
  in[1].hidden = make_matrix(hidden1.data(), DFSEL_TYPE_BF16, c.E, (int64_t)c.blocks * c.block, d.hidden_nb1);
  expect_refused("inputs[1].hidden.type = BF16 differs from inputs[0].hidden.type = F32");
}

TEST_F(GroupInputs, DifferentScalarsAreRefused) {
  in[1].temperature = 0.5f;
  expect_refused("inputs[1].temperature = 0.5 differs from inputs[0].temperature = 0");
  in[1].temperature = -0.0f;  // greedy too, but not the value rank 0 was given
  expect_refused("inputs[1].temperature = -0 differs from inputs[0].temperature = 0");
  in[1].temperature = 0.0f;
  in[1].p_min = 0.25f;
  expect_refused("inputs[1].p_min = 0.25 differs from inputs[0].p_min = 0");
  in[1].p_min = 0.0f;
  in[1].seed = 9;
  expect_refused("inputs[1].seed = 9 differs from inputs[0].seed = 0");
  in[1].seed = 0;
  ASSERT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plans[0]);
}

// W_h is every rank's whole: plan 1 remade over its own copy of it.
class GroupWeights : public GroupInputs {
 protected:
  void remake_rank1(bool differ) {
    w_h1 = d.w_h;
    if (differ) w_h1[w_h1.size() / 2] ^= 1;
    dfsel_plan_destroy(plans[1]);
    plans[1] = nullptr;
    dfsel_plan_desc desc = cpu_desc(c, d, 1, 2, 140, c.V);
    desc.w_h.data = w_h1.data();
    char msg[256];
    ASSERT_EQ(dfsel_plan_create(&desc, &plans[1], msg, sizeof msg), DFSEL_SUCCESS) << msg;
  }
  std::vector<uint8_t> w_h1;
};

TEST_F(GroupWeights, AnEqualCopyOfWhRuns) {
  remake_rank1(false);
  ASSERT_EQ(dfsel_run_group(2, plans, in, out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plans[0]);
  EXPECT_EQ(bufs[0], bufs[1]);
}

TEST_F(GroupWeights, AnotherWhIsRefused) {
  remake_rank1(true);
  expect_refused("plans[1]'s w_h holds other values than plans[0]'s", "every rank of a group must hold the same W_h");
}

}  // namespace
}  // namespace dfsel::test
