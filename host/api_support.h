// What every C entry point shares (host/api.cpp, host/dspark_api.cpp): a status becomes a
// dfsel_status and a message, and no exception crosses the C ABI.
#pragma once

#include <algorithm>
#include <cstring>
#include <new>

#include "host/status.h"

namespace dfsel {

inline void copy_msg(const Status& s, char* msg, size_t msg_len) {
  if (!msg || msg_len == 0) return;
  const size_t n = std::min(msg_len - 1, s.msg.size());
  std::memcpy(msg, s.msg.data(), n);
  msg[n] = '\0';
}

// Runs f, turning an escaping exception into a status; `what` names the call.
template <class F>
Status guarded(const char* what, F f) {
  try {
    return f();
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "allocation failed during %s", what);
  } catch (...) {
    return fail(DFSEL_INTERNAL_ERROR, "unexpected exception during %s", what);
  }
}

// Keeps s as the plan's last error; a failure to store the message must not escape either.
template <class Plan>
dfsel_status record(Plan* plan, const Status& s) {
  if (plan) {
    try {
      plan->last_error = s.msg;
    } catch (...) {
      plan->last_error.clear();
    }
  }
  return s.code;
}

}  // namespace dfsel
