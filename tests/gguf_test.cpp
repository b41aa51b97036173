// The GGUF loader (SPEC section 6.6): round trips of every type (the widened ones against a
// per-element decoding of the block layouts), vocabulary-sharded loads, every broken fixture,
// truncation at every byte, and a draft of realistic size.
#include "dfsel/gguf.h"
#include "dfsel/dspark.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "host/gguf/gguf.h"
#include "kernels/common/numeric.cuh"
#include "support/block_types.h"
#include "support/gguf_writer.h"

namespace dfsel::test {
namespace {

struct Closer {
  void operator()(dfsel_gguf* g) const { dfsel_gguf_close(g); }
};
using GgufPtr = std::unique_ptr<dfsel_gguf, Closer>;

struct Opened {
  dfsel_status status = DFSEL_SUCCESS;
  std::string msg;
  GgufPtr g;
};

Opened open_gguf(const std::string& path, int64_t v_begin = -1, int64_t v_end = -1) {
  Opened o;
  char msg[1024];
  dfsel_gguf* g = reinterpret_cast<dfsel_gguf*>(0x1);  // must be reset by the call
  o.status = dfsel_gguf_open(path.c_str(), v_begin, v_end, &g, msg, sizeof msg);
  o.msg = msg;
  if (o.status == DFSEL_SUCCESS) {
    o.g.reset(g);
  } else {
    EXPECT_EQ(g, nullptr) << "a failed open leaves *out NULL";
  }
  return o;
}

class GgufFiles {
 public:
  std::string write(const Draft& d, size_t n = SIZE_MAX) {
    const std::string path = dir_.file("draft" + std::to_string(next_++) + ".gguf");
    EXPECT_TRUE(write_file(path, d.bytes, n)) << path;
    return path;
  }

 private:
  TempDir dir_;
  int next_ = 0;
};

float f16_at(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return f16_to_float(h);
}

// Element (row, col) of a stored tensor decoded independently of the loader: a widened type
// by its bit fields (support/block_types.h).
float stored_element(dfsel_type t, const uint8_t* rows, int64_t ne0, int64_t row, int64_t col) {
  const uint8_t* r = rows + size_t(row) * row_bytes(t, ne0);
  if (!is_widened_type(t)) return load_elem(r, t, col);
  const BlockKind k = block_kind(t);
  const BlockFields f = unpack_block(t, r + size_t(col / k.elems) * size_t(k.bytes));
  return field_value(t, f, int(col % k.elems));
}

// Bound on |x - stored(x)| for one element: half a step of the type's grid (the writer's
// quantisers round to nearest and choose scales whose grid covers the block's values).
float quant_bound(dfsel_type t, const uint8_t* rows, int64_t ne0, int64_t row, int64_t col,
                  float x) {
  const uint8_t* r = rows + size_t(row) * row_bytes(t, ne0);
  switch (t) {
    case DFSEL_TYPE_F32:
      return 0.0f;
    case DFSEL_TYPE_F16:
      return std::fabs(x) * 0x1p-11f + 0x1p-25f;
    case DFSEL_TYPE_BF16:
      return std::fabs(x) * 0x1p-8f;
    case DFSEL_TYPE_Q8_0:
      return 0.5f * f16_at(r + size_t(col / 32) * 34) + 1e-6f;
    default: {
      const BlockKind k = block_kind(t);
      const BlockFields f = unpack_block(t, r + size_t(col / k.elems) * size_t(k.bytes));
      const float step = f16_to_float(f.d) * float(f.scale[int(col % k.elems) / k.sub]);
      return 0.5f * std::fabs(step) * (1 + 1e-5f) + 1e-6f;
    }
  }
}

// Checks a codebook or W_h view of rows [r0, r0 + view.ne[1]) of draft tensor `which`.
void expect_view(const Draft& d, const DraftOptions& o, int which, const dfsel_tensor& v,
                 int64_t r0) {
  const dfsel_type t = which == 2 ? o.hidden_type : o.codebook_type;
  const int64_t ne0 = which == 2 ? o.n_embd : o.rank;
  const uint8_t* stored = d.bytes.data() + (which == 0   ? d.e_prev_at
                                            : which == 1 ? d.e_next_at
                                                         : d.w_h_at);
  SCOPED_TRACE(std::string("tensor ") + std::to_string(which) + " " + dfsel_type_name(t));
  ASSERT_NE(v.data, nullptr);
  EXPECT_EQ(v.ne[0], ne0);
  EXPECT_EQ(v.ne[2], 1);
  EXPECT_EQ(v.ne[3], 1);
  const int64_t rows = v.ne[1];
  if (is_widened_type(t)) {
    ASSERT_EQ(v.type, DFSEL_TYPE_BF16);
    EXPECT_EQ(v.nb[0], 2u);
    EXPECT_EQ(v.nb[1], size_t(ne0) * 2);
    int64_t bad = 0;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < ne0; ++c) {
        const float ref = stored_element(t, stored, ne0, r0 + r, c);
        uint16_t got;
        memcpy(&got, static_cast<const uint8_t*>(v.data) + size_t(r) * v.nb[1] + size_t(c) * 2, 2);
        if (got != float_to_bf16(ref) && bad++ < 5)
          ADD_FAILURE() << "row " << r0 + r << " col " << c << ": bf16 " << bf16_to_float(got)
                        << " vs the block's value " << ref;
      }
    EXPECT_EQ(bad, 0);
  } else {
    ASSERT_EQ(v.type, t);
    const size_t rb = row_bytes(t, ne0);
    EXPECT_EQ(v.nb[0], t == DFSEL_TYPE_Q8_0 ? sizeof(BlockQ8_0) : (t == DFSEL_TYPE_F32 ? 4u : 2u));
    EXPECT_EQ(v.nb[1], rb);
    EXPECT_EQ(memcmp(v.data, stored + size_t(r0) * rb, size_t(rows) * rb), 0)
        << "the view's bytes are the file's";
  }
  EXPECT_EQ(v.nb[2], v.nb[1] * size_t(rows));
  // and the values are the ones the writer stored, within the rounding of the type
  int64_t far = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < ne0; ++c) {
      const float x = draft_element(o, which, r0 + r, c);
      const float got =
          load_elem(static_cast<const uint8_t*>(v.data) + size_t(r) * v.nb[1], v.type, c);
      float bound = quant_bound(t, stored, ne0, r0 + r, c, x);
      if (is_widened_type(t)) bound += std::fabs(got) * 0x1p-8f;  // and the rounding to bf16
      if (!(std::fabs(got - x) <= bound) && far++ < 5)
        ADD_FAILURE() << "row " << r0 + r << " col " << c << ": " << got << " vs written " << x
                      << " (bound " << bound << ")";
    }
  EXPECT_EQ(far, 0);
}

