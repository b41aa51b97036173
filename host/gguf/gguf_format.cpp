// The tables of GGUF value types and ggml tensor types, and the text of messages.
#include <cstdio>

#include "host/gguf/gguf_format.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

constexpr size_t kNameChars = 96;  // names longer than this are cut in messages

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
      {kQKBlock, 144, "q4_K"},                // 12
      {256, 176, "q5_K"},                     // 13
      {kQKBlock, 210, "q6_K"},                // 14
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
      {64, 36, "nvfp4"},                      // 40
      {128, 18, "q1_0"},                      // 41
      {64, 18, "q2_0"},                       // 42
  };
  if (ggml_type >= sizeof(kLayouts) / sizeof(kLayouts[0]) || kLayouts[ggml_type].name == nullptr)
    return false;
  *out = kLayouts[ggml_type];
  return true;
}

std::string shape_string(const int64_t* ne, int n_dims) {
  std::string s = "{";
  for (int d = 0; d < n_dims; ++d) s += (d ? ", " : "") + std::to_string(ne[d]);
  return s + "}";
}

namespace {

// Bytes of the well-formed UTF-8 character at s[i] (2 to 4), or 0: a stray continuation byte,
// a truncated or overlong sequence, a surrogate, a code point past U+10FFFF, or a C1 control
// (U+0080 to U+009F, which some terminals obey like ESC sequences).
size_t utf8_char(std::string_view s, size_t i) {
  const uint8_t c = static_cast<uint8_t>(s[i]);
  size_t n;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) n = 2, cp = c & 0x1f;
  else if (c >= 0xe0 && c <= 0xef) n = 3, cp = c & 0x0f;
  else if (c >= 0xf0 && c <= 0xf4) n = 4, cp = c & 0x07;
  else return 0;
  if (i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = static_cast<uint8_t>(s[i + k]);
    if ((b & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3f);
  }
  static const uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff) || cp <= 0x9f) return 0;
  return n;
}

}  // namespace

void append_escaped(std::string_view s, size_t max_chars, std::string* out, char quote) {
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
    } else if (c >= 0x80) {
      const size_t len = utf8_char(s.substr(0, n), i);
      if (len > 0) {
        out->append(s.data() + i, len);
        i += len - 1;
      } else {
        char buf[8];
        snprintf(buf, sizeof buf, "\\x%02x", c);
        *out += buf;
      }
    } else {
      out->push_back(static_cast<char>(c));
    }
  }
  out->push_back(quote);
  if (cut) *out += "...";
}

std::string quoted(std::string_view name) {
  std::string out;
  append_escaped(name, kNameChars, &out, '\'');
  return out;
}

}  // namespace dfsel::gguf
