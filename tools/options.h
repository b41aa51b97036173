// The dfsel command's options, parsed whole: every number must be a whole number in range (no
// "12abc", no "1e3" for a count, no "0,8"), every flag must have its value, and the sizes of a
// GGUF draft cannot be overridden. Kept apart from main so that tests can call it.
#pragma once

#include <cfloat>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "dfsel/dfsel.h"

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

// --temperature's range in both modes: the library takes any finite temperature (<= 0 greedy);
// the command takes 0 for greedy and every positive float up to the largest, subnormals included.
constexpr double kMaxTemperature = FLT_MAX;

// A type as the command's flags name it: f32, f16, bf16, and q8_0 where a weight is meant.
bool type_named(const std::string& s, bool weight, dfsel_type* t);

// The command line of either mode (parse_options, parse_dspark_options): -h or --help, else
// flags each followed by its value, parsed whole. on_flag(flag, value, err) stores one flag's
// value, false with *err set (an unknown flag included). `bare` is a flag that takes no value
// and is passed over (NULL: none). --gguf needs a file name, and the sizes and types a draft
// sets (draft_sizes, n_sizes) cannot be given beside it. False with *err one sentence naming the
// flag and the value.
using FlagSetter = std::function<bool(const std::string& flag, const char* value, std::string* err)>;
bool parse_command_line(int argc, const char* const* argv, const char* bare, const FlagSetter& on_flag,
                        const char* const* draft_sizes, size_t n_sizes, bool* help, std::string* err);

// Parses argv[1..argc); false with *err set (one sentence naming the flag and the value).
bool parse_options(int argc, const char* const* argv, Options* o, std::string* err);

void print_usage();

}  // namespace dfsel::tools
