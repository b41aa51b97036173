// shard_topk against the CPU reference (SPEC sections 3 and 4.2): candidate ids and raw logits
// bitwise equal, for every element type, K, row count and split count, on special values,
// unaligned and strided rows, selected rows that skip each block's anchor row, an uneven
// three-shard vocabulary, repeated launches on one scratch, and CUDA graph replays.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"
#include "kernels/shard_topk.cuh"
#include "support/case_lists.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

enum class Fill { kRandom, kTies, kAllEqual, kAscending, kSpecial, kFewFinite, kZerosAndNaN, kPeriodic, kStarved };

const char* fill_name(Fill f) {
  switch (f) {
    case Fill::kRandom: return "random";
    case Fill::kTies: return "ties";
    case Fill::kAllEqual: return "all-equal";
    case Fill::kAscending: return "ascending";
    case Fill::kSpecial: return "special";
    case Fill::kFewFinite: return "few-finite";
    case Fill::kZerosAndNaN: return "zeros-and-nan";
    case Fill::kPeriodic: return "periodic";
    case Fill::kStarved: return "starved-group";
  }
  return "?";
}

struct TopKCase {
  dfsel_type type = DFSEL_TYPE_F32;
  int32_t n_rows = 16;
  int64_t n_cols = 31040;
  int32_t k = 16;
  Fill fill = Fill::kRandom;
  int64_t base_elems = 0;  // row 0 starts this many elements past a 256-byte boundary
  int64_t pad_elems = 0;   // row_stride = (n_cols + pad_elems) elements
  int64_t id_offset = 0;
  bool skip_anchor_rows = false;  // RowMap {15, 16, 1}: the selector's drafted rows
  size_t out_pad = 0;             // out_stride = k + out_pad
  int num_sms = 0;                // 0: the device's count
  int32_t splits = 0;             // 0: the heuristic's; > 0 forced (ShardTopKArgs::splits)

  std::string str() const {
    std::ostringstream s;
    s << dfsel_type_name(type) << " rows=" << n_rows << " cols=" << n_cols << " k=" << k << " fill=" << fill_name(fill)
      << " base=" << base_elems << " pad=" << pad_elems << " id_offset=" << id_offset
      << " skip_anchor=" << skip_anchor_rows << " out_pad=" << out_pad << " num_sms=" << num_sms
      << " splits=" << splits;
    return s.str();
  }
};

int device_sms() {
  int n = 0;
  cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, 0);
  return n;
}

size_t elem_bytes(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

RowMap row_map(const TopKCase& c) {
  return c.skip_anchor_rows ? RowMap{15, 16, 1} : RowMap{1, 1, 0};
}

// Stores v as the case's type; NaN keeps a payload of the generator's choice (raw bits).
void store(uint8_t* p, dfsel_type t, float v, uint32_t nan_bits) {
  if (t == DFSEL_TYPE_F32) {
    const uint32_t u = v != v ? nan_bits : float_to_bits(v);
    memcpy(p, &u, 4);
    return;
  }
  uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
  if (v != v) h = t == DFSEL_TYPE_F16 ? (uint16_t)(0x7c01u | (nan_bits & 0x83ffu)) : (uint16_t)(0x7f81u | (nan_bits & 0x807fu));
  memcpy(p, &h, 2);
}

// kZerosAndNaN: a top-K of signed zeros, then -inf, then NaN payloads (bits a 64-bit candidate
// key does not keep). kPeriodic: every chunk of a split row holds the same values, so the
// partial lists of a split row are alike. kStarved: the columns that one thread group of a tile
// holds (group = thread % G, G the least power of two >= k, thread = vector index % 256 from
// the chunk start) hold the smallest values: an input against bounds taken from group maxima.
float fill_value(Fill f, int64_t col, const TopKCase& c, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 4.0f);
  switch (f) {
    case Fill::kRandom: return normal(rng);
    case Fill::kTies: return (float)(rng() % 6) - 2.0f;
    case Fill::kAllEqual: return 1.25f;
    case Fill::kAscending: return -1000.0f + 2000.0f * (float)col / (float)c.n_cols;
    case Fill::kSpecial: {
      switch (rng() % 12) {
        case 0: return NAN;
        case 1: return -INFINITY;
        case 2: return INFINITY;
        case 3: return 0.0f;
        case 4: return -0.0f;
        case 5: return 3.0f;  // a common duplicate
        default: return normal(rng);
      }
    }
    case Fill::kFewFinite: {
      const uint64_t r = rng() % 4096;
      return r == 0 ? normal(rng) : r < 1500 ? NAN : -INFINITY;
    }
    case Fill::kZerosAndNaN: {
      const uint64_t r = rng() % 40000;
      return r < 3 ? (rng() & 1 ? 0.0f : -0.0f) : r < 6 ? -INFINITY : NAN;
    }
    case Fill::kPeriodic: return -(float)(col % 997);
    case Fill::kStarved: {
      const int64_t vec = 16 / (int64_t)(c.type == DFSEL_TYPE_F32 ? 4 : 2);
      int64_t groups = 1;
      while (groups < c.k) groups <<= 1;
      return (col / vec) % groups == 0 ? -1000.0f - (float)(col % 7) : normal(rng);
    }
  }
  return 0.0f;
}

