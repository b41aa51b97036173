// The dfsel command's options, parsed whole: every number must be a whole number in range (no
// "12abc", no "1e3" for a count, no "0,8"), every flag must have its value, and the sizes of a
// GGUF draft cannot be overridden. Kept apart from main so that tests can call it.
#pragma once

#include <cstdint>
#include <string>

namespace dfsel::tools {

struct Options {
  int64_t vocab = 248320, embd = 5120;
  int rank = 256, top_k = 16, block = 16, blocks = 1, shards = 1, steps = 5, threads = 0;
  std::string gguf;
  bool gguf_given = false;
  std::string logits_type = "f32", cb_type = "bf16", placement = "replicated", backend = "auto";
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 1;
  bool help = false;
};

// One flag's value, whole: a decimal integer in [lo, hi]; a whole number >= 0; a finite
// decimal number in [lo, hi]. False with *err naming the flag and the value.
bool parse_int(const std::string& flag, const char* v, long long lo, long long hi, long long* out, std::string* err);
bool parse_u64(const std::string& flag, const char* v, uint64_t* out, std::string* err);
bool parse_float(const std::string& flag, const char* v, double lo, double hi, float* out, std::string* err);

// Parses argv[1..argc); false with *err set (one sentence naming the flag and the value).
bool parse_options(int argc, const char* const* argv, Options* o, std::string* err);

void print_usage();

}  // namespace dfsel::tools
