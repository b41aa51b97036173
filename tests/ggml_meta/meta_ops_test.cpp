// ggml's meta backend with a tensor split along the vocabulary (integrations/ggml/0004 to 0006):
// binary ops, views, TOP_K, ARGMAX and GET_ROWS over it against the same op on one device, judged as
// test-backend-ops judges TOP_K: no id twice, every id in range, and the values at the ids as
// multisets (the same ids where the k-th value is not tied); gathered rows and elementwise results
// bit for bit; every device's copy of a mirrored result the same bytes. The meta device spans two
// of ggml's CPU devices (in a CUDA build also two ggml-cuda devices, GGML_CUDA_DEVICES=2 on one
// GPU), the split uneven (40/60, 1/99, 0/100, 97/3), the values distinct, tied, or with -inf, +inf
// and NaN (a row with NaN: only its ids are judged, ggml leaves the order of NaN to the backend).
// Shapes the rules do not cover (a split in two segments, ARGSORT) still abort.
#include <gtest/gtest.h>

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr int64_t kV = 100, kR = 7, kE = 6;  // the split axis, rows, the width of a table's rows

// Where the tensor named "x" lies: along `axis`, ne[s * 2 + j] of segment s on device j.
struct Split {
  int axis;
  int n_segments;
  int64_t ne[4];
};

ggml_backend_meta_split_state split_x(const ggml_tensor* t, void* userdata) {
  const Split& sp = *static_cast<const Split*>(userdata);
  ggml_backend_meta_split_state s{};
  s.axis = GGML_BACKEND_SPLIT_AXIS_MIRRORED;
  s.n_segments = 1;
  s.nr[0] = 1;
  if (std::strcmp(t->name, "x") == 0) {
    s.axis = ggml_backend_meta_split_axis(sp.axis);
    s.n_segments = (uint32_t)sp.n_segments;
    for (int i = 0; i < 2 * sp.n_segments; ++i) s.ne[i] = sp.ne[i];
    for (int i = 0; i < sp.n_segments; ++i) s.nr[i] = 1;
  }
  return s;
}

enum class Values { kDistinct, kTies, kSpecial };

// The op's inputs: x (split), m (mirrored, x's shape), mb (mirrored, {x->ne[0], 1}), ids (I32,
// mirrored).
struct Inputs {
  ggml_tensor *x, *m, *mb, *ids;
};

struct Case {
  std::string name;
  Split split;
  int64_t x_ne0, x_ne1;  // x's shape
  int64_t ids_ne0, ids_ne1;
  Values values;
  std::function<ggml_tensor*(ggml_context*, const Inputs&)> op;
  enum { kSelect, kBitwise } judge;
  int64_t k;               // ids a row for kSelect
  int64_t row_stride = 1;  // for kSelect: the result's row r is x's row r * row_stride
};

void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

struct Data {
  std::vector<float> x, m, mb;
  std::vector<int32_t> ids;
  std::vector<bool> nan_row;
};