struct HostLogits {
  std::vector<uint8_t> bytes;  // from a 256-byte boundary, including the base offset
  size_t base;                 // byte offset of row 0
  size_t row_stride;
  int64_t rows;                // physical rows
};

HostLogits make_logits(const TopKCase& c, std::mt19937_64& rng) {
  HostLogits h;
  const size_t es = elem_bytes(c.type);
  h.rows = map_row(row_map(c), c.n_rows - 1) + 1;
  h.row_stride = (size_t)(c.n_cols + c.pad_elems) * es;
  h.base = (size_t)c.base_elems * es;
  h.bytes.assign(h.base + (size_t)h.rows * h.row_stride, 0);
  for (int64_t r = 0; r < h.rows; ++r)
    for (int64_t col = 0; col < c.n_cols; ++col) {
      const uint32_t nan_bits = (rng() & 1 ? 0x7fc00000u : 0xffc00000u) | (uint32_t)(rng() & 0x3fffff);
      store(&h.bytes[h.base + r * h.row_stride + col * es], c.type, fill_value(c.fill, col, c, rng), nan_bits);
    }
  return h;
}

std::vector<CandRec> reference(const TopKCase& c, const HostLogits& h) {
  dfsel_tensor t{};
  t.data = h.bytes.data() + h.base;
  t.type = c.type;
  t.ne[0] = c.n_cols;
  t.ne[1] = h.rows;
  t.nb[0] = elem_bytes(c.type);
  t.nb[1] = h.row_stride;
  std::vector<CandRec> want((size_t)c.n_rows * c.k);
  ref::shard_topk(t, row_map(c), c.n_rows, c.k, c.id_offset, want.data());
  return want;
}

// Device state of one case: logits, poisoned output, scratch zeroed once.
struct DeviceCase {
  DeviceBuffer<uint8_t> logits;
  DeviceBuffer<CandRec> out;
  DeviceBuffer<uint8_t> scratch;
  cuda::ShardTopKArgs args{};
};

void setup(const TopKCase& c, const HostLogits& h, DeviceCase* d) {
  const int sms = c.num_sms ? c.num_sms : device_sms();
  d->logits.resize(h.bytes.size());
  d->logits.upload(h.bytes);
  const size_t out_stride = (size_t)c.k + c.out_pad;
  d->out.resize((size_t)c.n_rows * out_stride);
  d->scratch.resize(std::max<size_t>(c.splits > 0 ? cuda::shard_topk_scratch_bytes_split(c.n_rows, c.k, c.splits, sms)
                                                  : cuda::shard_topk_scratch_bytes(c.n_rows, c.k, c.n_cols, sms),
                                     1));
  d->scratch.zero();
  cuda::ShardTopKArgs& a = d->args;
  a.logits = d->logits.get() + h.base;
  a.type = c.type;
  a.n_cols = c.n_cols;
  a.row_stride = h.row_stride;
  const RowMap m = row_map(c);
  a.map = RowMap{m.group_rows, m.group_stride, m.group_offset};
  a.n_rows = c.n_rows;
  a.k = c.k;
  a.id_offset = c.id_offset;
  a.out = d->out.get();
  a.out_stride = out_stride;
  a.scratch = d->scratch.get();
  a.splits = c.splits;
}

