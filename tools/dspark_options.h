// The dfsel command's DSpark mode (`dfsel --dspark`, or `dfsel --gguf` on a DSpark draft): its
// options, parsed whole like the DFlash2 mode's (tools/options.h).
#pragma once

#include <string>

#include "dspark_runner.h"

namespace dfsel::tools {

struct DSparkOptions {
  DSparkProblem problem;
  int steps = 5;
  bool help = false;
};

// Parses argv[1..argc) (--dspark among them, or --gguf naming a DSpark draft); false with
// *err set (one sentence naming the flag and the value).
bool parse_dspark_options(int argc, const char* const* argv, DSparkOptions* o, std::string* err);
void print_dspark_usage();

// Whether the command line asks for the DSpark mode: --dspark, or --gguf naming a file that
// opens as a DSpark draft.
bool wants_dspark(int argc, const char* const* argv);
// The DSpark mode's main: runs the chain and prints each block's tokens and the step time.
int dspark_main(int argc, const char* const* argv);

}  // namespace dfsel::tools