Data draw(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  const int64_t n = c.x_ne0, rows = c.x_ne1;
  d.x.resize((size_t)(n * rows));
  d.nan_row.assign((size_t)rows, false);
  for (int64_t r = 0; r < rows; ++r) {
    float* row = d.x.data() + r * n;
    std::vector<int> perm((size_t)n);
    for (int64_t i = 0; i < n; ++i) perm[(size_t)i] = (int)i;
    std::shuffle(perm.begin(), perm.end(), rng);
    for (int64_t i = 0; i < n; ++i) {
      row[i] = c.values == Values::kTies ? (float)(rng() % 4) : (float)perm[(size_t)i] * 0.25f - 3.0f;
    }
    if (c.values != Values::kSpecial) continue;
    switch (r % 5) {
      case 0:  // nothing above -inf
        for (int64_t i = 0; i < n; ++i) row[i] = -INFINITY;
        break;
      case 1:  // a few values above -inf, at both ends and around the split
        for (int64_t i = 0; i < n; ++i)
          if (i != 0 && i != n - 1 && i != 40 && i != 41) row[i] = -INFINITY;
        break;
      case 2:  // +inf twice
        row[n / 3] = INFINITY;
        row[n - 2] = INFINITY;
        break;
      case 3:  // NaN
        row[0] = NAN;
        row[n / 2] = NAN;
        d.nan_row[(size_t)r] = true;
        break;
      default:
        break;
    }
  }
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  for (size_t i = 0; i < d.x.size(); ++i) d.m.push_back(u(rng));
  for (int64_t i = 0; i < n; ++i) d.mb.push_back(u(rng));
  // ids of the rows along x's split axis: both ends, around each split point, and random ones
  const int64_t n_rows = c.split.axis == 0 ? c.x_ne0 : c.x_ne1;
  for (int64_t i = 0; i < c.ids_ne0 * c.ids_ne1; ++i) {
    const int64_t fixed[] = {0, n_rows - 1, c.split.ne[0], c.split.ne[0] - 1, 1};
    const int64_t id = i < 5 ? fixed[i] : (int64_t)(rng() % (uint64_t)n_rows);
    d.ids.push_back((int32_t)std::clamp<int64_t>(id, 0, n_rows - 1));
  }
  return d;
}

using ContextPtr = std::unique_ptr<ggml_context, void (*)(ggml_context*)>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)>;
using BackendPtr = std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)>;
using GallocPtr = std::unique_ptr<ggml_gallocr, void (*)(ggml_gallocr_t)>;

ContextPtr no_alloc_context(size_t n_tensors) {
  ggml_init_params p{n_tensors * ggml_tensor_overhead() + ggml_graph_overhead(), nullptr, true};
  return ContextPtr(ggml_init(p), ggml_free);
}

// The op of c on dev (a meta device or a simple one), its result's bytes, and with meta each
// device's copy of it.
struct Result {
  std::vector<uint8_t> bytes;
  std::vector<std::vector<uint8_t>> copies;
  ggml_type type = GGML_TYPE_COUNT;
  int64_t ne[4] = {0, 0, 0, 0};
};

Result compute(const Case& c, const Data& data, ggml_backend_dev_t dev, bool meta) {
  Result res;
  BackendPtr backend(ggml_backend_dev_init(dev, nullptr), ggml_backend_free);
  EXPECT_NE(nullptr, backend);
  if (!backend) return res;
  ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(dev);
  ContextPtr wctx = no_alloc_context(8);
  Inputs in{};
  in.x = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, c.x_ne0, c.x_ne1);
  ggml_set_name(in.x, "x");
  in.m = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, c.x_ne0, c.x_ne1);
  ggml_set_name(in.m, "m");
  in.mb = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, c.x_ne0, 1);
  ggml_set_name(in.mb, "mb");
  in.ids = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_I32, c.ids_ne0, c.ids_ne1);
  ggml_set_name(in.ids, "ids");
  BufferPtr wbuf(ggml_backend_alloc_ctx_tensors_from_buft(wctx.get(), buft), ggml_backend_buffer_free);
  EXPECT_NE(nullptr, wbuf);
  if (!wbuf) return res;
  ggml_backend_tensor_set(in.x, data.x.data(), 0, ggml_nbytes(in.x));
  ggml_backend_tensor_set(in.m, data.m.data(), 0, ggml_nbytes(in.m));
  ggml_backend_tensor_set(in.mb, data.mb.data(), 0, ggml_nbytes(in.mb));
  ggml_backend_tensor_set(in.ids, data.ids.data(), 0, ggml_nbytes(in.ids));

  ContextPtr gctx = no_alloc_context(64);
  ggml_tensor* out = c.op(gctx.get(), in);
  ggml_set_output(out);
  ggml_cgraph* graph = ggml_new_graph(gctx.get());
  ggml_build_forward_expand(graph, out);
  GallocPtr galloc(ggml_gallocr_new(buft), ggml_gallocr_free);
  EXPECT_TRUE(ggml_gallocr_alloc_graph(galloc.get(), graph));
  EXPECT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(backend.get(), graph));
  res.type = out->type;
  std::copy(out->ne, out->ne + 4, res.ne);
  res.bytes.resize(ggml_nbytes(out));
  ggml_backend_tensor_get(out, res.bytes.data(), 0, res.bytes.size());
  if (meta) {
    for (size_t j = 0; j < 2; ++j) {
      const ggml_tensor* t = ggml_backend_meta_simple_tensor(out, j);
      if (!t || ggml_nbytes(t) != res.bytes.size()) continue;  // split: the gathered bytes are checked
      res.copies.emplace_back(ggml_nbytes(t));
      ggml_backend_tensor_get(t, res.copies.back().data(), 0, ggml_nbytes(t));
    }
  }
  return res;
}