// Bitwise comparison of k records per row; records between rows (out_pad) stay poisoned.
std::string compare(const TopKCase& c, const std::vector<CandRec>& want, const std::vector<CandRec>& got) {
  const size_t stride = (size_t)c.k + c.out_pad;
  for (int32_t s = 0; s < c.n_rows; ++s) {
    for (size_t j = 0; j < stride; ++j) {
      const CandRec& g = got[s * stride + j];
      if (j >= (size_t)c.k) {
        if (g.id != -1) return "row " + std::to_string(s) + ": wrote past k at " + std::to_string(j);
        continue;
      }
      const CandRec& w = want[(size_t)s * c.k + j];
      if (memcmp(&w, &g, sizeof(CandRec)) != 0) {
        char buf[160];
        snprintf(buf, sizeof buf, "row %d rank %zu: want id %d z 0x%08x, got id %d z 0x%08x", s, j, w.id,
                 float_to_bits(w.z), g.id, float_to_bits(g.z));
        return buf;
      }
    }
  }
  return "";
}

// Runs c twice on one scratch (the second run checks that the ticket counters were left at zero).
void expect_matches_reference(const TopKCase& c, uint64_t seed) {
  SCOPED_TRACE(c.str() + " seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const HostLogits h = make_logits(c, rng);
  const std::vector<CandRec> want = reference(c, h);
  DeviceCase d;
  setup(c, h, &d);
  const int sms = c.num_sms ? c.num_sms : device_sms();
  for (int run = 0; run < 2; ++run) {
    SCOPED_TRACE("run " + std::to_string(run));
    d.out.poison();
    CUDA_OK(cuda::shard_topk(d.args, sms, 0));
    CUDA_OK(cudaDeviceSynchronize());
    const std::string why = compare(c, want, d.out.download());
    ASSERT_EQ(why, "");
  }
}

// One case of a fixed list run as a parametrised test: the case, what its seed is offset by
// (so that DFSEL_TEST_SEED and the case's name replay it), and its name in GoogleTest's
// alphabet (letters, digits, '_').
struct NamedCase {
  TopKCase c;
  uint64_t salt = 0;
  std::string name;
};

std::string case_name(const testing::TestParamInfo<NamedCase>& info) { return info.param.name; }

// What GoogleTest prints for a parameter (the default would dump the struct's bytes).
void PrintTo(const NamedCase& n, std::ostream* os) { *os << n.name << " (" << n.c.str() << ")"; }

std::string fill_id(Fill f) {
  std::string n = fill_name(f);
  std::replace(n.begin(), n.end(), '-', '_');
  return n;
}

// The body of every parametrised case: a fresh seed (traced), offset as the case says.
void run_named_case(const NamedCase& n) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  expect_matches_reference(n.c, seed + n.salt);
}

// The measured shapes of the benchmark (tests/support/case_lists.h) up to the size the host
// reference checks quickly, then the edges: one row of 1000 columns, rows that are not a power
// of two, many short rows.
TEST(GpuShardTopK, RowsAndColumns) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  struct Shape { int32_t rows; int64_t cols; };
  std::vector<Shape> shapes;
  for (int32_t rows : cases::kShardTopKTokens)
    for (int64_t cols : cases::kShardTopKVocabs)
      if ((int64_t)rows * cols <= cases::kShardTopKMaxCheckedElements) shapes.push_back({rows, cols});
  for (const Shape& edge : {Shape{1, 1000}, Shape{7, 124160}, Shape{64, 31040}, Shape{1024, 1000}}) shapes.push_back(edge);
  for (const Shape& s : shapes) {
    TopKCase c;
    c.n_rows = s.rows;
    c.n_cols = s.cols;
    expect_matches_reference(c, seed + s.rows * 7 + s.cols);
  }
}

