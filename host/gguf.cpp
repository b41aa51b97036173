// GGUF v2/v3 reader (DESIGN section 4). Layout of a file, all little-endian:
//   header       "GGUF", u32 version, u64 tensor count, u64 key/value count
//   metadata     per pair: string key, u32 value type, value
//   tensor infos per tensor: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
//   data         starts at the end of the infos rounded up to general.alignment (default 32);
//                tensor offsets are relative to it
// A string is a u64 byte length and the bytes; an array a u32 element type, a u64 length and
// the elements. Every length and count is checked against the bytes left before it is used.
#include "gguf.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <sstream>
#include <system_error>

#include "kernels/common/numeric.cuh"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

namespace dfsel::gguf {

namespace {

// The fewest bytes a key/value pair (empty key, type, one-byte value) and a tensor info
// (empty name, n_dims, one ne, type, offset) take: bounds on counts before anything is read.
constexpr size_t kMinKvBytes = 8 + 4 + 1;
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr int kMaxArrayDepth = 8;
constexpr size_t kNameChars = 96;  // names longer than this are cut in messages

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  memcpy(&v, p, 4);
  return v;
}

uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  memcpy(&v, p, 8);
  return v;
}

uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  memcpy(&v, p, 2);
  return v;
}

// Bytes of one element of a fixed-size value type; 0 for strings and arrays.
size_t fixed_size(ValueType t) {
  switch (t) {
    case ValueType::U8:
    case ValueType::I8:
    case ValueType::Bool:
      return 1;
    case ValueType::U16:
    case ValueType::I16:
      return 2;
    case ValueType::U32:
    case ValueType::I32:
    case ValueType::F32:
      return 4;
    case ValueType::U64:
    case ValueType::I64:
    case ValueType::F64:
      return 8;
    default:
      return 0;
  }
}

// The fewest bytes one element of type t can take: a string its length, an array its
// element type and length.
size_t min_size(ValueType t) {
  if (t == ValueType::String) return 8;
  if (t == ValueType::Array) return 12;
  return fixed_size(t);
}

std::string shape_string(const int64_t* ne, int n_dims) {
  std::string s = "{";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "}";
}

