// Integers read from the environment variables that tune a CUDA plan at creation
// (DFSEL_MAX_CLUSTER, DFSEL_DSPARK_TILE): decimal, range-checked before anything is narrowed,
// so that a value past a long's range, or one that wraps an int to a valid value, is refused.
#pragma once

#include <cerrno>
#include <cstdlib>

namespace dfsel {

// Reads a decimal integer in [lo, hi] at the start of s (a sign allowed, no leading space) into
// *out; returns the character after it, or nullptr when there is none or it is out of range.
inline const char* read_env_int(const char* s, long lo, long hi, int* out) {
  if (!((*s >= '0' && *s <= '9') || *s == '-' || *s == '+')) return nullptr;
  char* end = nullptr;
  errno = 0;
  const long v = std::strtol(s, &end, 10);
  if (end == s || errno == ERANGE || v < lo || v > hi) return nullptr;
  *out = (int)v;
  return end;
}

}  // namespace dfsel