// Every element type and K bucket, at a row of K columns, a short row and a long one.
std::vector<NamedCase> every_k_and_type() {
  std::vector<NamedCase> list;
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (int32_t k : {1, 8, 16, 33, 64})
      for (int64_t cols : {(int64_t)k, (int64_t)1000, (int64_t)124160}) {
        TopKCase c;
        c.type = t;
        c.k = k;
        c.n_cols = cols;
        c.n_rows = cols > 100000 ? 16 : 7;
        list.push_back({c, (uint64_t)(k * 31 + cols + t),
                        std::string(dfsel_type_name(t)) + "_k" + std::to_string(k) + "_cols" + std::to_string(cols)});
      }
  return list;
}

class GpuShardTopKEveryKAndType : public testing::TestWithParam<NamedCase> {};
TEST_P(GpuShardTopKEveryKAndType, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run_named_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuShardTopKEveryKAndType, testing::ValuesIn(every_k_and_type()), case_name);

TEST(GpuShardTopK, SpecialValues) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (Fill f : {Fill::kTies, Fill::kAllEqual, Fill::kAscending, Fill::kSpecial, Fill::kFewFinite, Fill::kZerosAndNaN})
      for (int32_t k : {1, 16, 64})
        for (int64_t cols : {(int64_t)1000, (int64_t)124160}) {
          TopKCase c;
          c.type = t;
          c.fill = f;
          c.k = k;
          c.n_cols = cols;
          c.n_rows = cols > 100000 ? 16 : 64;
          expect_matches_reference(c, seed + (int)f * 1000 + k + cols + t);
        }
}

// Rows starting off a 256-byte boundary and rows padded apart, odd lengths among them.
std::vector<NamedCase> unaligned_and_strided_rows() {
  std::vector<NamedCase> list;
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (int64_t base : {0, 1, 3, 5, 7})
      for (int64_t pad : {0, 1, 6, 13}) {
        TopKCase c;
        c.type = t;
        c.base_elems = base;
        c.pad_elems = pad;
        c.n_cols = 31040 + (base + pad) % 5;  // odd lengths leave a tail that is not a whole vector
        c.n_rows = 16;
        c.k = 16;
        c.out_pad = (size_t)pad % 3;
        c.fill = pad % 2 ? Fill::kSpecial : Fill::kRandom;
        list.push_back({c, (uint64_t)(base * 100 + pad + t),
                        std::string(dfsel_type_name(t)) + "_base" + std::to_string(base) + "_pad" + std::to_string(pad)});
      }
  return list;
}

class GpuShardTopKUnalignedAndStridedRows : public testing::TestWithParam<NamedCase> {};
TEST_P(GpuShardTopKUnalignedAndStridedRows, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run_named_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuShardTopKUnalignedAndStridedRows, testing::ValuesIn(unaligned_and_strided_rows()),
                         case_name);

// The selector's drafted rows: 15 of every 16, each block's anchor row skipped.
std::vector<NamedCase> skips_anchor_rows() {
  std::vector<NamedCase> list;
  for (int32_t blocks : {1, 4, 17}) {
    TopKCase c;
    c.skip_anchor_rows = true;
    c.n_rows = blocks * 15;
    c.n_cols = 124160;
    c.type = blocks == 4 ? DFSEL_TYPE_BF16 : DFSEL_TYPE_F32;
    list.push_back({c, (uint64_t)blocks, "blocks" + std::to_string(blocks) + "_" + dfsel_type_name(c.type)});
  }
  return list;
}