// s between quote characters, control bytes escaped, cut after about max_chars characters
// (never inside a UTF-8 sequence).
void append_escaped(std::string_view s, size_t max_chars, std::string* out, char quote = '"') {
  size_t n = s.size();
  const bool cut = n > max_chars;
  if (cut) {
    n = max_chars;
    while (n > 0 && (static_cast<uint8_t>(s[n]) & 0xc0) == 0x80) --n;
  }
  out->push_back(quote);
  for (size_t i = 0; i < n; ++i) {
    const uint8_t c = static_cast<uint8_t>(s[i]);
    if (c == uint8_t(quote) || c == '\\') {
      out->push_back('\\');
      out->push_back(static_cast<char>(c));
    } else if (c == '\n') {
      *out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      snprintf(buf, sizeof buf, "\\x%02x", c);
      *out += buf;
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back(quote);
  if (cut) *out += "...";
}

// A key or tensor name from the file, as messages show it: 'name'.
std::string quoted(std::string_view name) {
  std::string out;
  append_escaped(name, kNameChars, &out, '\'');
  return out;
}

}  // namespace

const char* value_type_name(uint32_t type) {
  static const char* const kNames[kValueTypeCount] = {"u8",  "i8",  "u16",  "i16",    "u32",
                                                      "i32", "f32", "bool", "string", "array",
                                                      "u64", "i64", "f64"};
  return type < kValueTypeCount ? kNames[type] : nullptr;
}

bool type_layout(uint32_t ggml_type, TypeLayout* out) {
  // Element count and bytes of one block for every ggml type id a file may carry, by id.
  // Ids 4, 5, 31-33 and 36-38 were retired from the format and are refused.
  static const TypeLayout kLayouts[] = {
      {1, 4, "f32"},                          // 0
      {1, 2, "f16"},                          // 1
      {32, 18, "q4_0"},                       // 2
      {32, 20, "q4_1"},                       // 3
      {0, 0, nullptr},                        // 4
      {0, 0, nullptr},                        // 5
      {32, 22, "q5_0"},                       // 6
      {32, 24, "q5_1"},                       // 7
      {kQ8Block, sizeof(BlockQ8_0), "q8_0"},  // 8
      {32, 36, "q8_1"},                       // 9
      {256, 84, "q2_K"},                      // 10
      {256, 110, "q3_K"},                     // 11
      {kQKBlock, kQ4KBytes, "q4_K"},          // 12
      {256, 176, "q5_K"},                     // 13
      {kQKBlock, kQ6KBytes, "q6_K"},          // 14
      {256, 292, "q8_K"},                     // 15
      {256, 66, "iq2_xxs"},                   // 16
      {256, 74, "iq2_xs"},                    // 17
      {256, 98, "iq3_xxs"},                   // 18
      {256, 50, "iq1_s"},                     // 19
      {32, 18, "iq4_nl"},                     // 20
      {256, 110, "iq3_s"},                    // 21
      {256, 82, "iq2_s"},                     // 22
      {256, 136, "iq4_xs"},                   // 23
      {1, 1, "i8"},                           // 24
      {1, 2, "i16"},                          // 25
      {1, 4, "i32"},                          // 26
      {1, 8, "i64"},                          // 27
      {1, 8, "f64"},                          // 28
      {256, 56, "iq1_m"},                     // 29
      {1, 2, "bf16"},                         // 30
      {0, 0, nullptr},                        // 31
      {0, 0, nullptr},                        // 32
      {0, 0, nullptr},                        // 33
      {256, 54, "tq1_0"},                     // 34
      {256, 66, "tq2_0"},                     // 35
      {0, 0, nullptr},                        // 36
      {0, 0, nullptr},                        // 37
      {0, 0, nullptr},                        // 38
      {32, 17, "mxfp4"},                      // 39
  };
  if (ggml_type >= sizeof(kLayouts) / sizeof(kLayouts[0]) || kLayouts[ggml_type].name == nullptr)
    return false;
  *out = kLayouts[ggml_type];
  return true;
}

// ---- Mapping ---------------------------------------------------------------------------

Mapping::~Mapping() {
  if (addr_) munmap(addr_, size_);
}

Mapping::Mapping(Mapping&& other) noexcept : addr_(other.addr_), size_(other.size_) {
  other.addr_ = nullptr;
  other.size_ = 0;
}

Mapping& Mapping::operator=(Mapping&& other) noexcept {
  if (this != &other) {
    if (addr_) munmap(addr_, size_);
    addr_ = other.addr_;
    size_ = other.size_;
    other.addr_ = nullptr;
    other.size_ = 0;
  }
  return *this;
}

Status Mapping::map(const std::string& path, Mapping* out) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    return Status{DFSEL_IO_ERROR, cat("cannot open: ", std::generic_category().message(errno))};
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return Status{DFSEL_IO_ERROR, cat("cannot stat: ", std::generic_category().message(err))};
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status{DFSEL_IO_ERROR, "not a regular file"};
  }
  Mapping m;
  m.size_ = static_cast<size_t>(st.st_size);
  if (m.size_ > 0) {  // an empty file has nothing to map; the parser reports it as truncated
    void* p = mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Status{DFSEL_IO_ERROR,
                    cat("cannot map ", m.size_, " bytes: ", std::generic_category().message(err))};
    }
    m.addr_ = p;
  }
  ::close(fd);
  *out = std::move(m);
  return Status::success();
}

// ---- Parser ----------------------------------------------------------------------------

class Parser {
 public:
  Parser(const uint8_t* data, size_t size, File* file) : d_(data), size_(size), f_(file) {}

  Status run() {
    f_->data_ = d_;
    f_->size_ = size_;
    if (header() && metadata() && alignment() && tensor_infos() && tensor_data())
      return Status::success();
    return status_;
  }

 private:
  enum class Section { Header, Metadata, TensorInfo, Data, Tensor };

  std::string where() const {
    switch (section_) {
      case Section::Header:
        return "header";
      case Section::Metadata:
        if (index_ < 0) return "metadata";
        return cat("metadata ", index_, name_.empty() ? "" : " (" + quoted(name_) + ")");
      case Section::TensorInfo:
        if (index_ < 0) return "tensor info";
        return cat("tensor info ", index_, name_.empty() ? "" : " (" + quoted(name_) + ")");
      case Section::Data:
        return "data section";
      case Section::Tensor:
        return cat("tensor ", quoted(name_), " data");
    }
    return "";
  }

  bool fail(dfsel_status code, const std::string& what) {
    status_ = Status{code, where() + ": " + what};
    return false;
  }

  size_t left() const { return size_ - pos_; }

  bool need(size_t n, const char* field) {
    if (n <= left()) return true;
    return fail(DFSEL_FORMAT_ERROR, cat(field, " at byte ", pos_, " needs ", n,
                                        " bytes, but the file ends at byte ", size_));
  }

  bool u32(const char* field, uint32_t* v) {
    if (!need(4, field)) return false;
    *v = load_u32(d_ + pos_);
    pos_ += 4;
    return true;
  }

  bool u64(const char* field, uint64_t* v) {
    if (!need(8, field)) return false;
    *v = load_u64(d_ + pos_);
    pos_ += 8;
    return true;
  }

