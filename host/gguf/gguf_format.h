// The GGUF encoding as the reader, the renderer and the selector view share it: unaligned
// little-endian loads, the sizes of metadata values, and how messages show shapes and names
// taken from a file. Private to host/gguf_*.cpp.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <cstring>
#include <sstream>
#include <string>
#include <string_view>

#include "host/gguf/gguf_file.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the GGUF reader assumes a little-endian host"
#endif

namespace dfsel::gguf {

template <typename... Args>
std::string cat(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

inline uint32_t load_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

inline uint64_t load_u64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

// Bytes of one element of a fixed-size value type; 0 for strings and arrays.
inline size_t fixed_size(ValueType t) {
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
inline size_t min_size(ValueType t) {
  if (t == ValueType::String) return 8;
  if (t == ValueType::Array) return 12;
  return fixed_size(t);
}

// "{ne0, ne1, ...}" of the first n_dims dimensions.
std::string shape_string(const int64_t* ne, int n_dims);

// s between quote characters, cut after about max_chars characters (never inside a UTF-8
// sequence). Control bytes, C1 controls and bytes that do not form well-formed UTF-8 are
// written as \xNN, so that the result is printable UTF-8 whatever the file held.
void append_escaped(std::string_view s, size_t max_chars, std::string* out, char quote = '"');

// A key or tensor name from the file, as messages show it: 'name', cut after 96 characters.
std::string quoted(std::string_view name);

}  // namespace dfsel::gguf
