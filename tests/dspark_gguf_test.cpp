// DSpark drafts through the GGUF loader (host/gguf/gguf_dspark.h): every weight type and
// layout, the optional tensors, vocabulary shards, copies, the chain run on what the loader
// gives (bitwise the same for every shard count), and every inconsistent draft refused with a
// status and a message.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "dfsel/dspark.h"
#include "host/gguf/dequant.h"
#include "host/reference/dspark_reference.h"
#include "kernels/common/numeric.cuh"
#include "support/block_types.h"
#include "support/dspark_draft.h"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct Handle {
  dfsel_status status = DFSEL_SUCCESS;
  std::string msg;
  std::unique_ptr<dfsel_gguf, dfsel_status (*)(dfsel_gguf*)> g{nullptr, dfsel_gguf_close};
};

Handle open_draft(const std::string& path, int64_t vb = -1, int64_t ve = -1, bool copy = false) {
  Handle h;
  char msg[1024] = "";
  dfsel_gguf* g = nullptr;
  h.status = copy ? dfsel_gguf_open_copy(path.c_str(), vb, ve, &g, msg, sizeof msg)
                  : dfsel_gguf_open(path.c_str(), vb, ve, &g, msg, sizeof msg);
  h.msg = msg;
  h.g.reset(g);
  return h;
}

std::string write(const TempDir& dir, const DSparkDraftOptions& o, const char* name = "dspark.gguf") {
  const std::string path = dir.file(name);
  EXPECT_TRUE(write_file(path, make_dspark_draft(o)));
  return path;
}

// Row r of a view as floats, and what the writer stored there (block types but Q8_0 widened to BF16).
std::vector<float> view_row(const dfsel_tensor& t, int64_t r) {
  std::vector<float> x((size_t)t.ne[0]);
  for (int64_t i = 0; i < t.ne[0]; ++i) x[(size_t)i] = load_elem(static_cast<const uint8_t*>(t.data) + r * t.nb[1], t.type, i);
  return x;
}

std::vector<float> stored_row(const DSparkDraftOptions& o, int which, dfsel_type type, int64_t ne0, int64_t r) {
  const std::vector<uint8_t> row = draft_rows(o.seed, which, type, ne0, r + 1);
  const uint8_t* p = row.data() + (size_t)r * row_bytes(type, ne0);
  std::vector<float> x((size_t)ne0);
  if (is_widened_type(type)) {
    std::vector<uint16_t> wide((size_t)ne0);
    gguf::widen_to_bf16(p, type, 1, ne0, row_bytes(type, ne0), wide.data());
    for (int64_t i = 0; i < ne0; ++i) x[(size_t)i] = bf16_to_float(wide[(size_t)i]);
  } else {
    for (int64_t i = 0; i < ne0; ++i) x[(size_t)i] = load_elem(p, type, i);
  }
  return x;
}

TEST(DSparkGguf, EveryTypeAndLayoutLoadsWithItsConfigAndRows) {
  TempDir dir;
  std::vector<dfsel_type> types = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
  types.insert(types.end(), kWidenedTypes.begin(), kWidenedTypes.end());
  const int n = int(types.size());
  for (int i = 0; i < n; ++i) {
    DSparkDraftOptions o;
    o.rank = 256;
    o.n_vocab = 40 + i;
    o.w1_type = types[i];
    o.w2_type = types[size_t((i + 2) % n)];
    o.conf_type = types[size_t((i + 4) % n)];
    o.n_embd = 256;
    o.conf_bias = i % 2;
    o.scale = i % 3;
    o.d2t = i >= 3;
    o.d2t_i32 = i == 4;
    o.n_target_vocab = o.d2t ? 100 : 0;
    o.sample_from_anchor = i == 1 ? std::optional<bool>(false) : i == 2 ? std::optional<bool>(true) : std::nullopt;
    o.seed = 100 + i;
    SCOPED_TRACE(std::string(dfsel_type_name(o.w1_type)) + " " + dfsel_type_name(o.w2_type));
    const std::string path = write(dir, o);
    for (bool copy : {false, true}) {
      const int64_t vb = copy ? 5 : -1, ve = copy ? 31 : -1;
      Handle h = open_draft(path, vb, ve, copy);
      ASSERT_EQ(h.status, DFSEL_SUCCESS) << h.msg;
      dfsel_draft_kind kind{};
      ASSERT_EQ(dfsel_gguf_draft_kind(h.g.get(), &kind), DFSEL_SUCCESS);
      EXPECT_EQ(kind, DFSEL_DRAFT_DSPARK);
      dfsel_dspark_plan_desc d{};
      ASSERT_EQ(dfsel_gguf_dspark_desc(h.g.get(), &d), DFSEL_SUCCESS);
      const int64_t b = copy ? 5 : 0, e = copy ? 31 : o.n_vocab;
      EXPECT_EQ(d.config.n_vocab, o.n_vocab);
      EXPECT_EQ(d.config.n_target_vocab, o.d2t ? 100 : o.n_vocab);
      EXPECT_EQ(d.config.markov_rank, 256);
      EXPECT_EQ(d.config.n_embd, 256);
      EXPECT_EQ(d.config.n_draft, i == 1 ? 7 : 8);
      EXPECT_EQ(d.config.sample_from_anchor, i == 1 ? 0 : 1);
      EXPECT_EQ(d.config.logit_scale, 0.0f);
      EXPECT_EQ(d.config.softcap, 0.0f);
      EXPECT_EQ(d.shard.v_begin, b);
      EXPECT_EQ(d.shard.v_end, e);
      ASSERT_EQ(d.w1.ne[1], o.d2t ? 100 : o.n_vocab);
      ASSERT_EQ(d.w2.ne[1], e - b);
      EXPECT_EQ(view_row(d.w1, 17), stored_row(o, 0, o.w1_type, 256, 17));
      EXPECT_EQ(view_row(d.w2, 3), stored_row(o, 1, o.w2_type, 256, b + 3));
      EXPECT_EQ(view_row(d.conf_w, 0), stored_row(o, 4, o.conf_type, 512, 0));
      EXPECT_EQ(d.w2_scale.data != nullptr, o.scale != 0);
      if (o.scale) EXPECT_EQ(d.w2_scale.ne[0], o.scale == 1 ? 1 : e - b);
      EXPECT_EQ(d.conf_bias == 0.0f, !o.conf_bias);
      ASSERT_EQ(d.d2t != nullptr, o.d2t);
      for (int64_t v = b; o.d2t && v < e; ++v) ASSERT_EQ(d.d2t[v - b], dspark_draft_target(o, v)) << v;
      int64_t sb = 0, se = 0;
      ASSERT_EQ(dfsel_gguf_shard(h.g.get(), &sb, &se), DFSEL_SUCCESS);
      EXPECT_EQ(sb, b);
      EXPECT_EQ(se, e);
      dfsel_config cfg{};
      EXPECT_EQ(dfsel_gguf_config(h.g.get(), &cfg), DFSEL_INVALID_ARGUMENT);
      EXPECT_NE(std::string(dfsel_gguf_last_error(h.g.get())).find("DSpark draft"), std::string::npos);
    }
  }
}

