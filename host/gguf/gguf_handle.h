// The dfsel_gguf handle behind include/dfsel/gguf.h and the DSpark calls of dspark.h: the
// parsed file and the view of its draft (DFlash2 selector or DSpark Markov head), and how the
// C entry points check their arguments and keep the handle's last error.
#pragma once

#include <cstring>
#include <string>

#include "dfsel/gguf.h"
#include "host/gguf/gguf_dspark.h"
#include "host/gguf/gguf_file.h"
#include "host/gguf/gguf_selector.h"

struct dfsel_gguf {
  dfsel::gguf::File file;
  dfsel::gguf::Selector selector;  // a DFlash2 draft
  dfsel::gguf::DSparkDraft dspark; // a DSpark draft (is_dspark)
  bool is_dspark = false;
  mutable std::string last_error;  // calls on one handle from several threads race on it
};

namespace dfsel::gguf {

inline void copy_message(const std::string& s, char* msg, size_t msg_len) {
  if (msg == nullptr || msg_len == 0) return;
  const size_t n = s.size() < msg_len - 1 ? s.size() : msg_len - 1;
  memcpy(msg, s.data(), n);
  msg[n] = '\0';
}

inline dfsel_status fail(const dfsel_gguf* g, dfsel_status s, std::string what) {
  if (g != nullptr) {
    try {
      g->last_error = std::move(what);
    } catch (...) {
    }
  }
  return s;
}

// Checks the handle and one output pointer; sets the last error on failure.
inline dfsel_status check(const dfsel_gguf* g, const char* fn, const void* out, const char* out_name) {
  if (g == nullptr) return DFSEL_INVALID_ARGUMENT;
  if (out == nullptr) return fail(g, DFSEL_INVALID_ARGUMENT, std::string(fn) + ": " + out_name + " is NULL");
  return DFSEL_SUCCESS;
}

inline dfsel_status check_index(const dfsel_gguf* g, const char* fn, int64_t i, size_t count) {
  if (i < 0 || static_cast<uint64_t>(i) >= count)
    return fail(g, DFSEL_INVALID_ARGUMENT,
                std::string(fn) + ": index " + std::to_string(i) + " is outside [0, " + std::to_string(count) + ")");
  return DFSEL_SUCCESS;
}

// The call reads a draft of the other kind: say which call reads this one.
inline dfsel_status check_kind(const dfsel_gguf* g, const char* fn, bool dspark) {
  if (g->is_dspark == dspark) return DFSEL_SUCCESS;
  return fail(g, DFSEL_INVALID_ARGUMENT,
              std::string(fn) + ": the draft is a " + (g->is_dspark ? "DSpark draft (markov_* tensors); use dfsel_gguf_dspark_desc"
                                                                    : "DFlash2 draft (selector_* tensors); use dfsel_gguf_config and dfsel_gguf_tensors"));
}

}  // namespace dfsel::gguf
