// The vendorable top-K (kernels/topk/, docs/topk.md) through its own surface, as another engine
// calls it: C++ element types, strided rows, the ids-only writer ggml_top_k wants and the sorted
// records, the scratch rule, the refusals, a PDL launch. Against the CPU reference (SPEC
// section 3: ids exact, values bitwise), on dfsel's shapes and the draft and sampling shapes
// ggml-cuda meets, with ties, NaN, infinities, signed zeros and subnormals. This file is built
// with --use_fast_math, as ggml-cuda builds the header: flush-to-zero comparisons must not change
// a result. (dfsel's own launcher, kernels/shard_topk.cu, is tested in gpu_shard_topk_test.cu.)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"
#include "kernels/topk/topk_device.cuh"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

namespace tk = dfsel::topk;

enum class Fill { kRandom, kTies, kSpecial, kSubnormal, kAllEqual, kFewFinite };

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::kRandom: return "random";
    case Fill::kTies: return "ties";
    case Fill::kSpecial: return "special";
    case Fill::kSubnormal: return "subnormal";
    case Fill::kAllEqual: return "all_equal";
    case Fill::kFewFinite: return "few_finite";
  }
  return "?";
}

// kTies: ggml's test-backend-ops tie pattern (column / 10, shuffled), small integers many times
// over. kSubnormal: mostly negative values, a few zeros of both signs and subnormals of both
// signs, so that the top-K is decided among values a flush-to-zero build compares as 0.
float fill_value(Fill f, int64_t col, std::mt19937_64& rng, bool half) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  switch (f) {
    case Fill::kRandom: return normal(rng);
    case Fill::kTies: return (float)(col / 10);
    case Fill::kSpecial: {
      switch (rng() % 10) {
        case 0: return NAN;
        case 1: return -INFINITY;
        case 2: return INFINITY;
        case 3: return 0.0f;
        case 4: return -0.0f;
        case 5: return 2.0f;
        default: return normal(rng);
      }
    }
    case Fill::kSubnormal: {
      const uint64_t r = rng() % 64;
      if (r == 0) return rng() & 1 ? 0.0f : -0.0f;
      if (r < 8) {
        // a subnormal of the stored type: f16's are 2^-24 apart, f32's and bf16's 2^-149 apart
        const float unit = half ? std::ldexp(1.0f, -24) : std::ldexp(1.0f, -140);
        const float v = unit * (float)(1 + rng() % 200);
        return rng() & 1 ? v : -v;
      }
      return -1.0f - (float)(rng() % 100);
    }
    case Fill::kAllEqual: return 0.5f;
    case Fill::kFewFinite: return rng() % 2000 == 0 ? normal(rng) : rng() % 2 ? NAN : -INFINITY;
  }
  return 0.0f;
}

template <class T>
constexpr dfsel_type type_of() {
  return std::is_same<T, float>::value ? DFSEL_TYPE_F32 : std::is_same<T, __half>::value ? DFSEL_TYPE_F16 : DFSEL_TYPE_BF16;
}

// Stored bits of v as T (NaN keeps a random payload).
template <class T>
void store(uint8_t* p, float v, uint32_t rnd) {
  if constexpr (sizeof(T) == 4) {
    const uint32_t u = v != v ? 0x7f800001u | (rnd & 0x807fffffu) : float_to_bits(v);
    memcpy(p, &u, 4);
  } else {
    uint16_t h = std::is_same<T, __half>::value ? float_to_f16(v) : float_to_bf16(v);
    if (v != v) h = std::is_same<T, __half>::value ? (uint16_t)(0x7c01u | (rnd & 0x83ffu)) : (uint16_t)(0x7f81u | (rnd & 0x807fu));
    memcpy(p, &h, 2);
  }
}

struct Case {
  int32_t rows = 16;
  int64_t cols = 31040;
  int32_t k = 16;
  Fill fill = Fill::kRandom;
  int64_t base = 0;       // row 0 starts this many elements past a 256-byte boundary
  int64_t pad = 0;        // rows are cols + pad elements apart
  int64_t id_offset = 0;
  int32_t splits = 0;     // forced, or 0
  bool pdl = false;

  std::string str() const {
    return "rows=" + std::to_string(rows) + " cols=" + std::to_string(cols) + " k=" + std::to_string(k) + " fill=" +
           fill_name(fill) + " base=" + std::to_string(base) + " pad=" + std::to_string(pad) +
           " id_offset=" + std::to_string(id_offset) + " splits=" + std::to_string(splits) + " pdl=" + std::to_string(pdl);
  }
};

int device_sms() {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  return n;
}