  bool string(const char* field, std::string_view* s) {
    const size_t at = pos_;
    uint64_t n;
    if (!u64(field, &n)) return false;
    if (n > left())
      return fail(DFSEL_FORMAT_ERROR,
                  cat(field, " length ", n, " at byte ", at, " runs past the end of the file (",
                      left(), " bytes left, the file has ", size_, ")"));
    *s = std::string_view(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(n));
    pos_ += static_cast<size_t>(n);
    return true;
  }

  bool check_bool(const uint8_t* p, uint64_t n) {
    for (uint64_t i = 0; i < n; ++i)
      if (p[i] > 1)
        return fail(DFSEL_FORMAT_ERROR, cat("bool value ", unsigned(p[i]), " at byte ",
                                            (p + i) - d_, " is neither 0 nor 1"));
    return true;
  }

  // Validates one value of type `type` at pos_ and moves past it.
  bool value(uint32_t type, size_t type_at, int depth) {
    if (type >= kValueTypeCount)
      return fail(DFSEL_FORMAT_ERROR, cat("value type ", type, " at byte ", type_at,
                                          " is not a GGUF value type (0..12)"));
    const ValueType t = static_cast<ValueType>(type);
    if (t == ValueType::String) {
      std::string_view s;
      return string("string value", &s);
    }
    if (t == ValueType::Array) return array(depth);
    const size_t n = fixed_size(t);
    if (!need(n, cat(value_type_name(type), " value").c_str())) return false;
    if (t == ValueType::Bool && !check_bool(d_ + pos_, 1)) return false;
    pos_ += n;
    return true;
  }