class GpuShardTopKSkipsAnchorRows : public testing::TestWithParam<NamedCase> {};
TEST_P(GpuShardTopKSkipsAnchorRows, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run_named_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuShardTopKSkipsAnchorRows, testing::ValuesIn(skips_anchor_rows()), case_name);

// Every split count the heuristic can choose, from one CTA per row up to the largest.
TEST(GpuShardTopK, SplitCounts) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (int sms : {1, 3, 16, 132, 1000})
    for (int32_t k : {8, 64}) {
      TopKCase c;
      c.num_sms = sms;
      c.n_rows = 3;
      c.n_cols = 248320;
      c.k = k;
      c.fill = sms == 16 ? Fill::kFewFinite : sms == 3 ? Fill::kZerosAndNaN : Fill::kRandom;
      expect_matches_reference(c, seed + sms + k);
    }
}

// Forced split counts from one CTA a row to the most the merging CTA holds, on the fills that
// stress the merge: equal lists in every chunk, keys that drop bits, ties.
std::vector<NamedCase> forced_split_counts() {
  std::vector<NamedCase> list;
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16})
    for (int32_t k : {1, 16, 64})
      for (int32_t splits : {1, 2, 7, 33, std::min(2048 / k, 128)})
        for (Fill f : {Fill::kRandom, Fill::kPeriodic, Fill::kZerosAndNaN, Fill::kTies}) {
          if ((int64_t)splits * k > 2048) continue;  // more keys than the merging CTA holds
          TopKCase c;
          c.type = t;
          c.k = k;
          c.splits = splits;
          c.n_rows = 2;
          c.n_cols = 248320;
          c.fill = f;
          list.push_back({c, (uint64_t)(k * 7 + splits + (int)f * 100 + t),
                          std::string(dfsel_type_name(t)) + "_k" + std::to_string(k) + "_splits" + std::to_string(splits) +
                              "_" + fill_id(f)});
        }
  return list;
}

class GpuShardTopKForcedSplitCounts : public testing::TestWithParam<NamedCase> {};
TEST_P(GpuShardTopKForcedSplitCounts, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run_named_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuShardTopKForcedSplitCounts, testing::ValuesIn(forced_split_counts()), case_name);

// Inputs built against bounds taken from group maxima: a starved thread group in the first
// tile, and alike partial lists in every chunk of a split row.
std::vector<NamedCase> adversarial_layouts() {
  std::vector<NamedCase> list;
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (int32_t k : {8, 16, 33, 64})
      for (Fill f : {Fill::kStarved, Fill::kPeriodic})
        for (int32_t rows : {1, 16}) {
          TopKCase c;
          c.type = t;
          c.k = k;
          c.fill = f;
          c.n_rows = rows;
          c.n_cols = rows == 1 ? 248320 : 65536;
          c.splits = rows == 1 ? 0 : 4;  // 65536 columns in 4 chunks: every chunk starts a group
          list.push_back({c, (uint64_t)(k + (int)f * 10 + rows + t),
                          std::string(dfsel_type_name(t)) + "_k" + std::to_string(k) + "_" + fill_id(f) + "_rows" +
                              std::to_string(rows)});
        }
  return list;
}

class GpuShardTopKAdversarialLayouts : public testing::TestWithParam<NamedCase> {};
TEST_P(GpuShardTopKAdversarialLayouts, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  run_named_case(GetParam());
}
INSTANTIATE_TEST_SUITE_P(, GpuShardTopKAdversarialLayouts, testing::ValuesIn(adversarial_layouts()), case_name);