// test-backend-ops's judgement of TOP_K, k ids a row of x (ARGMAX: k = 1).
std::string judge_select(const Case& c, const Data& d, const Result& got, const Result& want) {
  const int64_t n = c.x_ne0, k = c.k;
  const auto* a = reinterpret_cast<const int32_t*>(got.bytes.data());
  const auto* b = reinterpret_cast<const int32_t*>(want.bytes.data());
  for (int64_t r = 0; r < (int64_t)got.bytes.size() / 4 / k; ++r) {
    std::vector<int32_t> ia(a + r * k, a + (r + 1) * k), ib(b + r * k, b + (r + 1) * k);
    const int64_t xr = r * c.row_stride;
    const std::string at = "row " + std::to_string(xr) + ": ";
    for (int32_t id : ia)
      if (id < 0 || id >= n) return at + "id " + std::to_string(id) + " out of range";
    std::sort(ia.begin(), ia.end());
    if (std::adjacent_find(ia.begin(), ia.end()) != ia.end()) return at + "an id twice";
    // A row with NaN, or one where the op found no maximum (ggml-cuda's argmax gives -1 for a row
    // of -inf): the ids alone are judged.
    if (d.nan_row[(size_t)xr] || std::any_of(ib.begin(), ib.end(), [n](int32_t id) { return id < 0 || id >= n; })) continue;
    std::vector<float> va, vb;
    for (int32_t id : ia) va.push_back(d.x[(size_t)(xr * n + id)]);
    for (int32_t id : ib) vb.push_back(d.x[(size_t)(xr * n + id)]);
    std::sort(va.begin(), va.end());
    std::sort(vb.begin(), vb.end());
    if (std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) != 0) return at + "other values than the unsplit op's";
  }
  return "";
}

void run_case(const Case& c, ggml_backend_dev_t d0, ggml_backend_dev_t d1) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data data = draw(c, seed);
  static Split split;  // the meta device keeps a pointer to it
  split = c.split;
  ggml_backend_dev_t devs[2] = {d0, d1};
  ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 2, split_x, &split);
  const Result got = compute(c, data, meta, true);
  const Result want = compute(c, data, d0, false);
  ASSERT_EQ(want.type, got.type);
  ASSERT_TRUE(std::equal(want.ne, want.ne + 4, got.ne));
  ASSERT_EQ(want.bytes.size(), got.bytes.size());
  for (size_t j = 0; j < got.copies.size(); ++j)
    EXPECT_TRUE(got.copies[j] == got.bytes) << "device " << j << "'s copy differs from device 0's";
  if (c.judge == Case::kBitwise) {
    EXPECT_TRUE(got.bytes == want.bytes) << "not the unsplit op's bytes";
  } else {
    EXPECT_EQ("", judge_select(c, data, got, want));
  }
}