  bool array(int depth) {
    if (depth >= kMaxArrayDepth)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("arrays nest deeper than ", kMaxArrayDepth, " levels at byte ", pos_));
    const size_t type_at = pos_;
    uint32_t et;
    if (!u32("array element type", &et)) return false;
    if (et >= kValueTypeCount)
      return fail(DFSEL_FORMAT_ERROR, cat("array element type ", et, " at byte ", type_at,
                                          " is not a GGUF value type (0..12)"));
    const size_t count_at = pos_;
    uint64_t n;
    if (!u64("array length", &n)) return false;
    const ValueType t = static_cast<ValueType>(et);
    if (n > left() / min_size(t))
      return fail(DFSEL_FORMAT_ERROR,
                  cat("array length ", n, " at byte ", count_at, " (", value_type_name(et),
                      " elements) cannot fit in the ", left(), " bytes left in the file"));
    if (const size_t fs = fixed_size(t)) {
      if (t == ValueType::Bool && !check_bool(d_ + pos_, n)) return false;
      pos_ += static_cast<size_t>(n) * fs;
      return true;
    }
    for (uint64_t i = 0; i < n; ++i)
      if (!value(et, type_at, depth + 1)) return false;
    return true;
  }

  bool header() {
    section_ = Section::Header;
    if (!need(4, "magic")) return false;
    if (memcmp(d_, "GGUF", 4) != 0) {
      std::string got;
      append_escaped(std::string_view(reinterpret_cast<const char*>(d_), 4), 4, &got);
      return fail(DFSEL_FORMAT_ERROR, cat("magic at byte 0 is ", got, ", expected \"GGUF\""));
    }
    pos_ = 4;
    if (!u32("version", &f_->version_)) return false;
    if (f_->version_ != 2 && f_->version_ != 3)
      return fail(DFSEL_UNSUPPORTED,
                  cat("version ", f_->version_, " at byte 4 is not supported (GGUF 2 and 3 are)"));
    return u64("tensor count", &n_tensors_) && u64("key/value count", &n_kvs_);
  }

  bool metadata() {
    section_ = Section::Metadata;
    index_ = -1;
    if (n_kvs_ > left() / kMinKvBytes)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("key/value count ", n_kvs_, " (at byte 16) cannot fit in the ", left(),
                      " bytes after the header"));
    f_->kvs_.reserve(static_cast<size_t>(n_kvs_));
    for (uint64_t i = 0; i < n_kvs_; ++i) {
      index_ = static_cast<int64_t>(i);
      name_.clear();
      const size_t key_at = pos_;
      std::string_view key;
      if (!string("key", &key)) return false;
      name_ = std::string(key);
      if (key.empty()) return fail(DFSEL_FORMAT_ERROR, cat("key at byte ", key_at, " is empty"));
      const auto [it, fresh] = f_->key_index_.emplace(name_, f_->kvs_.size());
      if (!fresh)
        return fail(DFSEL_FORMAT_ERROR,
                    cat("key at byte ", key_at, " duplicates metadata ", it->second));
      const size_t type_at = pos_;
      uint32_t type;
      if (!u32("value type", &type)) return false;
      KeyValue kv{name_, static_cast<ValueType>(type), static_cast<ValueType>(type), 1, pos_};
      if (!value(type, type_at, 0)) return false;
      if (kv.type == ValueType::Array) {  // validated above: element type and length are there
        kv.elem_type = static_cast<ValueType>(load_u32(d_ + kv.offset));
        kv.count = load_u64(d_ + kv.offset + 4);
      }
      f_->kvs_.push_back(std::move(kv));
    }
    return true;
  }

  bool alignment() {
    const KeyValue* kv = f_->find_key("general.alignment");
    if (kv == nullptr) return true;
    section_ = Section::Metadata;
    index_ = static_cast<int64_t>(f_->key_index_.at(kv->key));
    name_ = kv->key;
    if (kv->type != ValueType::U32)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("has type ", value_type_name(uint32_t(kv->type)), ", expected u32"));
    const uint32_t a = load_u32(d_ + kv->offset);
    if (a == 0 || (a & (a - 1)) != 0)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("value ", a, " at byte ", kv->offset, " is not a power of two"));
    f_->alignment_ = a;
    return true;
  }

  bool tensor_infos() {
    section_ = Section::TensorInfo;
    index_ = -1;
    name_.clear();
    if (n_tensors_ > left() / kMinTensorInfoBytes)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("tensor count ", n_tensors_, " (at byte 8) cannot fit in the ", left(),
                      " bytes left at byte ", pos_));
    f_->tensors_.reserve(static_cast<size_t>(n_tensors_));
    for (uint64_t i = 0; i < n_tensors_; ++i) {
      index_ = static_cast<int64_t>(i);
      name_.clear();
      if (!tensor_info()) return false;
    }
    return true;
  }

  bool tensor_info() {
    TensorInfo t{};
    t.info_offset = pos_;
    std::string_view name;
    if (!string("name", &name)) return false;
    name_ = std::string(name);
    t.name = name_;
    const auto [it, fresh] = f_->tensor_index_.emplace(name_, f_->tensors_.size());
    if (!fresh)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("duplicate name: tensor info ", it->second, " has the same name"));
    const size_t dims_at = pos_;
    uint32_t n_dims;
    if (!u32("n_dims", &n_dims)) return false;
    if (n_dims < 1 || n_dims > 4)
      return fail(DFSEL_FORMAT_ERROR,
                  cat("n_dims ", n_dims, " at byte ", dims_at, " is outside [1, 4]"));
    t.n_dims = static_cast<int32_t>(n_dims);
    int64_t n_elems = 1;
    for (int d = 0; d < 4; ++d) t.ne[d] = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const size_t at = pos_;
      const std::string field = cat("ne[", d, "]");
      uint64_t v;
      if (!u64(field.c_str(), &v)) return false;
      if (v == 0 || v > uint64_t(std::numeric_limits<int64_t>::max()))
        return fail(DFSEL_FORMAT_ERROR,
                    cat(field, " = ", v, " at byte ", at, " is outside [1, 2^63 - 1]"));
      t.ne[d] = static_cast<int64_t>(v);
      if (__builtin_mul_overflow(n_elems, t.ne[d], &n_elems))
        return fail(DFSEL_FORMAT_ERROR,
                    cat("element count of ne = ", shape_string(t.ne, d + 1), " overflows 64 bits"));
    }
    const size_t type_at = pos_;
    if (!u32("ggml type", &t.type)) return false;
    TypeLayout lay;
    if (!type_layout(t.type, &lay))
      return fail(DFSEL_UNSUPPORTED,
                  cat("ggml type ", t.type, " at byte ", type_at, " is not a known tensor type"));
    if (t.ne[0] % lay.block_elems != 0)
      return fail(DFSEL_FORMAT_ERROR, cat("ne[0] = ", t.ne[0], " is not a multiple of the ",
                                          lay.name, " block size ", lay.block_elems));
    const uint64_t n_blocks = static_cast<uint64_t>(n_elems / lay.block_elems);
    if (n_blocks > std::numeric_limits<size_t>::max() / lay.block_bytes)
      return fail(DFSEL_FORMAT_ERROR, cat("byte size of ", lay.name, " ne = ",
                                          shape_string(t.ne, t.n_dims), " overflows 64 bits"));
    t.n_bytes = static_cast<size_t>(n_blocks) * lay.block_bytes;
    const size_t offset_at = pos_;
    if (!u64("offset", &t.offset)) return false;
    if (t.offset % f_->alignment_ != 0)
      return fail(DFSEL_FORMAT_ERROR, cat("offset ", t.offset, " at byte ", offset_at,
                                          " is not a multiple of the alignment ", f_->alignment_));
    f_->tensors_.push_back(std::move(t));
    return true;
  }

  bool tensor_data() {
    const size_t infos_end = pos_;
    const size_t a = f_->alignment_;
    f_->data_offset_ = (infos_end + a - 1) / a * a;
    if (f_->tensors_.empty()) return true;
    section_ = Section::Data;
    if (f_->data_offset_ > size_)
      return fail(
          DFSEL_FORMAT_ERROR,
          cat("starts at byte ", f_->data_offset_, " (the tensor infos end at byte ", infos_end,
              ", alignment ", a, "), past the end of the file (", size_, " bytes)"));
    const size_t room = size_ - f_->data_offset_;
    section_ = Section::Tensor;
    for (TensorInfo& t : f_->tensors_) {
      name_ = t.name;
      if (t.offset > room || t.n_bytes > room - t.offset)
        return fail(DFSEL_FORMAT_ERROR,
                    cat(t.n_bytes, " bytes at offset ", t.offset,
                        " of the data section (which starts at byte ", f_->data_offset_,
                        ") run past the end of the file (", size_, " bytes)"));
      t.file_offset = f_->data_offset_ + static_cast<size_t>(t.offset);
    }
    return true;
  }

  const uint8_t* d_;
  size_t size_;
  File* f_;
  size_t pos_ = 0;
  uint64_t n_tensors_ = 0;
  uint64_t n_kvs_ = 0;
  Status status_;
  Section section_ = Section::Header;
  int64_t index_ = -1;
  std::string name_;
};