// ---- round trips -----------------------------------------------------------------------

struct TypeCase {
  dfsel_type type;
  uint32_t version;
};

class GgufRoundTrip : public ::testing::TestWithParam<TypeCase> {
 protected:
  GgufFiles files_;
};

TEST_P(GgufRoundTrip, ConfigAndViews) {
  const TypeCase tc = GetParam();
  DraftOptions o;
  o.codebook_type = tc.type;
  o.hidden_type = tc.type;
  o.version = tc.version;
  o.n_vocab = 37;
  o.rank = is_widened_type(tc.type) ? 256 : 64;
  o.n_embd = is_widened_type(tc.type) ? 512 : 96;
  o.top_k = 8;
  o.block_size = 16;
  o.seed = 11 + tc.type;
  o.logit_scale = 0.75f;
  o.softcap = 30.0f;
  const Draft d = make_draft(o);
  const Opened op = open_gguf(files_.write(d));
  ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
  dfsel_config cfg;
  memset(&cfg, 0x5a, sizeof cfg);
  ASSERT_EQ(dfsel_gguf_config(op.g.get(), &cfg), DFSEL_SUCCESS);
  EXPECT_EQ(cfg.n_vocab, o.n_vocab);
  EXPECT_EQ(cfg.n_embd, o.n_embd);
  EXPECT_EQ(cfg.codebook_rank, o.rank);
  EXPECT_EQ(cfg.top_k, o.top_k);
  EXPECT_EQ(cfg.block_size, o.block_size);
  EXPECT_EQ(cfg.logit_scale, 0.75f);
  EXPECT_EQ(cfg.softcap, 30.0f);
  EXPECT_EQ(cfg.max_blocks, 0);
  uint32_t version = 0;
  ASSERT_EQ(dfsel_gguf_version(op.g.get(), &version), DFSEL_SUCCESS);
  EXPECT_EQ(version, tc.version);
  dfsel_tensor e_prev, e_next, w_h;
  ASSERT_EQ(dfsel_gguf_tensors(op.g.get(), &e_prev, &e_next, &w_h), DFSEL_SUCCESS);
  EXPECT_EQ(e_prev.ne[1], o.n_vocab);
  EXPECT_EQ(w_h.ne[1], o.rank);
  expect_view(d, o, 0, e_prev, 0);
  expect_view(d, o, 1, e_next, 0);
  expect_view(d, o, 2, w_h, 0);
}

TEST_P(GgufRoundTrip, ShardedRows) {
  const TypeCase tc = GetParam();
  DraftOptions o;
  o.codebook_type = tc.type;
  o.hidden_type = DFSEL_TYPE_F32;
  o.version = tc.version;
  o.n_vocab = 53;
  o.rank = is_widened_type(tc.type) ? 512 : 32;
  o.seed = 5;
  const Draft d = make_draft(o);
  const std::string path = files_.write(d);
  const std::pair<int64_t, int64_t> ranges[] = {{0, 53}, {0, 1},   {52, 53},
                                                {0, 27}, {27, 53}, {10, 31}};
  for (const auto& [vb, ve] : ranges) {
    SCOPED_TRACE("[" + std::to_string(vb) + ", " + std::to_string(ve) + ")");
    const Opened op = open_gguf(path, vb, ve);
    ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
    dfsel_config cfg;
    ASSERT_EQ(dfsel_gguf_config(op.g.get(), &cfg), DFSEL_SUCCESS);
    EXPECT_EQ(cfg.n_vocab, 53) << "n_vocab is the whole vocabulary";
    int64_t b = -5, e = -5;
    ASSERT_EQ(dfsel_gguf_shard(op.g.get(), &b, &e), DFSEL_SUCCESS);
    EXPECT_EQ(b, vb);
    EXPECT_EQ(e, ve);
    dfsel_tensor e_prev, e_next, w_h;
    ASSERT_EQ(dfsel_gguf_tensors(op.g.get(), &e_prev, &e_next, &w_h), DFSEL_SUCCESS);
    EXPECT_EQ(e_prev.ne[1], ve - vb);
    EXPECT_EQ(e_next.ne[1], ve - vb);
    expect_view(d, o, 0, e_prev, vb);
    expect_view(d, o, 1, e_next, vb);
    expect_view(d, o, 2, w_h, 0);
  }
}

std::string type_case_name(const ::testing::TestParamInfo<TypeCase>& info) {
  return std::string(dfsel_type_name(info.param.type)) + "_v" + std::to_string(info.param.version);
}

INSTANTIATE_TEST_SUITE_P(
    Gguf, GgufRoundTrip,
    ::testing::Values(TypeCase{DFSEL_TYPE_F32, 3}, TypeCase{DFSEL_TYPE_F16, 3},
                      TypeCase{DFSEL_TYPE_BF16, 3}, TypeCase{DFSEL_TYPE_Q8_0, 3},
                      TypeCase{DFSEL_TYPE_Q4_0, 3}, TypeCase{DFSEL_TYPE_Q4_1, 3},
                      TypeCase{DFSEL_TYPE_Q5_0, 3}, TypeCase{DFSEL_TYPE_Q5_1, 3},
                      TypeCase{DFSEL_TYPE_Q2_K, 3}, TypeCase{DFSEL_TYPE_Q3_K, 3},
                      TypeCase{DFSEL_TYPE_Q4_K, 3}, TypeCase{DFSEL_TYPE_Q5_K, 3},
                      TypeCase{DFSEL_TYPE_Q6_K, 3}, TypeCase{DFSEL_TYPE_F16, 2},
                      TypeCase{DFSEL_TYPE_Q8_0, 2}, TypeCase{DFSEL_TYPE_Q4_0, 2},
                      TypeCase{DFSEL_TYPE_Q4_K, 2}, TypeCase{DFSEL_TYPE_Q6_K, 2}),
    type_case_name);

// ---- metadata ---------------------------------------------------------------------------