std::vector<Case> cases() {
  const Split splits[] = {{0, 1, {40, 60}}, {0, 1, {1, 99}}, {0, 1, {0, 100}}, {0, 1, {97, 3}}};
  auto split_name = [](const Split& s) { return std::to_string(s.ne[0]) + "_" + std::to_string(s.ne[1]); };
  std::vector<Case> out;
  for (const Split& s : splits) {
    const std::string sn = split_name(s);
    // Binary ops of x and a mirrored tensor (0004).
    using Bin = ggml_tensor* (*)(ggml_context*, ggml_tensor*, ggml_tensor*);
    const std::pair<const char*, Bin> bins[] = {{"Add", ggml_add}, {"Sub", ggml_sub}, {"Mul", ggml_mul}, {"Div", ggml_div}};
    for (const auto& [name, bin] : bins) {
      out.push_back({std::string(name) + "_" + sn, s, kV, kR, 1, 1, Values::kSpecial,
                     [bin](ggml_context* ctx, const Inputs& in) { return bin(ctx, in.x, in.m); }, Case::kBitwise, 0});
    }
    out.push_back({"AddMirroredFirst_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) { return ggml_add(ctx, in.m, in.x); }, Case::kBitwise, 0});
    // The mirrored operand computed in the graph: an allocator puts the sum in its place.
    out.push_back({"AddInPlace_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) { return ggml_add(ctx, in.x, ggml_scale(ctx, in.m, 0.5f)); },
                   Case::kBitwise, 0});
    out.push_back({"AddInPlaceMirroredFirst_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) { return ggml_add(ctx, ggml_scale(ctx, in.m, 0.5f), in.x); },
                   Case::kBitwise, 0});
    out.push_back({"AddBroadcastRows_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) { return ggml_add(ctx, in.x, in.mb); }, Case::kBitwise, 0});
    // Every other row of x, kept split (as position i of every block of the logits) (0005).
    out.push_back({"ViewRowsAdd_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) {
                     ggml_tensor* rows = ggml_view_2d(ctx, in.x, kV, 3, 2 * in.x->nb[1], in.x->nb[1]);
                     return ggml_add(ctx, rows, ggml_view_2d(ctx, in.m, kV, 3, in.m->nb[1], 0));
                   },
                   Case::kBitwise, 0});
    out.push_back({"ViewRowsCont_" + sn, s, kV, kR, 1, 1, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) {
                     return ggml_cont(ctx, ggml_view_2d(ctx, in.x, kV, 3, 2 * in.x->nb[1], in.x->nb[1]));
                   },
                   Case::kBitwise, 0});
    // TOP_K, ARGMAX and GET_ROWS (0006).
    const Values values[] = {Values::kDistinct, Values::kTies, Values::kSpecial};
    const char* value_names[] = {"distinct", "ties", "special"};
    for (int v = 0; v < 3; ++v) {
      const std::string vn = sn + "_" + value_names[v];
      for (int64_t k : {1, 5, 16, 100}) {
        out.push_back({"TopK_k" + std::to_string(k) + "_" + vn, s, kV, kR, 1, 1, values[v],
                       [k](ggml_context* ctx, const Inputs& in) { return ggml_top_k(ctx, in.x, (int)k); },
                       Case::kSelect, k});
      }
      out.push_back({"TopKEveryOtherRow_" + vn, s, kV, kR, 1, 1, values[v],
                     [](ggml_context* ctx, const Inputs& in) {
                       return ggml_top_k(ctx, ggml_view_2d(ctx, in.x, kV, 3, 2 * in.x->nb[1], 0), 16);
                     },
                     Case::kSelect, 16, 2});
      out.push_back({"Argmax_" + vn, s, kV, kR, 1, 1, values[v],
                     [](ggml_context* ctx, const Inputs& in) { return ggml_argmax(ctx, in.x); }, Case::kSelect, 1});
    }
    // The selector's unary gather: the candidates' logits, from {1, V, rows}.
    out.push_back({"GetRowsUnary_" + sn, s, kV, kR, 16, kR, Values::kDistinct,
                   [](ggml_context* ctx, const Inputs& in) {
                     return ggml_get_rows(ctx, ggml_reshape_3d(ctx, in.x, 1, kV, kR), in.ids);
                   },
                   Case::kBitwise, 0});
    // Rows of a table split along its rows, as an embedding split across devices.
    out.push_back({"GetRowsTable_" + sn, Split{1, 1, {s.ne[0], s.ne[1]}}, kE, kV, 9, 1, Values::kSpecial,
                   [](ggml_context* ctx, const Inputs& in) { return ggml_get_rows(ctx, in.x, in.ids); },
                   Case::kBitwise, 0});
  }
  // Split along the rows: the binary ops' rule takes any axis.
  out.push_back({"Mul_rows_3_4", Split{1, 1, {3, 4}}, kV, kR, 1, 1, Values::kDistinct,
                 [](ggml_context* ctx, const Inputs& in) { return ggml_mul(ctx, in.x, in.m); }, Case::kBitwise, 0});
  return out;
}

class GgmlMetaSplitOps : public ::testing::TestWithParam<Case> {};

TEST_P(GgmlMetaSplitOps, TwoCpuDevicesGiveTheUnsplitOp) {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  ASSERT_NE(nullptr, cpu);
  run_case(GetParam(), cpu, cpu);
}

INSTANTIATE_TEST_SUITE_P(Cases, GgmlMetaSplitOps, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return i.param.name; });

#if defined(DFSEL_META_TEST_CUDA)
TEST(GgmlMetaSplitOpsCuda, TwoCudaDevicesGiveTheUnsplitOp) {
  std::vector<ggml_backend_dev_t> gpus;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
    if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) gpus.push_back(ggml_backend_dev_get(i));
  if (gpus.size() < 2) GTEST_SKIP() << "needs two ggml GPU devices (GGML_CUDA_DEVICES=2 on one GPU)";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    run_case(c, gpus[0], gpus[1]);
  }
}
#endif