// ---- File ------------------------------------------------------------------------------

Status File::parse(const uint8_t* data, size_t size, File* out) {
  try {
    File f;
    Status s = Parser(data, size, &f).run();
    if (s.ok()) *out = std::move(f);
    return s;
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, "out of memory while reading the metadata"};
  }
}

Status File::open(const std::string& path, File* out) {
  try {
    Mapping m;
    Status s = Mapping::map(path, &m);
    if (s.ok()) {
      File f;
      s = parse(m.data(), m.size(), &f);
      if (s.ok()) {
        f.map_ = std::move(m);
        *out = std::move(f);
        return s;
      }
    }
    s.msg = path + ": " + s.msg;
    return s;
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, path + ": out of memory"};
  }
}

const KeyValue* File::find_key(std::string_view key) const {
  const auto it = key_index_.find(std::string(key));
  return it == key_index_.end() ? nullptr : &kvs_[it->second];
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  const auto it = tensor_index_.find(std::string(name));
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

bool File::read_int(const KeyValue& kv, int64_t* out) const {
  const uint8_t* p = data_ + kv.offset;
  switch (kv.type) {
    case ValueType::U8:
      *out = p[0];
      return true;
    case ValueType::I8:
      *out = static_cast<int8_t>(p[0]);
      return true;
    case ValueType::U16:
      *out = load_u16(p);
      return true;
    case ValueType::I16:
      *out = static_cast<int16_t>(load_u16(p));
      return true;
    case ValueType::U32:
      *out = load_u32(p);
      return true;
    case ValueType::I32:
      *out = static_cast<int32_t>(load_u32(p));
      return true;
    case ValueType::I64:
      *out = static_cast<int64_t>(load_u64(p));
      return true;
    case ValueType::U64: {
      const uint64_t v = load_u64(p);
      if (v > uint64_t(std::numeric_limits<int64_t>::max())) return false;
      *out = static_cast<int64_t>(v);
      return true;
    }
    default:
      return false;
  }
}

bool File::read_float(const KeyValue& kv, double* out) const {
  if (kv.type == ValueType::F32) {
    *out = bits_to_float(load_u32(data_ + kv.offset));
    return true;
  }
  if (kv.type == ValueType::F64) {
    const uint64_t u = load_u64(data_ + kv.offset);
    memcpy(out, &u, 8);
    return true;
  }
  return false;
}

bool File::read_bool(const KeyValue& kv, bool* out) const {
  if (kv.type != ValueType::Bool) return false;
  *out = data_[kv.offset] != 0;
  return true;
}

bool File::read_string(const KeyValue& kv, std::string_view* out) const {
  if (kv.type != ValueType::String) return false;
  const uint64_t n = load_u64(data_ + kv.offset);
  *out = std::string_view(reinterpret_cast<const char*>(data_ + kv.offset + 8), size_t(n));
  return true;
}

namespace {

constexpr uint64_t kRenderElems = 8;  // array elements shown before "..."

// Size in bytes of the validated value of type t at p.
size_t value_bytes(const uint8_t* p, ValueType t) {
  if (const size_t fs = fixed_size(t)) return fs;
  if (t == ValueType::String) return 8 + size_t(load_u64(p));
  const ValueType et = static_cast<ValueType>(load_u32(p));
  const uint64_t n = load_u64(p + 4);
  if (const size_t fs = fixed_size(et)) return 12 + size_t(n) * fs;
  size_t off = 12;
  for (uint64_t i = 0; i < n; ++i) off += value_bytes(p + off, et);
  return off;
}

void render_value(const uint8_t* p, ValueType t, size_t max_chars, std::string* out) {
  char buf[40];
  switch (t) {
    case ValueType::U8:
      *out += std::to_string(p[0]);
      return;
    case ValueType::I8:
      *out += std::to_string(static_cast<int8_t>(p[0]));
      return;
    case ValueType::U16:
      *out += std::to_string(load_u16(p));
      return;
    case ValueType::I16:
      *out += std::to_string(static_cast<int16_t>(load_u16(p)));
      return;
    case ValueType::U32:
      *out += std::to_string(load_u32(p));
      return;
    case ValueType::I32:
      *out += std::to_string(static_cast<int32_t>(load_u32(p)));
      return;
    case ValueType::U64:
      *out += std::to_string(load_u64(p));
      return;
    case ValueType::I64:
      *out += std::to_string(static_cast<int64_t>(load_u64(p)));
      return;
    case ValueType::Bool:
      *out += p[0] ? "true" : "false";
      return;
    case ValueType::F32:
      snprintf(buf, sizeof buf, "%.9g", double(bits_to_float(load_u32(p))));
      *out += buf;
      return;
    case ValueType::F64: {
      double v;
      memcpy(&v, p, 8);
      snprintf(buf, sizeof buf, "%.17g", v);
      *out += buf;
      return;
    }
    case ValueType::String:
      append_escaped(std::string_view(reinterpret_cast<const char*>(p + 8), size_t(load_u64(p))),
                     max_chars, out);
      return;
    case ValueType::Array: {
      const ValueType et = static_cast<ValueType>(load_u32(p));
      const uint64_t n = load_u64(p + 4);
      const uint8_t* e = p + 12;
      *out += "[";
      for (uint64_t i = 0; i < n; ++i) {
        if (i == kRenderElems || out->size() > max_chars) {
          *out += cat(", ... ", n, " items");
          break;
        }
        if (i) *out += ", ";
        render_value(e, et, max_chars, out);
        e += value_bytes(e, et);
      }
      *out += "]";
      return;
    }
  }
}

}  // namespace

std::string File::render(const KeyValue& kv, size_t max_chars) const {
  std::string out;
  render_value(data_ + kv.offset, kv.type, max_chars, &out);
  return out;
}

// ---- K-quant dequantisation ------------------------------------------------------------
//
// Q4_K, 144 bytes per 256 values: f16 d, f16 dmin, 12 bytes holding eight 6-bit scales and
// eight 6-bit mins, 128 bytes of 4-bit quants. Sub-block s (32 values) is
// d * scale[s] * q - dmin * min[s]; sub-blocks 2g and 2g+1 share quant bytes 32g..32g+31,
// low nibbles first. Scale/min j < 4 are the low 6 bits of bytes j / j+4; j >= 4 take their
// low 4 bits from byte j+4 (scale low nibble, min high nibble) and their top 2 bits from the
// top bits of bytes j-4 (scale) and j (min).
//
// Q6_K, 210 bytes per 256 values: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8
// scales (one per 16 values), f16 d. Value = d * scale * (q - 32), q in [0, 64).

namespace {

void q4_k_scale_min(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

void dequantize_q4_k(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQKBlock; ++b, src += kQ4KBytes, out += kQKBlock) {
    const float d = f16_to_float(load_u16(src));
    const float dmin = f16_to_float(load_u16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + 16;
    for (int g = 0; g < 4; ++g) {
      int sc0, m0, sc1, m1;
      q4_k_scale_min(scales, 2 * g, &sc0, &m0);
      q4_k_scale_min(scales, 2 * g + 1, &sc1, &m1);
      const float d0 = d * float(sc0), o0 = dmin * float(m0);
      const float d1 = d * float(sc1), o1 = dmin * float(m1);
      for (int l = 0; l < 32; ++l) {
        out[64 * g + l] = d0 * float(qs[32 * g + l] & 0x0f) - o0;
        out[64 * g + 32 + l] = d1 * float(qs[32 * g + l] >> 4) - o1;
      }
    }
  }
}

void dequantize_q6_k(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQKBlock; ++b, src += kQ6KBytes, out += kQKBlock) {
    const float d = f16_to_float(load_u16(src + 208));
    for (int h = 0; h < 2; ++h) {  // two halves of 128 values
      const uint8_t* ql = src + 64 * h;
      const uint8_t* qh = src + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192 + 8 * h);
      float* y = out + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q0);
        y[l + 32] = d * float(sc[is + 2]) * float(q1);
        y[l + 64] = d * float(sc[is + 4]) * float(q2);
        y[l + 96] = d * float(sc[is + 6]) * float(q3);
      }
    }
  }
}