// V = 202048 over three uneven shards: each shard's list with global ids, then the merge of
// the three equals the top-K of the whole row (SPEC section 4.2).
TEST(GpuShardTopK, UnevenShardsMergeToTheWholeRow) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  const int64_t V = 202048;
  const int64_t bounds[] = {0, 70001, 133337, V};
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16}) {
    TopKCase whole;
    whole.type = t;
    whole.n_rows = 16;
    whole.n_cols = V;
    whole.fill = t == DFSEL_TYPE_F32 ? Fill::kRandom : Fill::kTies;
    SCOPED_TRACE(whole.str() + " seed=" + std::to_string(seed));
    std::mt19937_64 rng(seed + t);
    const HostLogits h = make_logits(whole, rng);
    const std::vector<CandRec> want = reference(whole, h);
    DeviceBuffer<uint8_t> logits(h.bytes.size());
    logits.upload(h.bytes);
    const int sms = device_sms();
    std::vector<CandRec> gathered(3 * (size_t)whole.n_rows * whole.k);
    for (int r = 0; r < 3; ++r) {
      TopKCase c = whole;
      c.n_cols = bounds[r + 1] - bounds[r];
      c.id_offset = bounds[r];
      HostLogits shard = h;  // the same bytes, viewed from this shard's first column
      shard.base = h.base + (size_t)bounds[r] * elem_bytes(t);
      const std::vector<CandRec> want_shard = reference(c, shard);
      DeviceBuffer<CandRec> out((size_t)c.n_rows * c.k);
      DeviceBuffer<uint8_t> scratch(std::max<size_t>(cuda::shard_topk_scratch_bytes(c.n_rows, c.k, c.n_cols, sms), 1));
      scratch.zero();
      out.poison();
      cuda::ShardTopKArgs a{};
      a.logits = logits.get() + shard.base;
      a.type = t;
      a.n_cols = c.n_cols;
      a.row_stride = h.row_stride;
      a.map = RowMap{1, 1, 0};
      a.n_rows = c.n_rows;
      a.k = c.k;
      a.id_offset = c.id_offset;
      a.out = out.get();
      a.out_stride = (size_t)c.k;
      a.scratch = scratch.get();
      CUDA_OK(cuda::shard_topk(a, sms, 0));
      const std::vector<CandRec> got = out.download();
      ASSERT_EQ(compare(c, want_shard, got), "") << "shard " << r;
      for (int32_t s = 0; s < c.n_rows; ++s)
        memcpy(&gathered[((size_t)s * 3 + r) * c.k], &got[(size_t)s * c.k], c.k * sizeof(CandRec));
    }
    std::vector<CandRec> merged((size_t)whole.n_rows * whole.k);
    for (int32_t s = 0; s < whole.n_rows; ++s)
      ref::merge_candidates(&gathered[(size_t)s * 3 * whole.k], 3 * whole.k, whole.k, &merged[(size_t)s * whole.k]);
    EXPECT_EQ(compare(whole, want, merged), "");
  }
}

// Captured once, replayed with new logits written into the same buffer: the launch allocates
// and synchronises nothing, and its scratch is reusable from one replay to the next.
TEST(GpuShardTopK, GraphReplayWithNewInputs) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  TopKCase c;
  c.n_rows = 16;
  c.n_cols = 124160;
  c.base_elems = 1;
  HostLogits h = make_logits(c, rng);
  DeviceCase d;
  setup(c, h, &d);
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const cudaError_t launched = cuda::shard_topk(d.args, device_sms(), st);
  CUDA_OK(cudaStreamEndCapture(st, &graph));
  CUDA_OK(launched);
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 3; ++replay) {
    SCOPED_TRACE("replay " + std::to_string(replay));
    c.fill = replay == 1 ? Fill::kSpecial : Fill::kRandom;
    h = make_logits(c, rng);
    d.logits.upload(h.bytes);
    d.out.poison();
    CUDA_OK(cudaGraphLaunch(exec, st));
    CUDA_OK(cudaStreamSynchronize(st));
    EXPECT_EQ(compare(c, reference(c, h), d.out.download()), "");
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
}