// Shapes the rules do not cover abort when the graph is allocated, never give a wrong result.
void print_abort(const char* message) { std::fprintf(stderr, "%s\n", message); }

void refused(const Split& s, const std::function<ggml_tensor*(ggml_context*, const Inputs&)>& op) {
  ggml_set_abort_callback(print_abort);
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  Case c{"refused", s, kV, kR, 4, 1, Values::kDistinct, op, Case::kBitwise, 0};
  run_case(c, cpu, cpu);
}

TEST(GgmlMetaSplitOpsDeathTest, ShapesTheRulesDoNotCoverAbort) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const Split segments{0, 2, {20, 30, 20, 30}};  // two segments, each split 20/30
  EXPECT_DEATH(refused(segments, [](ggml_context* ctx, const Inputs& in) { return ggml_top_k(ctx, in.x, 4); }),
               "GGML_ASSERT\\(src_ss\\[0\\].n_segments == 1 && src_ss\\[0\\].nr\\[0\\] == 1\\) failed");
  EXPECT_DEATH(refused(segments, [](ggml_context* ctx, const Inputs& in) { return ggml_add(ctx, in.x, in.m); }),
               "GGML_ASSERT\\(ret.axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN\\) failed");
  const Split halves{0, 1, {40, 60}};
  EXPECT_DEATH(refused(halves, [](ggml_context* ctx, const Inputs& in) { return ggml_argsort(ctx, in.x, GGML_SORT_ORDER_DESC); }),
               "GGML_ASSERT\\(src_ss\\[0\\].axis != GGML_BACKEND_SPLIT_AXIS_0\\) failed");
  const Split row_segments{1, 2, {2, 1, 2, 2}};  // a table's 7 rows in two segments
  EXPECT_DEATH(refused(row_segments, [](ggml_context* ctx, const Inputs& in) { return ggml_get_rows(ctx, in.x, in.ids); }),
               "GGML_ASSERT\\(src_ss\\[0\\].n_segments == 1 && src_ss\\[0\\].nr\\[0\\] == 1\\) failed");
}

}  // namespace
}  // namespace dfsel::test