TEST(GgufMetadata, EveryValueTypeExact) {
  GgufFiles files;
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE("version " + std::to_string(version));
    DraftOptions o;
    o.version = version;
    o.every_value_type = true;
    const Opened op = open_gguf(files.write(make_draft(o)));
    ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
    struct Expect {
      const char* key;
      dfsel_gguf_value_type type, elem_type;
      uint64_t n;
      const char* text;
    };
    const Expect expect[] = {
        {"general.architecture", DFSEL_GGUF_STRING, DFSEL_GGUF_STRING, 1, "\"dflash\""},
        {"general.name", DFSEL_GGUF_STRING, DFSEL_GGUF_STRING, 1, "\"dfsel test draft\""},
        {"dflash.selector_rank", DFSEL_GGUF_UINT32, DFSEL_GGUF_UINT32, 1, "32"},
        {"dflash.selector_top_k", DFSEL_GGUF_UINT32, DFSEL_GGUF_UINT32, 1, "4"},
        {"dflash.block_size", DFSEL_GGUF_UINT32, DFSEL_GGUF_UINT32, 1, "16"},
        {"dflash.embedding_length", DFSEL_GGUF_UINT32, DFSEL_GGUF_UINT32, 1, "32"},
        {"test.u8", DFSEL_GGUF_UINT8, DFSEL_GGUF_UINT8, 1, "200"},
        {"test.i8", DFSEL_GGUF_INT8, DFSEL_GGUF_INT8, 1, "-100"},
        {"test.u16", DFSEL_GGUF_UINT16, DFSEL_GGUF_UINT16, 1, "60000"},
        {"test.i16", DFSEL_GGUF_INT16, DFSEL_GGUF_INT16, 1, "-30000"},
        {"test.u32", DFSEL_GGUF_UINT32, DFSEL_GGUF_UINT32, 1, "4000000000"},
        {"test.i32", DFSEL_GGUF_INT32, DFSEL_GGUF_INT32, 1, "-2000000000"},
        {"test.f32", DFSEL_GGUF_FLOAT32, DFSEL_GGUF_FLOAT32, 1, "1.5"},
        {"test.bool", DFSEL_GGUF_BOOL, DFSEL_GGUF_BOOL, 1, "true"},
        {"test.string", DFSEL_GGUF_STRING, DFSEL_GGUF_STRING, 1, "\"hello \\\"gguf\\\"\\n\""},
        {"test.u64", DFSEL_GGUF_UINT64, DFSEL_GGUF_UINT64, 1, "9223372036854775813"},
        {"test.i64", DFSEL_GGUF_INT64, DFSEL_GGUF_INT64, 1, "-4611686018427387904"},
        {"test.f64", DFSEL_GGUF_FLOAT64, DFSEL_GGUF_FLOAT64, 1, "0.10000000000000001"},
        {"test.array_u32", DFSEL_GGUF_ARRAY, DFSEL_GGUF_UINT32, 20,
         "[1, 2, 3, 4, 5, 6, 7, 8, ... 20 items]"},
        {"test.array_string", DFSEL_GGUF_ARRAY, DFSEL_GGUF_STRING, 3, "[\"a\", \"bc\", \"\"]"},
        {"test.array_nested", DFSEL_GGUF_ARRAY, DFSEL_GGUF_ARRAY, 3, "[[1, -2], [], [3]]"},
        {"test.array_empty", DFSEL_GGUF_ARRAY, DFSEL_GGUF_FLOAT32, 0, "[]"},
        {"test.array_bool", DFSEL_GGUF_ARRAY, DFSEL_GGUF_BOOL, 2, "[true, false]"},
    };
    int64_t count = 0;
    ASSERT_EQ(dfsel_gguf_metadata_count(op.g.get(), &count), DFSEL_SUCCESS);
    ASSERT_EQ(count, int64_t(sizeof expect / sizeof expect[0]));
    for (int64_t i = 0; i < count; ++i) {
      const Expect& e = expect[i];
      const char* key = nullptr;
      ASSERT_EQ(dfsel_gguf_metadata_key(op.g.get(), i, &key), DFSEL_SUCCESS);
      EXPECT_STREQ(key, e.key);
      dfsel_gguf_kv_type t;
      ASSERT_EQ(dfsel_gguf_metadata_type(op.g.get(), i, &t), DFSEL_SUCCESS);
      EXPECT_EQ(t.type, e.type) << e.key;
      EXPECT_EQ(t.elem_type, e.elem_type) << e.key;
      EXPECT_EQ(t.n_elems, e.n) << e.key;
      char buf[256];
      ASSERT_EQ(dfsel_gguf_metadata_value_string(op.g.get(), i, buf, sizeof buf), DFSEL_SUCCESS);
      EXPECT_STREQ(buf, e.text) << e.key;
    }
    // a short buffer cuts the rendering and still terminates it
    char small[6];
    ASSERT_EQ(dfsel_gguf_metadata_value_string(op.g.get(), 1, small, sizeof small), DFSEL_SUCCESS);
    EXPECT_STREQ(small, "\"dfse");
    EXPECT_STREQ(dfsel_gguf_value_type_name(DFSEL_GGUF_ARRAY), "array");
    EXPECT_EQ(dfsel_gguf_value_type_name(static_cast<dfsel_gguf_value_type>(13)), nullptr);
  }
}

TEST(GgufMetadata, TypedReadsExact) {
  GgufFiles files;
  DraftOptions o;
  o.every_value_type = true;
  gguf::File f;
  const Status s = gguf::File::open(files.write(make_draft(o)), &f);
  ASSERT_TRUE(s.ok()) << s.msg;
  int64_t i = 0;
  double x = 0;
  bool b = false;
  std::string_view str;
  ASSERT_TRUE(f.read_int(*f.find_key("test.u8"), &i));
  EXPECT_EQ(i, 200);
  ASSERT_TRUE(f.read_int(*f.find_key("test.i8"), &i));
  EXPECT_EQ(i, -100);
  ASSERT_TRUE(f.read_int(*f.find_key("test.u16"), &i));
  EXPECT_EQ(i, 60000);
  ASSERT_TRUE(f.read_int(*f.find_key("test.i16"), &i));
  EXPECT_EQ(i, -30000);
  ASSERT_TRUE(f.read_int(*f.find_key("test.u32"), &i));
  EXPECT_EQ(i, 4000000000);
  ASSERT_TRUE(f.read_int(*f.find_key("test.i32"), &i));
  EXPECT_EQ(i, -2000000000);
  ASSERT_TRUE(f.read_int(*f.find_key("test.i64"), &i));
  EXPECT_EQ(i, -(int64_t(1) << 62));
  EXPECT_FALSE(f.read_int(*f.find_key("test.u64"), &i)) << "2^63 + 5 does not fit an int64";
  EXPECT_FALSE(f.read_int(*f.find_key("test.f32"), &i));
  ASSERT_TRUE(f.read_float(*f.find_key("test.f32"), &x));
  EXPECT_EQ(x, 1.5);
  ASSERT_TRUE(f.read_float(*f.find_key("test.f64"), &x));
  EXPECT_EQ(x, 0.1);
  ASSERT_TRUE(f.read_bool(*f.find_key("test.bool"), &b));
  EXPECT_TRUE(b);
  ASSERT_TRUE(f.read_string(*f.find_key("test.string"), &str));
  EXPECT_EQ(str, "hello \"gguf\"\n");
  EXPECT_FALSE(f.read_string(*f.find_key("test.array_string"), &str));
  EXPECT_EQ(f.find_key("test.missing"), nullptr);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
}

