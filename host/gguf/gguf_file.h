// GGUF v2/v3 reader (SPEC section 6.6): the value and tensor types, the read-only mapping and
// File, which validates every field before anything reads it. A malformed file yields
// DFSEL_FORMAT_ERROR, an unknown version or ggml type DFSEL_UNSUPPORTED, and a message that
// names the section, the field, its value and its byte offset.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel::gguf {

// Metadata value types, numbered as in the file.
enum class ValueType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12
};
constexpr uint32_t kValueTypeCount = 13;

// "u8" ... "f64"; nullptr for an id that is not a GGUF type.
const char* value_type_name(uint32_t type);

// Block layout of a ggml type: block_bytes bytes hold block_elems elements.
struct TypeLayout {
  int64_t block_elems;
  size_t block_bytes;
  const char* name;
};
// False for an id that is not a ggml type (or one that files may no longer carry).
bool type_layout(uint32_t ggml_type, TypeLayout* out);

struct KeyValue {
  std::string key;
  ValueType type;
  ValueType elem_type;  // arrays: the element type; otherwise == type
  uint64_t count;       // arrays: the number of elements; otherwise 1
  size_t offset;        // byte offset of the value in the file (after its type field)
};

struct TensorInfo {
  std::string name;
  uint32_t type;       // ggml type id
  int32_t n_dims;      // 1..4
  int64_t ne[4];       // dims past n_dims are 1
  uint64_t offset;     // as stored: relative to the data section
  size_t file_offset;  // absolute byte offset of the data
  size_t n_bytes;
  size_t info_offset;  // byte offset of the tensor's info record, for messages
};

// A read-only memory mapping of a whole file.
class Mapping {
 public:
  Mapping() = default;
  ~Mapping();
  Mapping(Mapping&& other) noexcept;
  Mapping& operator=(Mapping&& other) noexcept;
  Mapping(const Mapping&) = delete;
  Mapping& operator=(const Mapping&) = delete;

  // DFSEL_IO_ERROR when the file cannot be opened, is not a regular file or cannot be mapped.
  static Status map(const std::string& path, Mapping* out);

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  void* addr_ = nullptr;
  size_t size_ = 0;
};

class File {
 public:
  File() = default;
  File(File&&) noexcept = default;
  File& operator=(File&&) noexcept = default;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Maps path and parses it. Messages start with the path.
  static Status open(const std::string& path, File* out);
  // Parses bytes that the caller keeps alive for the lifetime of out.
  static Status parse(const uint8_t* data, size_t size, File* out);
  // Copies the metadata and tensor infos (the bytes before the data section) and lets the
  // mapping go: the file is not read again, and tensor_data() may no longer be called.
  void detach();

  uint32_t version() const { return version_; }
  uint32_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }

  const std::vector<KeyValue>& metadata() const { return kvs_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const KeyValue* find_key(std::string_view key) const;
  const TensorInfo* find_tensor(std::string_view name) const;
  const uint8_t* tensor_data(const TensorInfo& t) const { return data_ + t.file_offset; }

  // Scalar reads; false when the value has another type or does not fit the output.
  // read_int accepts every integer type, read_float F32 and F64.
  bool read_int(const KeyValue& kv, int64_t* out) const;
  bool read_float(const KeyValue& kv, double* out) const;
  bool read_bool(const KeyValue& kv, bool* out) const;
  bool read_string(const KeyValue& kv, std::string_view* out) const;

  // A short human-readable rendering: numbers, quoted strings (escaped, cut after about
  // max_chars characters), arrays as [a, b, ...] with the first few elements.
  std::string render(const KeyValue& kv, size_t max_chars = 64) const;

 private:
  friend class Parser;

  Mapping map_;
  std::vector<uint8_t> header_copy_;  // after detach(): what data_ points to
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  uint32_t alignment_ = 32;  // general.alignment, 32 when absent
  size_t data_offset_ = 0;
  std::vector<KeyValue> kvs_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> key_index_;
  std::unordered_map<std::string, size_t> tensor_index_;
};

}  // namespace dfsel::gguf
