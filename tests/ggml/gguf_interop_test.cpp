// GGUF both ways: drafts written by ggml's writer load in dfsel's reader, drafts written by
// dfsel's test writer load in ggml's reader, with the same metadata, tensors and bytes; the
// broken files of dfsel's fixtures that ggml refuses, dfsel refuses too.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "dfsel/gguf.h"
#include "ggml_support.h"
#include "gguf_compare.h"
#include "support/gguf_writer.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct DfselFile {
  dfsel_status status = DFSEL_SUCCESS;
  std::string msg;
  std::unique_ptr<dfsel_gguf, dfsel_status (*)(dfsel_gguf*)> g{nullptr, dfsel_gguf_close};
};

DfselFile dfsel_open(const std::string& path) {
  DfselFile f;
  char msg[1024] = "";
  dfsel_gguf* g = nullptr;
  f.status = dfsel_gguf_open(path.c_str(), -1, -1, &g, msg, sizeof msg);
  f.msg = msg;
  f.g.reset(g);
  return f;
}

// ggml's reader with the tensors loaded (no_alloc false), so that it reads the data too.
struct GgmlFile {
  gguf_context* g = nullptr;
  ggml_context* data = nullptr;
  explicit GgmlFile(const std::string& path) {
    gguf_init_params p{};
    p.no_alloc = false;
    p.ctx = &data;
    g = gguf_init_from_file(path.c_str(), p);
  }
  ~GgmlFile() {
    if (g) gguf_free(g);
    if (data) ggml_free(data);
  }
};

ggml_type wh_type_for(ggml_type cb) { return cb == GGML_TYPE_Q8_0 ? GGML_TYPE_F16 : cb; }

class GgmlWriter : public ::testing::TestWithParam<ggml_type> {};

