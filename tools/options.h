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

// Parses argv[1..argc); false with *err set (one sentence naming the flag and the value).
bool parse_options(int argc, const char* const* argv, Options* o, std::string* err);

void print_usage();

}  // namespace dfsel::tools
