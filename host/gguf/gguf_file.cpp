// File's lookups and the typed reads and renderings of metadata values, all over a file the
// parser has validated (gguf_reader.cpp): lengths and counts are known to fit.
#include <cstdio>
#include <cstring>
#include <limits>

#include "host/gguf/gguf_file.h"
#include "host/gguf/gguf_format.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

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

}  // namespace dfsel::gguf