// The loader's description runs as it is (a max_blocks and a backend added), and ranks over
// shards of the file give the one-rank chain bit for bit.
TEST(DSparkGguf, ADraftsDescriptionRunsOnEveryShardCount) {
  TempDir dir;
  DSparkDraftOptions o;
  o.n_vocab = 300;
  o.rank = 64;
  o.n_embd = 32;
  o.scale = 2;
  o.w2_type = DFSEL_TYPE_Q8_0;
  const std::string path = write(dir, o);
  std::vector<float> logits((size_t)300 * 16), hidden((size_t)32 * 16, 0.25f);
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = draft_value(9, 9, (int64_t)i) * 3.0f;
  const int32_t anchors[2] = {17, 250};
  std::vector<int32_t> want;
  for (int S = 1; S <= 3; ++S) {
    std::vector<Handle> h;
    std::vector<dfsel_dspark_plan*> plans(S, nullptr);
    std::vector<dfsel_dspark_inputs> in(S);
    std::vector<dfsel_dspark_outputs> out(S);
    std::vector<std::vector<int32_t>> tokens(S, std::vector<int32_t>(16, -7)), n(S, std::vector<int32_t>(2, -7));
    for (int s = 0; s < S; ++s) {
      h.push_back(open_draft(path, 300 * s / S, 300 * (s + 1) / S));
      ASSERT_EQ(h[s].status, DFSEL_SUCCESS) << h[s].msg;
      dfsel_dspark_plan_desc d{};
      ASSERT_EQ(dfsel_gguf_dspark_desc(h[s].g.get(), &d), DFSEL_SUCCESS);
      d.config.max_blocks = 2;
      d.shard.rank = s;
      d.shard.n_ranks = S;
      d.backend = DFSEL_BACKEND_CPU;
      char msg[512] = "";
      ASSERT_EQ(dfsel_dspark_plan_create(&d, &plans[s], msg, sizeof msg), DFSEL_SUCCESS) << msg;
      const int64_t vb = d.shard.v_begin, vs = d.shard.v_end - vb;
      in[s].logits = dfsel_tensor_2d(logits.data() + vb, DFSEL_TYPE_F32, vs, 16, 300 * 4);
      in[s].hidden = dfsel_tensor_2d(hidden.data(), DFSEL_TYPE_F32, 32, 16, 32 * 4);
      in[s].anchors = anchors;
      in[s].n_blocks = 2;
      out[s] = dfsel_dspark_outputs{2, tokens[s].data(), n[s].data(), nullptr, nullptr, nullptr, nullptr, nullptr};
    }
    ASSERT_EQ(dfsel_dspark_run_group(S, plans.data(), in.data(), out.data(), nullptr), DFSEL_SUCCESS)
        << dfsel_dspark_plan_last_error(plans[0]);
    for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
    if (S == 1) want = tokens[0];
    for (int s = 0; s < S; ++s) EXPECT_EQ(tokens[s], want) << S << " ranks, rank " << s;
  }
  EXPECT_EQ(std::count(want.begin(), want.end(), -7), 0);
}