TEST_P(GgmlWriter, DraftLoadsInDfselWithTheSameMetadataAndTensors) {
  const ggml_type cb = GetParam();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t V = 300, R = 256, E = 256;
  GgmlContext ctx(16u << 20);
  ggml_context* c = ctx.get();
  const std::vector<float> ep = uniform(rng, (size_t)(V * R), 1), en = uniform(rng, (size_t)(V * R), 1);
  const std::vector<float> wh = uniform(rng, (size_t)(E * R), 1), other = uniform(rng, 256 * 3, 1);
  ggml_tensor* t_other = new_filled(c, GGML_TYPE_Q5_K, 256, 3, other.data(), "token_embd.weight");
  ggml_tensor* t_ep = new_filled(c, cb, R, V, ep.data(), "selector_predecessor.weight");
  ggml_tensor* t_en = new_filled(c, cb, R, V, en.data(), "selector_successor.weight");
  ggml_tensor* t_wh = new_filled(c, wh_type_for(cb), E, R, wh.data(), "selector_hidden.weight");

  gguf_context* w = gguf_init_empty();
  std::unique_ptr<gguf_context, void (*)(gguf_context*)> keep(w, gguf_free);
  gguf_set_val_str(w, "general.architecture", "dflash");
  gguf_set_val_str(w, "general.name", "written by \"ggml\"\n");
  gguf_set_val_u32(w, "dflash.selector_rank", (uint32_t)R);
  gguf_set_val_u32(w, "dflash.selector_top_k", 8);
  gguf_set_val_u32(w, "dflash.block_size", 16);
  gguf_set_val_u32(w, "dflash.embedding_length", (uint32_t)E);
  gguf_set_val_f32(w, "dflash.logit_scale", 0.75f);
  gguf_set_val_f32(w, "dflash.final_logit_softcapping", 30.0f);
  gguf_set_val_u8(w, "test.u8", 200);
  gguf_set_val_i8(w, "test.i8", -100);
  gguf_set_val_u16(w, "test.u16", 60000);
  gguf_set_val_i16(w, "test.i16", -30000);
  gguf_set_val_i32(w, "test.i32", -2000000000);
  gguf_set_val_u64(w, "test.u64", (1ull << 63) + 5);
  gguf_set_val_i64(w, "test.i64", -(int64_t(1) << 62));
  gguf_set_val_f32(w, "test.f32", 1.0f / 3);
  gguf_set_val_f64(w, "test.f64", 0.1);
  gguf_set_val_bool(w, "test.bool", false);
  const int32_t i32s[5] = {1, -2, 3, -4, 2147483647};
  gguf_set_arr_data(w, "test.array_i32", GGUF_TYPE_INT32, i32s, 5);
  const std::vector<float> f32s = uniform(rng, 12, 100);
  gguf_set_arr_data(w, "test.array_f32", GGUF_TYPE_FLOAT32, f32s.data(), f32s.size());
  const char* strs[3] = {"a", "", "tab\there \\ \"q\""};
  gguf_set_arr_str(w, "test.array_str", strs, 3);
  for (ggml_tensor* t : {t_other, t_ep, t_en, t_wh}) gguf_add_tensor(w, t);
  TempDir dir;
  const std::string path = dir.file("ggml.gguf");
  ASSERT_TRUE(gguf_write_to_file(w, path.c_str(), false));
  const std::vector<uint8_t> file = read_all(path);

  DfselFile d = dfsel_open(path);
  ASSERT_EQ(DFSEL_SUCCESS, d.status) << d.msg;
  dfsel_config cfg{};
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_gguf_config(d.g.get(), &cfg));
  EXPECT_EQ(V, cfg.n_vocab);
  EXPECT_EQ(E, cfg.n_embd);
  EXPECT_EQ(R, cfg.codebook_rank);
  EXPECT_EQ(8, cfg.top_k);
  EXPECT_EQ(16, cfg.block_size);
  EXPECT_EQ(0.75f, cfg.logit_scale);
  EXPECT_EQ(30.0f, cfg.softcap);
  uint32_t version = 0;
  dfsel_gguf_version(d.g.get(), &version);
  EXPECT_EQ(3u, version);
  EXPECT_EQ("", compare_gguf(d.g.get(), w, file, nullptr, false)) << "against ggml's writer context";
  GgmlFile back(path);
  ASSERT_NE(nullptr, back.g);
  EXPECT_EQ("", compare_gguf(d.g.get(), back.g, file, back.data)) << "against ggml's reader";

  // The selector views: the tensors' own bytes, or for the widened types ggml's floats rounded
  // to BF16 by ggml's converter (dfsel widens them at open).
  dfsel_tensor v[3];
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_gguf_tensors(d.g.get(), &v[0], &v[1], &v[2]));
  const ggml_tensor* src[3] = {t_ep, t_en, t_wh};
  for (int k = 0; k < 3; ++k) {
    SCOPED_TRACE(ggml_get_name(src[k]));
    ASSERT_EQ(src[k]->ne[0], v[k].ne[0]);
    ASSERT_EQ(src[k]->ne[1], v[k].ne[1]);
    const bool widened = widened_by_dfsel(src[k]->type);
    ASSERT_EQ(widened ? (int)GGML_TYPE_BF16 : (int)src[k]->type, (int)v[k].type);
    for (int64_t r = 0; r < src[k]->ne[1]; ++r) {
      const uint8_t* got = static_cast<const uint8_t*>(v[k].data) + (size_t)r * v[k].nb[1];
      if (!widened) {
        ASSERT_EQ(0, std::memcmp(got, static_cast<const uint8_t*>(src[k]->data) + r * src[k]->nb[1],
                                 ggml_row_size(src[k]->type, src[k]->ne[0]))) << "row " << r;
        continue;
      }
      const std::vector<float> f = ggml_row_to_float(src[k], r);
      std::vector<ggml_bf16_t> want(f.size());
      ggml_fp32_to_bf16_row(f.data(), want.data(), (int64_t)f.size());
      ASSERT_EQ(0, std::memcmp(got, want.data(), want.size() * 2)) << "row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GgmlWriter, ::testing::ValuesIn(kDfselTypes.begin() + 1, kDfselTypes.end()),
                         [](const ::testing::TestParamInfo<ggml_type>& i) { return std::string(ggml_type_name(i.param)); });

struct WriterCase {
  dfsel_type type;
  uint32_t version, alignment;
};

class DfselWriter : public ::testing::TestWithParam<WriterCase> {};

TEST_P(DfselWriter, DraftLoadsInGgmlWithTheSameMetadataAndTensors) {
  const WriterCase& w = GetParam();
  DraftOptions o;
  o.n_vocab = 300;
  o.rank = 256;
  o.n_embd = 256;
  o.codebook_type = w.type;
  o.hidden_type = w.type;
  o.version = w.version;
  o.alignment = w.alignment;
  o.logit_scale = 1.25f;
  o.softcap = 20.0f;
  o.other_tensors = true;
  o.seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(o.seed));
  const Draft draft = make_draft(o);
  TempDir dir;
  const std::string path = dir.file("dfsel.gguf");
  ASSERT_TRUE(write_file(path, draft.bytes));
  DfselFile d = dfsel_open(path);
  ASSERT_EQ(DFSEL_SUCCESS, d.status) << d.msg;
  GgmlFile g(path);
  ASSERT_NE(nullptr, g.g) << "ggml refused a draft of dfsel's writer";
  EXPECT_EQ(w.version, gguf_get_version(g.g));
  EXPECT_EQ(w.alignment, gguf_get_alignment(g.g));
  EXPECT_EQ("", compare_gguf(d.g.get(), g.g, draft.bytes, g.data));
  // The selector's bytes where dfsel's writer put them.
  const ggml_tensor* ep = ggml_get_tensor(g.data, "selector_predecessor.weight");
  ASSERT_NE(nullptr, ep);
  EXPECT_EQ(0, std::memcmp(ep->data, &draft.bytes[draft.e_prev_at], ggml_nbytes(ep)));
}

INSTANTIATE_TEST_SUITE_P(
    Drafts, DfselWriter,
    ::testing::Values(WriterCase{DFSEL_TYPE_F32, 3, 32}, WriterCase{DFSEL_TYPE_F16, 3, 64},
                      WriterCase{DFSEL_TYPE_BF16, 2, 32}, WriterCase{DFSEL_TYPE_Q8_0, 3, 32},
                      WriterCase{DFSEL_TYPE_Q4_K, 2, 64}, WriterCase{DFSEL_TYPE_Q6_K, 3, 128},
                      WriterCase{DFSEL_TYPE_Q4_0, 3, 32}, WriterCase{DFSEL_TYPE_Q4_1, 2, 32},
                      WriterCase{DFSEL_TYPE_Q5_0, 3, 64}, WriterCase{DFSEL_TYPE_Q5_1, 3, 32},
                      WriterCase{DFSEL_TYPE_Q2_K, 3, 32}, WriterCase{DFSEL_TYPE_Q3_K, 2, 32},
                      WriterCase{DFSEL_TYPE_Q5_K, 3, 32}),
    [](const ::testing::TestParamInfo<WriterCase>& i) {
      return std::string(dfsel_type_name(i.param.type)) + "_v" + std::to_string(i.param.version) + "_align" +
             std::to_string(i.param.alignment);
    });

}  // namespace
}  // namespace dfsel::test
