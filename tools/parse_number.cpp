#include "parse_number.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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
  const double x = std::strtod(v, &end);
  if (end == v || *end != '\0' || v[0] == ' ' || v[0] == '\t' || !std::isfinite(x)) {
    *err = flag + " takes a number such as 0.8, not '" + v + "'";
    return false;
  }
  if (x < lo || x > hi) {
    char range[64];  // %g: 1e+30, not std::to_string's 1000000000000000019884624838656.000000
    std::snprintf(range, sizeof range, "[%g, %g]", lo, hi);
    *err = flag + " = " + v + " is outside " + range;
    return false;
  }
  *out = (float)x;
  return true;
}

}  // namespace dfsel::tools