// ---- Selector --------------------------------------------------------------------------

namespace {

Status format_error(std::string what) { return Status{DFSEL_FORMAT_ERROR, std::move(what)}; }

// A required integer key within [lo, hi].
Status required_int(const File& f, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const KeyValue* kv = f.find_key(key);
  if (kv == nullptr) return format_error(cat("metadata key '", key, "' is missing"));
  if (!f.read_int(*kv, out)) {
    if (kv->type == ValueType::U64)
      return format_error(cat(key, " = ", f.render(*kv), " is outside [", lo, ", ", hi, "]"));
    return format_error(
        cat(key, " has type ", value_type_name(uint32_t(kv->type)), ", expected an integer"));
  }
  if (*out < lo || *out > hi)
    return format_error(cat(key, " = ", *out, " is outside [", lo, ", ", hi, "]"));
  return Status::success();
}

// An optional float key, left as is when absent.
Status optional_float(const File& f, const char* key, double* out) {
  const KeyValue* kv = f.find_key(key);
  if (kv == nullptr) return Status::success();
  if (!f.read_float(*kv, out))
    return format_error(
        cat(key, " has type ", value_type_name(uint32_t(kv->type)), ", expected f32 or f64"));
  if (!std::isfinite(*out) || std::fabs(*out) > double(std::numeric_limits<float>::max()))
    return format_error(cat(key, " = ", f.render(*kv), " is not a finite float"));
  return Status::success();
}

bool selector_type(uint32_t t) {
  return t == DFSEL_TYPE_F32 || t == DFSEL_TYPE_F16 || t == DFSEL_TYPE_BF16 ||
         t == DFSEL_TYPE_Q8_0 || t == DFSEL_TYPE_Q4_K || t == DFSEL_TYPE_Q6_K;
}

Status find_selector_tensor(const File& f, const char* name, const TensorInfo** out) {
  const TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return format_error(cat("tensor '", name, "' is missing"));
  if (!selector_type(t->type)) {
    TypeLayout lay;
    type_layout(t->type, &lay);  // parsing accepted known types only
    return Status{DFSEL_UNSUPPORTED,
                  cat("tensor '", name, "' has ggml type ", t->type, " (", lay.name,
                      "); the selector reads f32, f16, bf16, q8_0, q4_K and q6_K")};
  }
  if (t->ne[2] != 1 || t->ne[3] != 1)
    return format_error(cat("tensor '", name, "' has shape ", shape_string(t->ne, t->n_dims),
                            ", expected two dimensions"));
  *out = t;
  return Status::success();
}

// Rows [r0, r1) of a two-dimensional tensor as a view: into the file where the selector reads
// the stored type directly and the data is aligned for it, else into *owned.
void view_rows(const File& f, const TensorInfo& t, int64_t r0, int64_t r1,
               std::vector<uint16_t>* owned, dfsel_tensor* v) {
  const int64_t n = t.ne[0];
  const int64_t rows = r1 - r0;
  TypeLayout lay;
  type_layout(t.type, &lay);
  const size_t src_row = size_t(n / lay.block_elems) * lay.block_bytes;
  const uint8_t* src = f.tensor_data(t) + size_t(r0) * src_row;
  *v = dfsel_tensor{};
  if (t.type == DFSEL_TYPE_Q4_K || t.type == DFSEL_TYPE_Q6_K) {
    owned->resize(size_t(rows) * size_t(n));
    std::vector<float> row(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r) {
      if (t.type == DFSEL_TYPE_Q4_K)
        dequantize_q4_k(src + size_t(r) * src_row, n, row.data());
      else
        dequantize_q6_k(src + size_t(r) * src_row, n, row.data());
      uint16_t* dst = owned->data() + size_t(r) * size_t(n);
      for (int64_t e = 0; e < n; ++e) dst[e] = float_to_bf16(row[size_t(e)]);
    }
    v->data = owned->data();
    v->type = DFSEL_TYPE_BF16;
    v->nb[0] = 2;
    v->nb[1] = row_bytes(DFSEL_TYPE_BF16, n);
  } else {
    const dfsel_type type = static_cast<dfsel_type>(t.type);
    const size_t bytes = size_t(rows) * row_bytes(type, n);
    const size_t align = type == DFSEL_TYPE_F32 ? 4 : 2;
    if (reinterpret_cast<uintptr_t>(src) % align != 0) {  // general.alignment 1 or 2
      owned->resize(bytes / 2);
      memcpy(owned->data(), src, bytes);
      src = reinterpret_cast<const uint8_t*>(owned->data());
    }
    v->data = src;
    v->type = type;
    v->nb[0] = lay.block_bytes;
    v->nb[1] = row_bytes(type, n);
  }
  v->ne[0] = n;
  v->ne[1] = rows;
  v->ne[2] = 1;
  v->ne[3] = 1;
  v->nb[2] = v->nb[1] * size_t(rows);
  v->nb[3] = v->nb[2];
}

// Checks the metadata and the selector tensors against each other; fills cfg and range.
Status check_selector(const File& f, int64_t v_begin, int64_t v_end, dfsel_config* cfg,
                      int64_t* range) {
  const KeyValue* arch = f.find_key("general.architecture");
  std::string_view arch_name;
  if (arch == nullptr)
    return format_error(
        "metadata key 'general.architecture' is missing (a DFlash2 draft has \"dflash\")");
  if (!f.read_string(*arch, &arch_name) || arch_name != "dflash")
    return format_error(cat("general.architecture is ", f.render(*arch), ", expected \"dflash\""));
  constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();
  int64_t rank, top_k, block_size, n_embd;
  DFSEL_TRY(required_int(f, "dflash.selector_rank", 1, kI32, &rank));
  DFSEL_TRY(required_int(f, "dflash.selector_top_k", 1, kI32, &top_k));
  DFSEL_TRY(required_int(f, "dflash.block_size", 2, kI32, &block_size));
  DFSEL_TRY(required_int(f, "dflash.embedding_length", 1, kI32, &n_embd));
  double scale = 1.0, softcap = 0.0;
  DFSEL_TRY(optional_float(f, "dflash.logit_scale", &scale));
  DFSEL_TRY(optional_float(f, "dflash.final_logit_softcapping", &softcap));
  if (!(scale > 0)) return format_error(cat("dflash.logit_scale = ", scale, " is not positive"));

  const TensorInfo *prev, *next, *hidden;
  DFSEL_TRY(find_selector_tensor(f, Selector::kPredecessor, &prev));
  DFSEL_TRY(find_selector_tensor(f, Selector::kSuccessor, &next));
  DFSEL_TRY(find_selector_tensor(f, Selector::kHidden, &hidden));
  for (const TensorInfo* t : {prev, next})
    if (t->ne[0] != rank)
      return format_error(cat("tensor '", t->name, "' has shape ", shape_string(t->ne, t->n_dims),
                              ", expected {R, V} with R = dflash.selector_rank = ", rank));
  const int64_t n_vocab = prev->ne[1];
  if (next->ne[1] != n_vocab)
    return format_error(cat("tensor '", next->name, "' has V = ", next->ne[1], " rows but '",
                            prev->name, "' has ", n_vocab));
  if (hidden->ne[0] != n_embd || hidden->ne[1] != rank)
    return format_error(cat("tensor '", hidden->name, "' has shape ",
                            shape_string(hidden->ne, hidden->n_dims), ", expected {n_embd, R} = {",
                            n_embd, ", ", rank, "}"));
  if (top_k > n_vocab)
    return format_error(
        cat("dflash.selector_top_k = ", top_k, " exceeds the vocabulary size V = ", n_vocab));
  if (v_begin == -1 && v_end == -1) {
    v_begin = 0;
    v_end = n_vocab;
  } else if (v_begin < 0 || v_begin >= v_end || v_end > n_vocab) {
    return Status{DFSEL_INVALID_ARGUMENT, cat("vocabulary range [v_begin, v_end) = [", v_begin,
                                              ", ", v_end, ") is not a non-empty range in [0, ",
                                              n_vocab, ") (-1, -1 selects all of it)")};
  }
  cfg->n_vocab = n_vocab;
  cfg->n_embd = n_embd;
  cfg->rank = int32_t(rank);
  cfg->top_k = int32_t(top_k);
  cfg->block_size = int32_t(block_size);
  cfg->logit_scale = float(scale);
  cfg->softcap = float(softcap);
  cfg->max_blocks = 0;
  range[0] = v_begin;
  range[1] = v_end;
  return Status::success();
}

}  // namespace

Status Selector::load(const File& file, int64_t v_begin, int64_t v_end, Selector* out) {
  try {
    Selector sel;
    int64_t range[2];
    DFSEL_TRY(check_selector(file, v_begin, v_end, &sel.config_, range));
    sel.v_begin_ = range[0];
    sel.v_end_ = range[1];
    view_rows(file, *file.find_tensor(kPredecessor), range[0], range[1], &sel.owned_[0],
              &sel.e_prev_);
    view_rows(file, *file.find_tensor(kSuccessor), range[0], range[1], &sel.owned_[1],
              &sel.e_next_);
    const TensorInfo& h = *file.find_tensor(kHidden);
    view_rows(file, h, 0, h.ne[1], &sel.owned_[2], &sel.w_h_);
    *out = std::move(sel);
    return Status::success();
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, "out of memory while dequantising the selector tensors"};
  }
}

}  // namespace dfsel::gguf
