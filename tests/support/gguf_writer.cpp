#include "support/gguf_writer.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

#include "kernels/common/numeric.cuh"
#include "support/block_types.h"

namespace dfsel::test {

namespace {

template <typename T>
void put(std::vector<uint8_t>* out, T v) {
  const size_t at = out->size();
  out->resize(at + sizeof(T));
  memcpy(out->data() + at, &v, sizeof(T));
}

template <typename T>
void patch(std::vector<uint8_t>* bytes, size_t at, T v) {
  memcpy(bytes->data() + at, &v, sizeof(T));
}

void put_string(std::vector<uint8_t>* out, const std::string& s) {
  put<uint64_t>(out, s.size());
  out->insert(out->end(), s.begin(), s.end());
}

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

// ---- values ----------------------------------------------------------------------------

#define DFSEL_GGUF_SCALAR(fn, T, id) \
  GgufValue GgufValue::fn(T v) {     \
    GgufValue g;                     \
    g.type_ = id;                    \
    put<T>(&g.bytes_, v);            \
    return g;                        \
  }
DFSEL_GGUF_SCALAR(u8, uint8_t, kGgufU8)
DFSEL_GGUF_SCALAR(i8, int8_t, kGgufI8)
DFSEL_GGUF_SCALAR(u16, uint16_t, kGgufU16)
DFSEL_GGUF_SCALAR(i16, int16_t, kGgufI16)
DFSEL_GGUF_SCALAR(u32, uint32_t, kGgufU32)
DFSEL_GGUF_SCALAR(i32, int32_t, kGgufI32)
DFSEL_GGUF_SCALAR(f32, float, kGgufF32)
DFSEL_GGUF_SCALAR(u64, uint64_t, kGgufU64)
DFSEL_GGUF_SCALAR(i64, int64_t, kGgufI64)
DFSEL_GGUF_SCALAR(f64, double, kGgufF64)
#undef DFSEL_GGUF_SCALAR

GgufValue GgufValue::boolean(bool v) {
  GgufValue g;
  g.type_ = kGgufBool;
  g.bytes_.push_back(v ? 1 : 0);
  return g;
}

GgufValue GgufValue::str(const std::string& v) {
  GgufValue g;
  g.type_ = kGgufString;
  put_string(&g.bytes_, v);
  return g;
}

GgufValue GgufValue::array(uint32_t elem_type, std::vector<GgufValue> elems) {
  GgufValue g;
  g.type_ = kGgufArray;
  g.elem_type_ = elem_type;
  g.elems_ = std::move(elems);
  return g;
}

void GgufValue::encode(std::vector<uint8_t>* out) const {
  if (type_ != kGgufArray) {
    out->insert(out->end(), bytes_.begin(), bytes_.end());
    return;
  }
  put<uint32_t>(out, elem_type_);
  put<uint64_t>(out, elems_.size());
  for (const GgufValue& e : elems_) e.encode(out);
}

// ---- files -----------------------------------------------------------------------------

std::vector<uint8_t> write_gguf(uint32_t version, const std::vector<GgufKv>& kvs,
                                const std::vector<GgufTensor>& tensors, uint32_t alignment,
                                GgufLayout* layout) {
  GgufLayout l;
  // The magic is the vector's first contents rather than an insert at the end of an empty
  // vector, which GCC 12 takes for a write past a zero-byte buffer (-Wstringop-overflow).
  std::vector<uint8_t> out{'G', 'G', 'U', 'F'};
  put<uint32_t>(&out, version);
  put<uint64_t>(&out, tensors.size());
  put<uint64_t>(&out, kvs.size());
  l.kv_begin = out.size();
  for (const GgufKv& kv : kvs) {
    l.kv_at.push_back(out.size());
    put_string(&out, kv.key);
    put<uint32_t>(&out, kv.value.type());
    l.value_at.push_back(out.size());
    kv.value.encode(&out);
  }
  l.infos_begin = out.size();
  std::vector<size_t> offsets;
  size_t next = 0;
  for (const GgufTensor& t : tensors) {
    const size_t off = align_up(next, alignment);
    offsets.push_back(off);
    next = off + t.data.size();
    l.info_at.push_back(out.size());
    put_string(&out, t.name);
    put<uint32_t>(&out, uint32_t(t.ne.size()));
    for (uint64_t n : t.ne) put<uint64_t>(&out, n);
    put<uint32_t>(&out, t.type);
    put<uint64_t>(&out, t.offset ? *t.offset : off);
  }
  l.infos_end = out.size();
  l.data_begin = align_up(out.size(), alignment);
  out.resize(l.data_begin + align_up(next, alignment), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    l.data_at.push_back(l.data_begin + offsets[i]);
    if (!tensors[i].data.empty())
      memcpy(out.data() + l.data_at.back(), tensors[i].data.data(), tensors[i].data.size());
  }
  l.data_end = l.data_begin + next;
  l.size = out.size();
  if (layout) *layout = std::move(l);
  return out;
}

// ---- quantisers ------------------------------------------------------------------------

namespace {

void quantize_q8_0(const float* x, uint8_t* out) {
  float amax = 0;
  for (int i = 0; i < kQ8Block; ++i) amax = std::max(amax, std::fabs(x[i]));
  const uint16_t dh = float_to_f16(amax / 127.0f);
  const float d = f16_to_float(dh);
  BlockQ8_0 b;
  b.d = dh;
  for (int i = 0; i < kQ8Block; ++i)
    b.qs[i] = int8_t(d > 0 ? std::clamp(std::lrint(x[i] / d), -127L, 127L) : 0);
  memcpy(out, &b, sizeof b);
}

// Stores n values as type at out (row_bytes(type, n) bytes, 2-byte aligned).
void quantize_into(dfsel_type type, const float* x, int64_t n, uint8_t* out) {
  switch (type) {
    case DFSEL_TYPE_F32:
      memcpy(out, x, size_t(n) * 4);
      break;
    case DFSEL_TYPE_F16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = float_to_f16(x[i]);
      break;
    }
    case DFSEL_TYPE_BF16: {
      uint16_t* o = reinterpret_cast<uint16_t*>(out);
      for (int64_t i = 0; i < n; ++i) o[i] = float_to_bf16(x[i]);
      break;
    }
    case DFSEL_TYPE_Q8_0:
      for (int64_t b = 0; b < n / kQ8Block; ++b)
        quantize_q8_0(x + b * kQ8Block, out + b * sizeof(BlockQ8_0));
      break;
    default: {  // a type the library widens to BF16
      const WidenedBlock blk = widened_block(type);
      for (int64_t b = 0; b < n / blk.elems; ++b) quantize_block(type, x + b * blk.elems, out + b * blk.bytes);
    }
  }
}

}  // namespace

std::vector<uint8_t> quantize(dfsel_type type, const float* x, int64_t n) {
  std::vector<uint8_t> out(row_bytes(type, n));
  quantize_into(type, x, n, out.data());
  return out;
}

float draft_value(uint64_t seed, int which, int64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + (uint64_t(which) << 56) + uint64_t(i);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  z ^= z >> 31;
  return float(z >> 40) * (1.0f / 8388608.0f) - 1.0f;  // 24 bits: [-1, 1)
}

// ---- drafts ----------------------------------------------------------------------------

std::vector<uint8_t> draft_rows(uint64_t seed, int which, dfsel_type type, int64_t ne0, int64_t rows,
                                int64_t period) {
  const size_t rb = row_bytes(type, ne0);
  std::vector<uint8_t> out(size_t(rows) * rb);
  std::vector<float> row(static_cast<size_t>(ne0));
  float* x = row.data();
  for (int64_t r = 0; r < rows; ++r) {
    if (period > 0 && r >= period) {
      memcpy(out.data() + size_t(r) * rb, out.data() + size_t(r % period) * rb, rb);
      continue;
    }
    for (int64_t c = 0; c < ne0; ++c) x[c] = draft_value(seed, which, r * ne0 + c);
    quantize_into(type, x, ne0, out.data() + size_t(r) * rb);
  }
  return out;
}

namespace {

std::vector<uint8_t> noise(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (uint8_t& b : out) b = uint8_t(rng());
  return out;
}

std::vector<GgufKv> every_value_type() {
  using V = GgufValue;
  std::vector<V> u32s;
  for (uint32_t i = 1; i <= 20; ++i) u32s.push_back(V::u32(i));
  return {
      {"test.u8", V::u8(200)},
      {"test.i8", V::i8(-100)},
      {"test.u16", V::u16(60000)},
      {"test.i16", V::i16(-30000)},
      {"test.u32", V::u32(4000000000u)},
      {"test.i32", V::i32(-2000000000)},
      {"test.f32", V::f32(1.5f)},
      {"test.bool", V::boolean(true)},
      {"test.string", V::str("hello \"gguf\"\n")},
      {"test.u64", V::u64((1ull << 63) + 5)},
      {"test.i64", V::i64(-(int64_t(1) << 62))},
      {"test.f64", V::f64(0.1)},
      {"test.array_u32", V::array(kGgufU32, u32s)},
      {"test.array_string", V::array(kGgufString, {V::str("a"), V::str("bc"), V::str("")})},
      {"test.array_nested",
       V::array(kGgufArray, {V::array(kGgufI16, {V::i16(1), V::i16(-2)}), V::array(kGgufI16, {}),
                             V::array(kGgufI16, {V::i16(3)})})},
      {"test.array_empty", V::array(kGgufF32, {})},
      {"test.array_bool", V::array(kGgufBool, {V::boolean(true), V::boolean(false)})},
  };
}

size_t find_kv(const std::vector<GgufKv>& kvs, const std::string& key) {
  for (size_t i = 0; i < kvs.size(); ++i)
    if (kvs[i].key == key) return i;
  return SIZE_MAX;
}

void erase_kv(std::vector<GgufKv>* kvs, const std::string& key) {
  kvs->erase(kvs->begin() + std::ptrdiff_t(find_kv(*kvs, key)));
}

void set_kv(std::vector<GgufKv>* kvs, const std::string& key, GgufValue v) {
  (*kvs)[find_kv(*kvs, key)].value = std::move(v);
}

}  // namespace

Draft make_draft(const DraftOptions& o) {
  using V = GgufValue;
  const uint64_t R = uint64_t(o.rank), NV = uint64_t(o.n_vocab), NE = uint64_t(o.n_embd);
  std::vector<GgufKv> kvs = {
      {"general.architecture", V::str("dflash")},
      {"general.name", V::str(o.name)},
      {"dflash.selector_rank", V::u32(uint32_t(o.rank))},
      {"dflash.selector_top_k", V::u32(uint32_t(o.top_k))},
      {"dflash.block_size", V::u32(uint32_t(o.block_size))},
      {"dflash.embedding_length", V::u32(uint32_t(o.n_embd))},
  };
  if (o.alignment != 32) kvs.insert(kvs.begin() + 1, {"general.alignment", V::u32(o.alignment)});
  const auto real = [&](double v) { return o.f64_scalars ? V::f64(v) : V::f32(float(v)); };
  if (o.logit_scale) kvs.push_back({"dflash.logit_scale", real(*o.logit_scale)});
  if (o.softcap) kvs.push_back({"dflash.final_logit_softcapping", real(*o.softcap)});
  if (o.every_value_type)
    for (GgufKv& kv : every_value_type()) kvs.push_back(std::move(kv));

  std::vector<GgufTensor> tensors;
  if (o.other_tensors) {
    tensors.push_back({"token_embd.weight", 13, {256, 3}, noise(3 * 176, o.seed), {}});  // q5_K
    tensors.push_back({"output_norm.weight", 0, {NE}, noise(NE * 4, o.seed + 1), {}});
    tensors.push_back({"blk.0.positions", 26, {3}, noise(12, o.seed + 2), {}});  // i32
  }
  const size_t first = tensors.size();
  tensors.push_back({"selector_predecessor.weight",
                     uint32_t(o.codebook_type),
                     {R, NV},
                     draft_rows(o.seed, 0, o.codebook_type, o.rank, o.n_vocab, o.row_period),
                     {}});
  tensors.push_back({"selector_successor.weight",
                     uint32_t(o.codebook_type),
                     {R, NV},
                     draft_rows(o.seed, 1, o.codebook_type, o.rank, o.n_vocab, o.row_period),
                     {}});
  tensors.push_back({"selector_hidden.weight",
                     uint32_t(o.hidden_type),
                     {NE, R},
                     draft_rows(o.seed, 2, o.hidden_type, o.n_embd, o.rank),
                     {}});
  GgufTensor& prev = tensors[first];
  GgufTensor& next = tensors[first + 1];
  GgufTensor& hidden = tensors[first + 2];

  // Defects expressed in the structure; the byte-level ones are patched below.
  switch (o.defect) {
    case Defect::kHugeArray:
      kvs.push_back({"test.huge", V::array(kGgufU32, {V::u32(7)})});
      break;
    case Defect::kBadArrayType:
      kvs.push_back({"test.bad_array", V::array(kGgufU32, {V::u32(7)})});
      break;
    case Defect::kBadValueType:
    case Defect::kBadBool:
      kvs.push_back({"test.flag", V::boolean(true)});
      break;
    case Defect::kDeepArrays: {
      V v = V::array(kGgufU8, {V::u8(1)});
      for (int i = 0; i < 8; ++i) v = V::array(kGgufArray, {v});
      kvs.push_back({"test.deep", v});
      break;
    }
    case Defect::kEmptyKey:
      kvs.push_back({"", V::u8(1)});
      break;
    case Defect::kDuplicateKey:
      kvs.push_back({"dflash.selector_rank", V::u32(uint32_t(R))});
      break;
    case Defect::kBadAlignment:
      kvs.push_back({"general.alignment", V::u32(48)});
      break;
    case Defect::kAlignmentType:
      kvs.push_back({"general.alignment", V::u64(32)});
      break;
    case Defect::kUnknownTensorType:
      hidden.type = 200;
      break;
    case Defect::kNDims0:
      hidden.ne.clear();
      break;
    case Defect::kNDims5:
      hidden.ne = {NE, R, 1, 1, 1};
      break;
    case Defect::kNeZero:
      next.ne[1] = 0;
      break;
    case Defect::kNeOverflow:
      next.ne[1] = 1ull << 62;
      break;
    case Defect::kRaggedBlock:
      next.type = DFSEL_TYPE_Q8_0;
      next.ne[0] = R + 1;
      break;
    case Defect::kMisalignedOffset:
      next.offset = 16;
      break;  // the real offset is a multiple of 32
    case Defect::kOffsetPastEof:
      hidden.offset = 1ull << 40;
      break;
    case Defect::kDuplicateTensor:
      tensors.push_back({prev.name, prev.type, prev.ne, prev.data, {}});
      break;
    case Defect::kUnsupportedSelectorType:
      hidden.type = 20;  // iq4_nl: 18 bytes per 32
      hidden.data = noise(size_t(NE / 32 * 18 * R), o.seed);
      break;
    case Defect::kMissingTensor:
      tensors.erase(tensors.begin() + std::ptrdiff_t(first + 2));
      break;
    case Defect::kRankMismatch:
      set_kv(&kvs, "dflash.selector_rank", V::u32(uint32_t(R + 1)));
      break;
    case Defect::kVocabMismatch:
      next.ne[1] = NV + 1;
      next.data = draft_rows(o.seed, 1, o.codebook_type, o.rank, o.n_vocab + 1);
      break;
    case Defect::kHiddenShape:
      hidden.ne[0] = NE + 1;
      hidden.type = DFSEL_TYPE_F32;
      hidden.data = draft_rows(o.seed, 2, DFSEL_TYPE_F32, o.n_embd + 1, o.rank);
      break;
    case Defect::kWrongArchitecture:
      set_kv(&kvs, "general.architecture", V::str("llama"));
      break;
    case Defect::kMissingArchitecture:
      erase_kv(&kvs, "general.architecture");
      break;
    case Defect::kMissingKey:
      erase_kv(&kvs, "dflash.block_size");
      break;
    case Defect::kKeyWrongType:
      set_kv(&kvs, "dflash.selector_top_k", V::str("16"));
      break;
    case Defect::kRankZero:
      set_kv(&kvs, "dflash.selector_rank", V::u32(0));
      break;
    case Defect::kBlockSizeOne:
      set_kv(&kvs, "dflash.block_size", V::u32(1));
      break;
    case Defect::kTopKTooLarge:
      set_kv(&kvs, "dflash.selector_top_k", V::u32(uint32_t(NV + 1)));
      break;
    case Defect::kBadLogitScale:
      kvs.push_back({"dflash.logit_scale", V::f32(-1.0f)});
      break;
    case Defect::kSoftcapNotFinite:
      kvs.push_back({"dflash.final_logit_softcapping", V::f32(INFINITY)});
      break;
    default:
      break;
  }

  Draft d;
  d.bytes = write_gguf(o.version, kvs, tensors, o.alignment, &d.layout);
  const GgufLayout& l = d.layout;
  if (o.defect != Defect::kMissingTensor) {
    d.e_prev_at = l.data_at[first];
    d.e_next_at = l.data_at[first + 1];
    d.w_h_at = l.data_at[first + 2];
  }
  const size_t last_kv = kvs.size() - 1;
  switch (o.defect) {
    case Defect::kBadMagic:
      d.bytes[3] = 'X';
      break;
    case Defect::kHugeTensorCount:
      patch<uint64_t>(&d.bytes, 8, 1ull << 62);
      break;
    case Defect::kHugeKvCount:
      patch<uint64_t>(&d.bytes, 16, 1ull << 62);
      break;
    case Defect::kKeyPastEof:
      patch<uint64_t>(&d.bytes, l.kv_at[0], d.bytes.size());
      break;
    case Defect::kStringPastEof:
      patch<uint64_t>(&d.bytes, l.value_at[find_kv(kvs, "general.architecture")], 1ull << 62);
      break;
    case Defect::kHugeArray:
      patch<uint64_t>(&d.bytes, l.value_at[last_kv] + 4, 1ull << 62);
      break;
    case Defect::kBadArrayType:
      patch<uint32_t>(&d.bytes, l.value_at[last_kv], 13);
      break;
    case Defect::kBadValueType:
      patch<uint32_t>(&d.bytes, l.value_at[last_kv] - 4, 13);
      break;
    case Defect::kBadBool:
      d.bytes[l.value_at[last_kv]] = 2;
      break;
    case Defect::kNamePastEof:
      patch<uint64_t>(&d.bytes, l.info_at[first], d.bytes.size());
      break;
    default:
      break;
  }
  if (o.truncate_to < d.bytes.size()) d.bytes.resize(o.truncate_to);
  return d;
}

float draft_element(const DraftOptions& o, int which, int64_t row, int64_t col) {
  const int64_t ne0 = which == 2 ? o.n_embd : o.rank;
  if (which != 2 && o.row_period > 0) row %= o.row_period;
  return draft_value(o.seed, which, row * ne0 + col);
}

// ---- files on disk ---------------------------------------------------------------------

TempDir::TempDir() {
  static std::atomic<unsigned> counter{0};
  std::random_device rd;
  namespace fs = std::filesystem;
  for (int attempt = 0; attempt < 100; ++attempt) {
    const fs::path p =
        fs::temp_directory_path() / ("dfsel_gguf_" + std::to_string(getpid()) + "_" +
                                     std::to_string(counter++) + "_" + std::to_string(rd()));
    std::error_code ec;
    path_ = p.string();
    if (fs::create_directory(p, ec)) return;
  }  // tests that write into a directory that could not be made fail on their writes
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

bool write_file(const std::string& path, const std::vector<uint8_t>& bytes, size_t n) {
  n = std::min(n, bytes.size());
  FILE* f = fopen(path.c_str(), "wb");
  if (f == nullptr) return false;
  const bool ok = n == 0 || fwrite(bytes.data(), 1, n, f) == n;
  return fclose(f) == 0 && ok;
}

}  // namespace dfsel::test