TEST(GgufMetadata, DefaultsWhenOptionalKeysAbsent) {
  GgufFiles files;
  const Opened op = open_gguf(files.write(make_draft(DraftOptions{})));
  ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
  dfsel_config cfg;
  ASSERT_EQ(dfsel_gguf_config(op.g.get(), &cfg), DFSEL_SUCCESS);
  EXPECT_EQ(cfg.logit_scale, 1.0f);
  EXPECT_EQ(cfg.softcap, 0.0f);
}

// A scale or softcap that is not zero must stay so as the float that dfsel_config holds: a tiny
// f64 used to pass the "> 0" check and become 0.0f, which dfsel_config reads as "no scale" (and
// softcap 0 as "no softcap"), so the draft ran unscaled without a word. Subnormal floats are
// refused alike; a normal float's worth, or 0 for the softcap, is read as it is.
TEST(GgufMetadata, ScalarsAFloatCannotHoldAreRefused) {
  GgufFiles files;
  struct Case {
    double value;
    bool f64;
  };
  for (const char* key : {"dflash.logit_scale", "dflash.final_logit_softcapping"}) {
    const bool scale = std::string(key) == "dflash.logit_scale";
    for (const Case c : {Case{1e-46, true}, Case{1e-300, true}, Case{4.9e-324, true}, Case{1e-40, true},
                         Case{1e-40, false}, Case{1e39, true}}) {
      DraftOptions o;
      o.f64_scalars = c.f64;
      (scale ? o.logit_scale : o.softcap) = c.value;
      const Opened op = open_gguf(files.write(make_draft(o)));
      EXPECT_EQ(op.status, DFSEL_FORMAT_ERROR) << key << " = " << c.value << ": " << op.msg;
      EXPECT_NE(op.msg.find(key), std::string::npos) << op.msg;
    }
    for (const double v : {1e-30, 3.0e38, 0.5, 0.0}) {
      if (scale && v == 0.0) continue;  // not positive: refused as such
      DraftOptions o;
      o.f64_scalars = true;
      (scale ? o.logit_scale : o.softcap) = v;
      const Opened op = open_gguf(files.write(make_draft(o)));
      ASSERT_EQ(op.status, DFSEL_SUCCESS) << key << " = " << v << ": " << op.msg;
      dfsel_config cfg;
      ASSERT_EQ(dfsel_gguf_config(op.g.get(), &cfg), DFSEL_SUCCESS);
      EXPECT_EQ(scale ? cfg.logit_scale : cfg.softcap, float(v)) << key;
    }
  }
}

// ---- layouts ---------------------------------------------------------------------------

TEST(GgufLayout, OtherTensorsOfOtherTypesAreListedAndIgnored) {
  GgufFiles files;
  DraftOptions o;
  o.other_tensors = true;
  o.codebook_type = DFSEL_TYPE_Q8_0;
  const Draft d = make_draft(o);
  const Opened op = open_gguf(files.write(d));
  ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
  int64_t n = 0;
  ASSERT_EQ(dfsel_gguf_tensor_count(op.g.get(), &n), DFSEL_SUCCESS);
  ASSERT_EQ(n, 6);
  const char* names[] = {"token_embd.weight",         "output_norm.weight",
                         "blk.0.positions",           "selector_predecessor.weight",
                         "selector_successor.weight", "selector_hidden.weight"};
  const char* type_names[] = {"q5_K", "f32", "i32", "q8_0", "q8_0", "f16"};
  const uint64_t sizes[] = {3 * 176, 32 * 4, 3 * 4, 64 * 34, 64 * 34, 32 * 32 * 2};
  for (int64_t i = 0; i < n; ++i) {
    dfsel_gguf_tensor_desc t;
    ASSERT_EQ(dfsel_gguf_tensor_info(op.g.get(), i, &t), DFSEL_SUCCESS);
    EXPECT_STREQ(t.name, names[i]);
    EXPECT_STREQ(t.type_name, type_names[i]);
    EXPECT_EQ(t.n_bytes, sizes[i]);
    EXPECT_EQ(t.file_offset, d.layout.data_at[size_t(i)]);
    EXPECT_EQ(t.file_offset % 32, 0u);
  }
  dfsel_gguf_tensor_desc t;
  ASSERT_EQ(dfsel_gguf_tensor_info(op.g.get(), 5, &t), DFSEL_SUCCESS);
  EXPECT_EQ(t.ggml_type, DFSEL_TYPE_F16);
  EXPECT_EQ(t.n_dims, 2);
  EXPECT_EQ(t.ne[0], 32);
  EXPECT_EQ(t.ne[1], 32);
  EXPECT_EQ(t.ne[2], 1);
  dfsel_tensor e_prev, e_next, w_h;
  ASSERT_EQ(dfsel_gguf_tensors(op.g.get(), &e_prev, &e_next, &w_h), DFSEL_SUCCESS);
  expect_view(d, o, 0, e_prev, 0);
  expect_view(d, o, 1, e_next, 0);
  expect_view(d, o, 2, w_h, 0);
}

