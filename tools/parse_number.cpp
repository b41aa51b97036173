#include "parse_number.h"

#include <cerrno>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace dfsel::tools {

bool parse_int(const std::string& flag, const char* v, long long lo, long long hi, long long* out, std::string* err) {
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v, &end, 10);
  if (end == v || *end != '\0' || v[0] == ' ' || v[0] == '\t' || v[0] == '+') {
    *err = flag + " takes a whole number, not '" + v + "'";
    return false;
  }
  if (errno == ERANGE || x < lo || x > hi) {
    *err = flag + " = " + v + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
    return false;
  }
  *out = x;
  return true;
}

bool parse_u64(const std::string& flag, const char* v, uint64_t* out, std::string* err) {
  char* end = nullptr;
  errno = 0;
  if (v[0] < '0' || v[0] > '9') {
    *err = flag + " takes a whole number >= 0, not '" + v + "'";
    return false;
  }
  const unsigned long long x = std::strtoull(v, &end, 10);
  if (*end != '\0') {
    *err = flag + " takes a whole number >= 0, not '" + v + "'";
    return false;
  }
  if (errno == ERANGE) {
    *err = flag + " = " + v + " is larger than 2^64 - 1";
    return false;
  }
  *out = x;
  return true;
}

bool parse_float(const std::string& flag, const char* v, double lo, double hi, float* out, std::string* err) {
  char* end = nullptr;
  errno = 0;
  // Decimal only: strtod would also take hex floats (0x1p-3), inf, nan and leading blanks.
  const bool decimal = *v != '\0' && std::strspn(v, "0123456789.eE+-") == std::strlen(v);
  const double x = decimal ? std::strtod(v, &end) : 0.0;
  if (!decimal || end == v || *end != '\0' || !std::isfinite(x)) {
    *err = flag + " takes a decimal number such as 0.8, not '" + v + "'";
    return false;
  }
  char range[64];  // %g: 3.40282e+38, not std::to_string's 340282346638528859811704183484516925440.000000
  if (x < lo || x > hi) {
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    *err = flag + " = " + v + " is outside " + range;
    return false;
  }
  // A value that is not 0 must not become 0: 1e-50 would be read as greedy, or no scale.
  if (x != 0.0 && (float)x == 0.0f) {
    std::snprintf(range, sizeof range, "%g", (double)FLT_TRUE_MIN);
    *err = flag + " = " + v + " is below the smallest positive float, " + range + ", and would be read as 0; give 0 "
           "or a larger value";
    return false;
  }
  *out = (float)x;
  return true;
}

}  // namespace dfsel::tools