struct BadDraft {
  DSparkDefect defect;
  dfsel_status status;
  const char* needle;
};

TEST(DSparkGguf, InconsistentDraftsAreRefusedWithAMessage) {
  TempDir dir;
  const BadDraft cases[] = {
      {DSparkDefect::kMissingW2, DFSEL_FORMAT_ERROR, "tensor 'markov_w2.weight' is missing"},
      {DSparkDefect::kW1Type, DFSEL_UNSUPPORTED, "'markov_w1.weight' has ggml type 20 (iq4_nl); dfsel reads F32"},
      {DSparkDefect::kRankMismatch, DFSEL_FORMAT_ERROR, "expected {R, V_draft} with R = 32"},
      {DSparkDefect::kVocabMismatch, DFSEL_FORMAT_ERROR, "without a d2t map"},
      {DSparkDefect::kD2tRange, DFSEL_FORMAT_ERROR, "d2t[1] = 90 is outside [0, 90)"},
      {DSparkDefect::kD2tShape, DFSEL_FORMAT_ERROR, "tensor 'd2t' has shape {65}"},
      {DSparkDefect::kD2tType, DFSEL_UNSUPPORTED, "tensor 'd2t' has ggml type 0"},
      {DSparkDefect::kScaleShape, DFSEL_FORMAT_ERROR, "tensor 'markov_w2.scale' has shape {2}"},
      {DSparkDefect::kScaleType, DFSEL_UNSUPPORTED, "tensor 'markov_w2.scale' has ggml type 1"},
      {DSparkDefect::kConfShape, DFSEL_FORMAT_ERROR, "tensor 'conf_proj.weight' has shape {32}"},
      {DSparkDefect::kConfEmbd, DFSEL_FORMAT_ERROR, "expected dflash.embedding_length + R = 49"},
      {DSparkDefect::kConfKeyNoTensor, DFSEL_FORMAT_ERROR, "conf_proj.weight' is missing"},
      {DSparkDefect::kAnchorKeyType, DFSEL_FORMAT_ERROR, "dflash.sample_from_anchor has type u32, expected bool"},
      {DSparkDefect::kNoBlockSize, DFSEL_FORMAT_ERROR, "'dflash.block_size' is missing"},
      {DSparkDefect::kBlockOneAfterAnchor, DFSEL_FORMAT_ERROR, "dflash.block_size = 1 leaves no drafted position"},
      {DSparkDefect::kWrongArchitecture, DFSEL_FORMAT_ERROR, "expected \"dflash\""},
  };
  for (const BadDraft& c : cases) {
    DSparkDraftOptions o;
    o.defect = c.defect;
    o.n_embd = c.defect == DSparkDefect::kConfKeyNoTensor ? 0 : 16;
    o.scale = 2;
    o.d2t = c.defect == DSparkDefect::kD2tRange || c.defect == DSparkDefect::kD2tShape || c.defect == DSparkDefect::kD2tType;
    o.n_target_vocab = o.d2t ? 90 : 0;
    o.w1_type = DFSEL_TYPE_F32;
    const std::string path = write(dir, o, "bad.gguf");
    Handle h = open_draft(path);
    EXPECT_EQ(h.status, c.status) << c.needle << ": " << h.msg;
    EXPECT_NE(h.msg.find(c.needle), std::string::npos) << "message: " << h.msg << " lacks " << c.needle;
    EXPECT_NE(h.msg.find(path), std::string::npos) << h.msg;
    EXPECT_EQ(h.g.get(), nullptr);
  }
  DSparkDraftOptions o;
  Handle h = open_draft(write(dir, o, "range.gguf"), 10, 70);
  EXPECT_EQ(h.status, DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(h.msg.find("[10, 70) is not a non-empty range in [0, 64)"), std::string::npos) << h.msg;
}

TEST(DSparkGguf, DraftKindsAreAskedOfTheRightCalls) {
  TempDir dir;
  DraftOptions o;
  const std::string path = dir.file("dflash2.gguf");
  ASSERT_TRUE(write_file(path, make_draft(o).bytes));
  Handle h = open_draft(path);
  ASSERT_EQ(h.status, DFSEL_SUCCESS) << h.msg;
  dfsel_draft_kind kind{};
  ASSERT_EQ(dfsel_gguf_draft_kind(h.g.get(), &kind), DFSEL_SUCCESS);
  EXPECT_EQ(kind, DFSEL_DRAFT_DFLASH2);
  dfsel_dspark_plan_desc d{};
  EXPECT_EQ(dfsel_gguf_dspark_desc(h.g.get(), &d), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_gguf_last_error(h.g.get())).find("DFlash2 draft"), std::string::npos);
  EXPECT_EQ(dfsel_gguf_dspark_desc(h.g.get(), nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_draft_kind(nullptr, &kind), DFSEL_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace dfsel::test