// general.alignment other than 32; with 1 the data of an F32 or Q8_0 tensor can sit at an
// odd address, and the loader hands out an aligned copy instead of a misaligned view.
TEST(GgufLayout, Alignments) {
  GgufFiles files;
  int misaligned = 0;  // cases whose stored data could not be viewed in place
  for (uint32_t alignment : {1u, 2u, 8u, 64u, 4096u})
    for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_Q8_0, DFSEL_TYPE_BF16, DFSEL_TYPE_Q6_K})
      for (int shift = 0; shift < 4; ++shift) {
        SCOPED_TRACE("alignment " + std::to_string(alignment) + " " + dfsel_type_name(t) + " shift " +
                     std::to_string(shift));
        DraftOptions o;
        o.name = std::string(size_t(shift), '+') + "draft";
        o.alignment = alignment;
        o.codebook_type = t;
        o.hidden_type = DFSEL_TYPE_F32;
        o.rank = is_widened_type(t) ? 256 : 32;
        o.n_vocab = 7;
        o.n_embd = 3;
        o.other_tensors = alignment < 4;  // shifts the later tensors off natural alignment
        const Draft d = make_draft(o);
        const size_t natural = t == DFSEL_TYPE_F32 ? 4 : 2;
        misaligned += (!is_widened_type(t) && d.e_prev_at % natural != 0) + (d.w_h_at % 4 != 0);
        const Opened op = open_gguf(files.write(d), 2, 6);
        ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
        dfsel_tensor e_prev, e_next, w_h;
        ASSERT_EQ(dfsel_gguf_tensors(op.g.get(), &e_prev, &e_next, &w_h), DFSEL_SUCCESS);
        for (const dfsel_tensor* v : {&e_prev, &e_next, &w_h})
          EXPECT_EQ(reinterpret_cast<uintptr_t>(v->data) % (v->type == DFSEL_TYPE_F32 ? 4 : 2), 0u);
        expect_view(d, o, 0, e_prev, 2);
        expect_view(d, o, 1, e_next, 2);
        expect_view(d, o, 2, w_h, 0);
      }
  EXPECT_GT(misaligned, 0) << "the fixtures should exercise the realigned copy";
}

// ---- the writer's quantisers -----------------------------------------------------------

// The writer's quantisers stay within half a step of the grid they chose, and their steps are
// not wasteful: the largest magnitude of each block needs most of the grid.
TEST(GgufDequant, WriterQuantisersAreTight) {
  std::mt19937_64 rng(3);
  std::uniform_real_distribution<float> u(-2.0f, 1.0f);
  std::vector<dfsel_type> types = kWidenedTypes;
  types.push_back(DFSEL_TYPE_Q8_0);
  for (dfsel_type t : types) {
    SCOPED_TRACE(dfsel_type_name(t));
    std::vector<float> x(1024);
    for (float& v : x) v = u(rng);
    x[5] = 0.0f;
    std::fill(x.begin() + 256, x.begin() + 512, 0.0f);  // an all-zero block
    const std::vector<uint8_t> q = quantize(t, x.data(), int64_t(x.size()));
    double worst = 0;
    for (size_t i = 0; i < x.size(); ++i) {
      const float got = stored_element(t, q.data(), int64_t(x.size()), 0, int64_t(i));
      const float bound = quant_bound(t, q.data(), int64_t(x.size()), 0, int64_t(i), x[i]);
      ASSERT_LE(std::fabs(got - x[i]), bound) << "element " << i;
      worst = std::max(worst, double(std::fabs(got - x[i])));
    }
    // The data spans 3: a grid of n levels steps by about 3 / n (with mins) or 4 / n (signed,
    // covering [-2, 2]), and rounding stays within half a step.
    const int levels = t == DFSEL_TYPE_Q8_0 ? 255 : block_kind(t).q.hi - block_kind(t).q.lo + 1;
    EXPECT_LT(worst, 0.7 * 4.0 / levels);
  }
}

// ---- broken files ----------------------------------------------------------------------

struct BrokenCase {
  const char* name;
  Defect defect;
  dfsel_status status;
  std::vector<std::string> says;  // substrings of the message
};

class GgufBroken : public ::testing::TestWithParam<BrokenCase> {};

TEST_P(GgufBroken, FailsWithAMessageNamingTheProblem) {
  const BrokenCase& c = GetParam();
  GgufFiles files;
  for (uint32_t version : {2u, 3u}) {
    DraftOptions o;
    o.defect = c.defect;
    o.version = version;
    const std::string path = files.write(make_draft(o));
    const Opened op = open_gguf(path);
    EXPECT_EQ(op.status, c.status) << dfsel_status_string(op.status) << ": " << op.msg;
    EXPECT_EQ(op.msg.rfind(path + ": ", 0), 0u) << "the message starts with the path: " << op.msg;
    for (const std::string& s : c.says)
      EXPECT_NE(op.msg.find(s), std::string::npos) << "'" << s << "' is not in: " << op.msg;
  }
}

const std::string kPrev = "selector_predecessor.weight";
const std::string kNext = "selector_successor.weight";
const std::string kHidden = "selector_hidden.weight";