// Runs the case twice on one scratch through both writers and compares each run with the CPU
// reference: ids exactly (the order is total), records bitwise. The scratch's counters are
// checked to be back at zero after each run (the scratch rule).
template <class T>
void expect_matches(const Case& c, uint64_t seed) {
  SCOPED_TRACE(std::string(dfsel_type_name(type_of<T>())) + " " + c.str() + " seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const size_t es = sizeof(T);
  const size_t stride = (size_t)(c.cols + c.pad) * es;
  std::vector<uint8_t> host((size_t)c.base * es + (size_t)c.rows * stride, 0);
  for (int32_t r = 0; r < c.rows; ++r) {
    std::vector<float> row((size_t)c.cols);
    for (int64_t j = 0; j < c.cols; ++j) row[j] = fill_value(c.fill, j, rng, std::is_same<T, __half>::value);
    if (c.fill == Fill::kTies) std::shuffle(row.begin(), row.end(), rng);
    for (int64_t j = 0; j < c.cols; ++j) store<T>(&host[c.base * es + r * stride + j * es], row[j], (uint32_t)rng());
  }
  dfsel_tensor t{};
  t.data = host.data() + c.base * es;
  t.type = type_of<T>();
  t.ne[0] = c.cols;
  t.ne[1] = c.rows;
  t.nb[0] = es;
  t.nb[1] = stride;
  std::vector<CandRec> want((size_t)c.rows * c.k);
  ref::shard_topk(t, RowMap{1, 1, 0}, c.rows, c.k, c.id_offset, want.data());

  const int sms = device_sms();
  const tk::Problem p{c.rows, c.cols, c.k, c.id_offset};
  tk::Options o;
  o.num_sms = sms;
  o.splits = c.splits;
  o.pdl = c.pdl;
  ASSERT_GT(tk::splits(p, (int)es, o), 0);
  DeviceBuffer<uint8_t> logits(host.size());
  logits.upload(host);
  const size_t scratch_bytes = tk::scratch_bytes(p, (int)es, o);
  DeviceBuffer<uint8_t> scratch(std::max<size_t>(scratch_bytes, 1));
  scratch.zero();
  o.scratch = scratch_bytes ? scratch.get() : nullptr;
  const size_t out_stride = (size_t)c.k + 3;  // rows apart, so a write past k shows
  DeviceBuffer<int32_t> ids((size_t)c.rows * out_stride);
  DeviceBuffer<tk::Rec> recs((size_t)c.rows * out_stride);
  const tk::StridedRows rows{logits.get() + c.base * es, stride};
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    ids.poison();
    recs.poison();
    CUDA_OK((tk::batched_topk<T>(p, rows, tk::IdWriter{ids.get(), out_stride}, o, 0)));
    CUDA_OK((tk::batched_topk<T>(p, rows, tk::RecordWriter{recs.get(), out_stride}, o, 0)));
    CUDA_OK(cudaDeviceSynchronize());
    const std::vector<int32_t> got_ids = ids.download();
    const std::vector<tk::Rec> got_recs = recs.download();
    for (int32_t s = 0; s < c.rows; ++s)
      for (size_t j = 0; j < out_stride; ++j) {
        const size_t at = (size_t)s * out_stride + j;
        if (j >= (size_t)c.k) {
          ASSERT_EQ(got_ids[at], -1) << "row " << s << ": an id written past k at " << j;
          ASSERT_EQ(got_recs[at].id, -1) << "row " << s << ": a record written past k at " << j;
          continue;
        }
        const CandRec& w = want[(size_t)s * c.k + j];
        ASSERT_EQ(got_ids[at], w.id) << "row " << s << " rank " << j;
        ASSERT_EQ(got_recs[at].id, w.id) << "row " << s << " rank " << j;
        ASSERT_EQ(float_to_bits(got_recs[at].z), float_to_bits(w.z)) << "row " << s << " rank " << j;
      }
    if (scratch_bytes) {
      const std::vector<uint8_t> left = scratch.download();
      for (size_t i = 0; i < tk::counter_bytes(o); ++i) ASSERT_EQ(left[i], 0) << "a ticket counter left at byte " << i;
    }
  }
}

struct Named {
  Case c;
  int type;  // 0 float, 1 __half, 2 __nv_bfloat16
  std::string name;
};
void PrintTo(const Named& n, std::ostream* os) { *os << n.name; }
std::string named(const testing::TestParamInfo<Named>& i) { return i.param.name; }
const char* type_label(int t) { return t == 0 ? "f32" : t == 1 ? "f16" : "bf16"; }

void run(const Named& n) {
  const uint64_t seed = fresh_seed() + std::hash<std::string>{}(n.name);
  if (n.type == 0) expect_matches<float>(n.c, seed);
  else if (n.type == 1) expect_matches<__half>(n.c, seed);
  else expect_matches<__nv_bfloat16>(n.c, seed);
}

// ggml_top_k's uses: a draft's logits (V 248320, 16 rows) and a sampler's (V 151936, one row),
// at every k bucket and sampling's k 40, F32 as ggml has it; dfsel's shard widths and row counts
// for every type.
std::vector<Named> shapes() {
  std::vector<Named> list;
  for (int64_t cols : {151936, 248320})
    for (int32_t rows : {1, 16})
      for (int32_t k : {1, 8, 16, 32, 40, 64})
        for (Fill f : {Fill::kRandom, Fill::kTies}) {
          Case c;
          c.rows = rows;
          c.cols = cols;
          c.k = k;
          c.fill = f;
          list.push_back({c, 0, "f32_v" + std::to_string(cols) + "_rows" + std::to_string(rows) + "_k" +
                                    std::to_string(k) + "_" + fill_name(f)});
        }
  for (int type : {0, 1, 2})
    for (int32_t rows : {1, 16, 256})
      for (int64_t cols : {31040, 124160}) {
        if (rows == 256 && cols > 31040) continue;  // the host reference's time, not the kernel's
        Case c;
        c.rows = rows;
        c.cols = cols;
        c.k = 16;
        list.push_back({c, type, std::string(type_label(type)) + "_rows" + std::to_string(rows) + "_cols" +
                                     std::to_string(cols)});
      }
  return list;
}

