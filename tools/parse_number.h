// Numbers given on a command line, parsed whole: a whole number or a finite decimal with
// nothing before or after it, within a range. One sentence naming the flag and the value on
// failure. Shared by the dfsel command and dfsel_write_draft.
#pragma once

#include <cstdint>
#include <string>

namespace dfsel::tools {

// A whole decimal integer in [lo, hi]: no "12abc", no "1e3", no "+5".
bool parse_int(const std::string& flag, const char* v, long long lo, long long hi, long long* out, std::string* err);
// A whole decimal integer in [0, 2^64).
bool parse_u64(const std::string& flag, const char* v, uint64_t* out, std::string* err);
// A finite decimal number (a point, not a comma; no hex float, inf or nan) in [lo, hi] that a
// float holds: subnormals are kept (the library takes them: a subnormal temperature is the greedy
// limit of sampling), a value that would round to 0 (below 1.4e-45) is refused.
bool parse_float(const std::string& flag, const char* v, double lo, double hi, float* out, std::string* err);

}  // namespace dfsel::tools