// The grid is sized on the host: no GPU needed. Alone the top-K fills 4 CTAs per SM; beside
// another kernel (the plan's gate) it leaves one slot per SM; scratch covers both.
TEST(GpuShardTopK, GridLeavesRoomWhenSharingTheGpu) {
  cuda::ShardTopKArgs a{};
  a.type = DFSEL_TYPE_F32;
  a.n_cols = 124160;
  a.k = 16;
  for (int32_t rows : {1, 15, 16, 64, 256, 1024}) {
    a.n_rows = rows;
    a.shares_sms = 0;
    const int alone = cuda::shard_topk_splits(a, 132);
    a.shares_sms = 1;
    const int beside = cuda::shard_topk_splits(a, 132);
    SCOPED_TRACE("rows " + std::to_string(rows) + ": alone " + std::to_string(alone) + ", beside " +
                 std::to_string(beside));
    ASSERT_GE(beside, 1);
    EXPECT_LE((int64_t)rows * alone, std::max<int64_t>(132 * 4, rows));
    EXPECT_LE((int64_t)rows * beside, std::max<int64_t>(132 * 3, rows));
    EXPECT_LE(beside, alone);
    const size_t scratch = cuda::shard_topk_scratch_bytes(rows, a.k, a.n_cols, 132);
    for (int s : {alone, beside})
      if (s > 1) EXPECT_GE(scratch, (size_t)rows * s * a.k * sizeof(CandRec));
  }
  a.n_rows = 16;
  a.shares_sms = 0;
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 33);  // one wave; chunks of about one tile (31040 / 940)
  a.shares_sms = 1;
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 24);
  a.type = DFSEL_TYPE_BF16;  // half the vectors a row, half the chunks
  a.shares_sms = 0;
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 16);
  a.type = DFSEL_TYPE_F32;
  a.k = 64;  // at most 1024 partial records a row
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 16);
  // What shard_topk refuses, shard_topk_splits reports as 0.
  for (int32_t k : {0, 65}) {
    a.k = k;
    EXPECT_EQ(cuda::shard_topk_splits(a, 132), 0) << "k = " << k;
  }
  a.k = 16;
  a.splits = 2049;  // forced: more partial records than the last CTA holds
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 0);
  a.splits = 7;
  EXPECT_EQ(cuda::shard_topk_splits(a, 132), 7);
}

// The launcher trusts its arguments (the plan refuses k outside [1, min(64, shard)] at
// creation: ApiValidation); k equal to the whole row is the edge it must still handle.
TEST(GpuShardTopK, RunsWithKEqualToTheRow) {
  DFSEL_REQUIRE_GPUS(1);
  DeviceBuffer<float> logits(100);
  DeviceBuffer<CandRec> out(100);
  cuda::ShardTopKArgs a{};
  a.logits = logits.get();
  a.type = DFSEL_TYPE_F32;
  a.n_cols = 50;
  a.row_stride = 50 * sizeof(float);
  a.map = RowMap{1, 1, 0};
  a.n_rows = 1;
  a.out = out.get();
  a.out_stride = 64;
  a.k = 50;
  ASSERT_EQ(cuda::shard_topk_splits(a, device_sms()), 1);
  EXPECT_EQ(cuda::shard_topk(a, device_sms(), 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

// Every path of the top-K at sizes compute-sanitizer finishes quickly (scripts/gpu-check.sh):
// each stored type, the K buckets, one CTA a row and split rows (9000 columns split in 4 with
// few rows), the special fills, strided and unaligned rows.
TEST(GpuShardTopK, SmallShapesForSanitizers) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (Fill f : {Fill::kRandom, Fill::kTies, Fill::kSpecial, Fill::kFewFinite, Fill::kZerosAndNaN, Fill::kStarved})
      for (int32_t k : {1, 16, 64})
        for (int64_t cols : {(int64_t)k, (int64_t)300, (int64_t)9000}) {
          TopKCase c;
          c.type = t;
          c.fill = f;
          c.k = k;
          c.n_cols = cols;
          c.n_rows = cols > 1000 ? 2 : 3;
          c.base_elems = f == Fill::kTies ? 3 : 0;
          c.pad_elems = f == Fill::kSpecial ? 5 : 0;
          expect_matches_reference(c, seed + (int)f * 1000 + k + cols + t);
        }
}

}  // namespace
}  // namespace dfsel::test