class GpuTopKHeaderShapes : public testing::TestWithParam<Named> {};
TEST_P(GpuTopKHeaderShapes, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuTopKHeaderShapes, testing::ValuesIn(shapes()), named);

// Every fill at every type, with short rows (k, fewer than a vector, not a whole tile), rows off
// a 16-byte boundary and padded apart, an id offset, forced split counts and a PDL launch.
std::vector<Named> edges() {
  std::vector<Named> list;
  for (int type : {0, 1, 2})
    for (Fill f : {Fill::kRandom, Fill::kTies, Fill::kSpecial, Fill::kSubnormal, Fill::kAllEqual, Fill::kFewFinite})
      for (int32_t k : {1, 17, 64})
        for (int64_t cols : {(int64_t)k, (int64_t)k + 3, (int64_t)1000, (int64_t)65536}) {
          Case c;
          c.rows = cols > 10000 ? 3 : 9;
          c.cols = cols;
          c.k = k;
          c.fill = f;
          c.base = (k + (int)f) % 4;
          c.pad = (int)f % 3;
          c.id_offset = f == Fill::kSpecial ? 1000003 : 0;
          c.splits = cols == 65536 && k < 64 ? 5 : 0;
          c.pdl = f == Fill::kTies;
          list.push_back({c, type, std::string(type_label(type)) + "_" + fill_name(f) + "_k" + std::to_string(k) +
                                       "_cols" + std::to_string(cols)});
        }
  return list;
}

class GpuTopKHeaderEdges : public testing::TestWithParam<Named> {};
TEST_P(GpuTopKHeaderEdges, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuTopKHeaderEdges, testing::ValuesIn(edges()), named);

// What the header refuses it refuses before launching: cudaErrorInvalidValue, the output as it
// was. k outside 1..64 or above the row, ids past int32, a split launch without scratch, a
// forced split count the last CTA cannot hold.
TEST(GpuTopKHeader, RefusesWhatItCannotRun) {
  DFSEL_REQUIRE_GPUS(1);
  DeviceBuffer<float> logits(4096);
  logits.zero();
  DeviceBuffer<int32_t> ids(4096);
  ids.poison();
  const tk::StridedRows rows{logits.get(), 1024 * sizeof(float)};
  const tk::IdWriter w{ids.get(), 64};
  tk::Options o;
  o.num_sms = device_sms();
  struct Bad {
    tk::Problem p;
    int32_t splits;
    const char* why;
  };
  const Bad bad[] = {
      {{2, 1024, 0, 0}, 0, "k 0"},
      {{2, 1024, 65, 0}, 0, "k 65"},
      {{2, 10, 11, 0}, 0, "k above the row"},
      {{2, 1024, 8, INT32_MAX - 1000}, 0, "ids past int32"},
      {{-1, 1024, 8, 0}, 0, "negative rows"},
      {{2, 1024, 8, 0}, 257, "257 splits of 8 (2056 records)"},
      {{2, 1024, 8, 0}, 4, "4 splits without scratch"},
  };
  for (const Bad& b : bad) {
    o.splits = b.splits;
    EXPECT_EQ(tk::batched_topk<float>(b.p, rows, w, o, 0), cudaErrorInvalidValue) << b.why;
  }
  o.splits = 0;
  EXPECT_EQ(tk::batched_topk<float>(tk::Problem{0, 1024, 8, 0}, rows, w, o, 0), cudaSuccess) << "no rows";
  CUDA_OK(cudaDeviceSynchronize());
  for (int32_t id : ids.download()) ASSERT_EQ(id, -1) << "a refused launch wrote";
}

// The header's host queries agree with each other: a launch's scratch covers its split rows, and
// none is asked where no row is split.
TEST(GpuTopKHeader, ScratchCoversTheSplitRows) {
  for (int sms : {1, 78, 132})
    for (int32_t rows : {1, 7, 16, 256, 1024})
      for (int32_t k : {1, 16, 40, 64}) {
        const tk::Problem p{rows, 248320, k, 0};
        tk::Options o;
        o.num_sms = sms;
        const int s = tk::splits(p, 4, o);
        ASSERT_GE(s, 1);
        EXPECT_LE((int64_t)s * k, 1024) << "the last CTA's records";
        const size_t bytes = tk::scratch_bytes(p, 4, o);
        if (s == 1) EXPECT_EQ(bytes, 0u);
        else EXPECT_GE(bytes, tk::counter_bytes(o) + (size_t)rows * s * k * sizeof(tk::Rec));
      }
}

}  // namespace
}  // namespace dfsel::test