INSTANTIATE_TEST_SUITE_P(
    Gguf, GgufBroken,
    ::testing::Values(
        BrokenCase{
            "BadMagic", Defect::kBadMagic, DFSEL_FORMAT_ERROR, {"header", "magic", "\"GGUX\""}},
        BrokenCase{"HugeTensorCount",
                   Defect::kHugeTensorCount,
                   DFSEL_FORMAT_ERROR,
                   {"tensor count 4611686018427387904", "cannot fit"}},
        BrokenCase{"HugeKvCount",
                   Defect::kHugeKvCount,
                   DFSEL_FORMAT_ERROR,
                   {"metadata", "key/value count 4611686018427387904"}},
        BrokenCase{"KeyPastEof",
                   Defect::kKeyPastEof,
                   DFSEL_FORMAT_ERROR,
                   {"metadata 0", "key length", "past the end of the file"}},
        BrokenCase{"StringPastEof",
                   Defect::kStringPastEof,
                   DFSEL_FORMAT_ERROR,
                   {"general.architecture", "string value length 4611686018427387904", "byte"}},
        BrokenCase{"HugeArray",
                   Defect::kHugeArray,
                   DFSEL_FORMAT_ERROR,
                   {"test.huge", "array length 4611686018427387904"}},
        BrokenCase{"BadValueType",
                   Defect::kBadValueType,
                   DFSEL_FORMAT_ERROR,
                   {"test.flag", "value type 13"}},
        BrokenCase{"BadArrayType",
                   Defect::kBadArrayType,
                   DFSEL_FORMAT_ERROR,
                   {"test.bad_array", "array element type 13"}},
        BrokenCase{"BadBool", Defect::kBadBool, DFSEL_FORMAT_ERROR, {"test.flag", "bool value 2"}},
        BrokenCase{
            "DeepArrays", Defect::kDeepArrays, DFSEL_FORMAT_ERROR, {"test.deep", "nest deeper"}},
        BrokenCase{"EmptyKey", Defect::kEmptyKey, DFSEL_FORMAT_ERROR, {"metadata", "is empty"}},
        BrokenCase{"DuplicateKey",
                   Defect::kDuplicateKey,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.selector_rank", "duplicates metadata 2"}},
        BrokenCase{"BadAlignment",
                   Defect::kBadAlignment,
                   DFSEL_FORMAT_ERROR,
                   {"general.alignment", "48", "power of two"}},
        BrokenCase{"AlignmentType",
                   Defect::kAlignmentType,
                   DFSEL_FORMAT_ERROR,
                   {"general.alignment", "u64", "expected u32"}},
        BrokenCase{"NamePastEof",
                   Defect::kNamePastEof,
                   DFSEL_FORMAT_ERROR,
                   {"tensor info 0", "name length"}},
        BrokenCase{"UnknownTensorType",
                   Defect::kUnknownTensorType,
                   DFSEL_UNSUPPORTED,
                   {kHidden, "ggml type 200"}},
        BrokenCase{"NDims0", Defect::kNDims0, DFSEL_FORMAT_ERROR, {kHidden, "n_dims 0", "[1, 4]"}},
        BrokenCase{"NDims5", Defect::kNDims5, DFSEL_FORMAT_ERROR, {kHidden, "n_dims 5"}},
        BrokenCase{"NeZero", Defect::kNeZero, DFSEL_FORMAT_ERROR, {kNext, "ne[1] = 0"}},
        BrokenCase{"NeOverflow", Defect::kNeOverflow, DFSEL_FORMAT_ERROR, {kNext, "overflows"}},
        BrokenCase{"RaggedBlock",
                   Defect::kRaggedBlock,
                   DFSEL_FORMAT_ERROR,
                   {kNext, "ne[0] = 33", "q8_0 block size 32"}},
        BrokenCase{"MisalignedOffset",
                   Defect::kMisalignedOffset,
                   DFSEL_FORMAT_ERROR,
                   {kNext, "offset 16", "alignment 32"}},
        BrokenCase{"OffsetPastEof",
                   Defect::kOffsetPastEof,
                   DFSEL_FORMAT_ERROR,
                   {kHidden, "offset 1099511627776", "past the end of the file"}},
        BrokenCase{"DuplicateTensor",
                   Defect::kDuplicateTensor,
                   DFSEL_FORMAT_ERROR,
                   {kPrev, "duplicate name"}},
        BrokenCase{"UnsupportedSelectorType",
                   Defect::kUnsupportedSelectorType,
                   DFSEL_UNSUPPORTED,
                   {kHidden, "ggml type 20 (iq4_nl)", "dfsel reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
                                                      "Q2_K, Q3_K, Q4_K, Q5_K or Q6_K"}},
        BrokenCase{
            "MissingTensor", Defect::kMissingTensor, DFSEL_FORMAT_ERROR, {kHidden, "missing"}},
        BrokenCase{"RankMismatch",
                   Defect::kRankMismatch,
                   DFSEL_FORMAT_ERROR,
                   {kPrev, "{32, 64}", "dflash.selector_rank = 33"}},
        BrokenCase{"VocabMismatch",
                   Defect::kVocabMismatch,
                   DFSEL_FORMAT_ERROR,
                   {kNext, "V = 65", "has 64"}},
        BrokenCase{"HiddenShape",
                   Defect::kHiddenShape,
                   DFSEL_FORMAT_ERROR,
                   {kHidden, "{33, 32}", "{n_embd, R} = {32, 32}"}},
        BrokenCase{"WrongArchitecture",
                   Defect::kWrongArchitecture,
                   DFSEL_FORMAT_ERROR,
                   {"general.architecture is \"llama\"", "expected \"dflash\""}},
        BrokenCase{"MissingArchitecture",
                   Defect::kMissingArchitecture,
                   DFSEL_FORMAT_ERROR,
                   {"general.architecture", "missing"}},
        BrokenCase{"MissingKey",
                   Defect::kMissingKey,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.block_size", "missing"}},
        BrokenCase{"KeyWrongType",
                   Defect::kKeyWrongType,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.selector_top_k", "type string"}},
        BrokenCase{"RankZero", Defect::kRankZero, DFSEL_FORMAT_ERROR, {"dflash.selector_rank = 0"}},
        BrokenCase{
            "BlockSizeOne", Defect::kBlockSizeOne, DFSEL_FORMAT_ERROR, {"dflash.block_size = 1"}},
        BrokenCase{"TopKTooLarge",
                   Defect::kTopKTooLarge,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.selector_top_k = 65", "V = 64"}},
        BrokenCase{"BadLogitScale",
                   Defect::kBadLogitScale,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.logit_scale = -1"}},
        BrokenCase{"SoftcapNotFinite",
                   Defect::kSoftcapNotFinite,
                   DFSEL_FORMAT_ERROR,
                   {"dflash.final_logit_softcapping", "inf"}}),
    [](const ::testing::TestParamInfo<BrokenCase>& p) { return std::string(p.param.name); });

TEST(GgufVersion, OnlyVersions2And3) {
  GgufFiles files;
  for (uint32_t version : {0u, 1u, 4u, 0x03000000u}) {
    DraftOptions o;
    o.version = version;
    const Opened op = open_gguf(files.write(make_draft(o)));
    EXPECT_EQ(op.status, DFSEL_UNSUPPORTED) << op.msg;
    EXPECT_NE(op.msg.find("version " + std::to_string(version)), std::string::npos) << op.msg;
  }
}

// ---- truncation ------------------------------------------------------------------------

// The word a message must carry when the file ends at byte n.
std::string section_at(const GgufLayout& l, size_t n) {
  if (n < l.kv_begin) return "header";
  if (n < l.infos_begin) return "metadata";
  if (n < l.infos_end) return "tensor info";
  return "data";
}

// Every prefix of a file shorter than the end of its last tensor fails with a format error
// that names the section; longer prefixes (only trailing padding missing) load.
void expect_truncations_fail(const DraftOptions& o) {
  const Draft d = make_draft(o);
  const GgufLayout& l = d.layout;
  ASSERT_LT(l.data_end, l.size) << "the fixture should end with padding";
  GgufFiles files;
  int wrong = 0;
  for (size_t n = 0; n <= l.size; ++n) {
    const std::string path = files.write(d, n);
    const Opened op = open_gguf(path);
    if (n >= l.data_end) {
      EXPECT_EQ(op.status, DFSEL_SUCCESS) << "n = " << n << ": " << op.msg;
    } else {
      const std::string word = section_at(l, n);
      if ((op.status != DFSEL_FORMAT_ERROR || op.msg.find(word) == std::string::npos) &&
          wrong++ < 5)
        ADD_FAILURE() << "file cut at byte " << n << " of " << l.size << ": status "
                      << dfsel_status_string(op.status) << ", message '" << op.msg
                      << "' should name the " << word;
    }
    std::remove(path.c_str());
  }
  EXPECT_EQ(wrong, 0);
}

TEST(GgufTruncation, EveryByteOfASmallF16Draft) {
  DraftOptions o;
  o.n_vocab = 5;
  o.rank = 8;
  o.top_k = 2;
  o.hidden_type = DFSEL_TYPE_F16;  // {5, 8}: 80 bytes, so padding follows the last tensor
  o.n_embd = 5;
  o.logit_scale = 2.0f;
  o.every_value_type = true;
  expect_truncations_fail(o);
}

TEST(GgufTruncation, EveryByteOfAV2Q8Draft) {
  DraftOptions o;
  o.version = 2;
  o.n_vocab = 3;
  o.codebook_type = DFSEL_TYPE_Q8_0;
  o.hidden_type = DFSEL_TYPE_F16;
  o.n_embd = 3;  // {3, 32} F16: 192 bytes, so padding follows the last tensor
  o.top_k = 2;
  o.alignment = 128;
  expect_truncations_fail(o);
}

TEST(GgufTruncation, EveryByteOfAKQuantDraftWithOtherTensors) {
  DraftOptions o;
  o.n_vocab = 2;
  o.rank = 256;
  o.n_embd = 1;  // {1, 256} BF16: 512 bytes, so padding follows the last tensor
  o.top_k = 2;
  o.codebook_type = DFSEL_TYPE_Q4_K;
  o.hidden_type = DFSEL_TYPE_BF16;
  o.alignment = 1024;
  o.other_tensors = true;
  expect_truncations_fail(o);
}

// The writer's truncate_to option cuts each section at its first, middle and last byte.
TEST(GgufTruncation, WriterOptionCutsEachSection) {
  DraftOptions o;
  const GgufLayout l = make_draft(o).layout;
  GgufFiles files;
  const std::pair<size_t, size_t> sections[] = {{0, l.kv_begin},
                                                {l.kv_begin, l.infos_begin},
                                                {l.infos_begin, l.infos_end},
                                                {l.infos_end, l.data_end}};
  for (const auto& [begin, end] : sections)
    for (size_t n : {begin, (begin + end) / 2, end - 1}) {
      o.truncate_to = n;
      const Draft d = make_draft(o);
      ASSERT_EQ(d.bytes.size(), n);
      const Opened op = open_gguf(files.write(d));
      EXPECT_EQ(op.status, DFSEL_FORMAT_ERROR) << "n = " << n;
      EXPECT_NE(op.msg.find(section_at(l, n)), std::string::npos) << op.msg;
      EXPECT_NE(op.msg.find("byte"), std::string::npos) << op.msg;
    }
}

// Random byte changes anywhere in a small draft: parsing and loading either succeed or fail
// with a message, and never read outside the bytes (the copy is exactly sized, so the
// sanitizer build catches any stray read).
TEST(GgufFuzz, RandomByteChangesNeverCrash) {
  DraftOptions o;
  o.n_vocab = 4;
  o.codebook_type = DFSEL_TYPE_Q4_K;
  o.rank = 256;
  o.n_embd = 2;
  o.top_k = 2;
  o.every_value_type = true;
  o.other_tensors = true;
  const std::vector<uint8_t> good = make_draft(o).bytes;
  std::mt19937_64 rng(12345);
  int loaded = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::unique_ptr<uint8_t[]> bytes(new uint8_t[good.size()]);
    memcpy(bytes.get(), good.data(), good.size());
    for (int k = 0, n = 1 + int(rng() % 4); k < n; ++k) {
      const size_t at = rng() % good.size();
      switch (rng() % 3) {
        case 0: bytes[at] = uint8_t(rng()); break;
        case 1: bytes[at] = 0xff; break;
        default: bytes[at] = uint8_t(bytes[at] + 1); break;
      }
    }
    gguf::File f;
    const Status s = gguf::File::parse(bytes.get(), good.size(), &f);
    if (!s.ok()) {
      EXPECT_FALSE(s.msg.empty());
      continue;
    }
    gguf::Selector sel;
    const Status l = gguf::Selector::load(f, -1, -1, &sel);
    EXPECT_TRUE(l.ok() || !l.msg.empty());
    loaded += l.ok();
    for (const gguf::KeyValue& kv : f.metadata()) EXPECT_FALSE(f.render(kv).empty());
  }
  EXPECT_GT(loaded, 0) << "some changes (in tensor data) leave a loadable draft";
}

// ---- the C API's arguments and I/O errors ------------------------------------------------

TEST(GgufApi, IoErrors) {
  TempDir dir;
  const Opened missing = open_gguf(dir.file("no_such_file.gguf"));
  EXPECT_EQ(missing.status, DFSEL_IO_ERROR);
  EXPECT_NE(missing.msg.find("no_such_file.gguf: cannot open"), std::string::npos) << missing.msg;
  const Opened directory = open_gguf(dir.file(""));
  EXPECT_EQ(directory.status, DFSEL_IO_ERROR);
  EXPECT_NE(directory.msg.find("not a regular file"), std::string::npos) << directory.msg;
  ASSERT_TRUE(write_file(dir.file("empty.gguf"), {}));
  const Opened empty = open_gguf(dir.file("empty.gguf"));
  EXPECT_EQ(empty.status, DFSEL_FORMAT_ERROR);
  EXPECT_NE(empty.msg.find("header: magic at byte 0 needs 4 bytes"), std::string::npos)
      << empty.msg;
}

TEST(GgufApi, BadArguments) {
  GgufFiles files;
  const std::string path = files.write(make_draft(DraftOptions{}));  // V = 64
  char msg[256];
  dfsel_gguf* g = nullptr;
  EXPECT_EQ(dfsel_gguf_open(nullptr, -1, -1, &g, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("path is NULL"), std::string::npos) << msg;
  EXPECT_EQ(dfsel_gguf_open(path.c_str(), -1, -1, nullptr, msg, sizeof msg),
            DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("out is NULL"), std::string::npos) << msg;
  EXPECT_EQ(dfsel_gguf_open(path.c_str(), -1, -1, &g, nullptr, 0), DFSEL_SUCCESS)
      << "msg may be NULL";
  dfsel_gguf_close(g);
  const std::pair<int64_t, int64_t> bad[] = {{-1, 10}, {5, 5}, {6, 5}, {0, 65}, {-2, -1}, {64, 65}};
  for (const auto& [vb, ve] : bad) {
    const Opened op = open_gguf(path, vb, ve);
    EXPECT_EQ(op.status, DFSEL_INVALID_ARGUMENT) << vb << ", " << ve;
    EXPECT_NE(op.msg.find("[" + std::to_string(vb) + ", " + std::to_string(ve) + ")"),
              std::string::npos)
        << op.msg;
    EXPECT_NE(op.msg.find("[0, 64)"), std::string::npos) << op.msg;
  }
  // a message longer than the buffer is cut and terminated
  char tiny[8];
  EXPECT_EQ(dfsel_gguf_open(path.c_str(), 5, 5, &g, tiny, sizeof tiny), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(strlen(tiny), 7u);

  const Opened op = open_gguf(path);
  ASSERT_EQ(op.status, DFSEL_SUCCESS) << op.msg;
  dfsel_gguf* h = op.g.get();
  dfsel_config cfg;
  dfsel_tensor t;
  int64_t n;
  const char* key;
  dfsel_gguf_kv_type kt;
  dfsel_gguf_tensor_desc td;
  char buf[16];
  EXPECT_EQ(dfsel_gguf_config(nullptr, &cfg), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_config(h, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_gguf_last_error(h)).find("cfg is NULL"), std::string::npos);
  EXPECT_EQ(dfsel_gguf_tensors(h, &t, nullptr, &t), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_gguf_last_error(h)).find("e_next is NULL"), std::string::npos);
  EXPECT_EQ(dfsel_gguf_tensors(nullptr, &t, &t, &t), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_shard(h, nullptr, &n), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_version(h, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_count(nullptr, &n), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_count(h, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_key(h, 6, &key), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_gguf_last_error(h)).find("index 6 is outside [0, 6)"),
            std::string::npos)
      << dfsel_gguf_last_error(h);
  EXPECT_EQ(dfsel_gguf_metadata_key(h, -1, &key), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_key(h, 0, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_type(h, 99, &kt), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_metadata_value_string(h, 0, buf, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_gguf_last_error(h)).find("len is 0"), std::string::npos);
  EXPECT_EQ(dfsel_gguf_metadata_value_string(h, 0, nullptr, 16), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_tensor_count(h, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_tensor_info(h, 3, &td), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_gguf_tensor_info(h, 0, nullptr), DFSEL_INVALID_ARGUMENT);
  // Closing NULL does nothing, as destroying a NULL plan of either kind (dfsel.h, NULL handles).
  EXPECT_EQ(dfsel_gguf_close(nullptr), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_destroy(nullptr), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_dspark_plan_destroy(nullptr), DFSEL_SUCCESS);
  EXPECT_STREQ(dfsel_gguf_last_error(nullptr), "");
}

// ---- realistic size --------------------------------------------------------------------

// A draft the size of a 248k-vocabulary target's selector (n_embd kept small to bound the file):
// opening maps the file and checks it without touching the codebooks' bytes.
TEST(GgufLarge, RealisticVocabularyOpensQuickly) {
  DraftOptions o;
  o.n_vocab = 248320;
  o.rank = 256;
  o.n_embd = 512;
  o.top_k = 16;
  o.codebook_type = DFSEL_TYPE_BF16;
  o.hidden_type = DFSEL_TYPE_BF16;
  o.seed = 99;
  o.row_period = 4099;  // a prime: rows repeat, but never in step with a shard boundary
  GgufFiles files;
  const Draft d = make_draft(o);
  const std::string path = files.write(d);
  const size_t rb = size_t(o.rank) * 2;

  const auto t0 = std::chrono::steady_clock::now();
  const Opened full = open_gguf(path);
  ASSERT_EQ(full.status, DFSEL_SUCCESS) << full.msg;
  dfsel_config cfg;
  ASSERT_EQ(dfsel_gguf_config(full.g.get(), &cfg), DFSEL_SUCCESS);
  dfsel_tensor e_prev, e_next, w_h;
  ASSERT_EQ(dfsel_gguf_tensors(full.g.get(), &e_prev, &e_next, &w_h), DFSEL_SUCCESS);
  const Opened half = open_gguf(path, 124160, 248320);
  ASSERT_EQ(half.status, DFSEL_SUCCESS) << half.msg;
  dfsel_tensor h_prev, h_next, h_w;
  ASSERT_EQ(dfsel_gguf_tensors(half.g.get(), &h_prev, &h_next, &h_w), DFSEL_SUCCESS);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 2.0);

  EXPECT_EQ(cfg.n_vocab, 248320);
  EXPECT_EQ(cfg.codebook_rank, 256);
  EXPECT_EQ(cfg.n_embd, 512);
  EXPECT_EQ(cfg.top_k, 16);
  EXPECT_EQ(e_prev.type, DFSEL_TYPE_BF16);
  EXPECT_EQ(e_prev.ne[0], 256);
  EXPECT_EQ(e_prev.ne[1], 248320);
  EXPECT_EQ(e_prev.nb[1], rb);
  EXPECT_EQ(h_prev.ne[1], 124160);
  EXPECT_EQ(w_h.ne[0], 512);
  EXPECT_EQ(w_h.ne[1], 256);
  for (int64_t v : {int64_t(0), int64_t(1), int64_t(124159), int64_t(124160), int64_t(248319)}) {
    SCOPED_TRACE("row " + std::to_string(v));
    const uint8_t* fp = static_cast<const uint8_t*>(e_prev.data) + size_t(v) * rb;
    const uint8_t* fn = static_cast<const uint8_t*>(e_next.data) + size_t(v) * rb;
    EXPECT_EQ(memcmp(fp, d.bytes.data() + d.e_prev_at + size_t(v) * rb, rb), 0);
    EXPECT_EQ(memcmp(fn, d.bytes.data() + d.e_next_at + size_t(v) * rb, rb), 0);
    EXPECT_EQ(load_elem(fp, DFSEL_TYPE_BF16, 17),
              bf16_to_float(float_to_bf16(draft_element(o, 0, v, 17))));
    if (v >= 124160) {
      const size_t r = size_t(v - 124160) * rb;
      EXPECT_EQ(memcmp(static_cast<const uint8_t*>(h_prev.data) + r, fp, rb), 0);
      EXPECT_EQ(memcmp(static_cast<const uint8_t*>(h_next.data) + r, fn, rb), 0);
    }
  }
  EXPECT_EQ(memcmp(w_h.data, h_w.data, 512 * 256 * 2), 0);
}

}  // namespace
}  // namespace dfsel::test
