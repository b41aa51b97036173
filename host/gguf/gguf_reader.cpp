// GGUF v2/v3 reader (SPEC section 6.6). Layout of a file, all little-endian:
//   header       "GGUF", u32 version, u64 tensor count, u64 key/value count
//   metadata     per pair: string key, u32 value type, value
//   tensor infos per tensor: string name, u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset
//   data         starts at the end of the infos rounded up to general.alignment (default 32);
//                tensor offsets are relative to it
// A string is a u64 byte length and the bytes; an array a u32 element type, a u64 length and
// the elements. Every length and count is checked against the bytes left before it is used.
#include <cstring>
#include <limits>
#include <new>

#include "host/gguf/gguf_file.h"
#include "host/gguf/gguf_format.h"

namespace dfsel::gguf {

namespace {

// The fewest bytes a key/value pair (empty key, type, one-byte value) and a tensor info
// (empty name, n_dims, one ne, type, offset) take: bounds on counts before anything is read.
constexpr size_t kMinKvBytes = 8 + 4 + 1;
constexpr size_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
constexpr int kMaxArrayDepth = 8;

}  // namespace

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

}  // namespace dfsel::gguf
