// A status with the message that names the argument and the value (STYLE: every failure
// is a dfsel_status plus a human sentence).
#pragma once

#include <cstdarg>
#include <cstdio>
#include <string>

#include "dfsel/dfsel.h"

namespace dfsel {

struct Status {
  dfsel_status code = DFSEL_SUCCESS;
  std::string msg;

  bool ok() const { return code == DFSEL_SUCCESS; }
  static Status success() { return Status{}; }
};

#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
inline Status fail(dfsel_status code, const char* fmt, ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  return Status{code, buf};
}

#define DFSEL_TRY(expr)             \
  do {                              \
    ::dfsel::Status s_ = (expr);    \
    if (!s_.ok()) return s_;        \
  } while (0)

}  // namespace dfsel
