#include "dspark_options.h"

#include <cstdio>
#include <iterator>

#include "kernels/common/limits.cuh"
#include "options.h"
#include "parse_number.h"

namespace dfsel::tools {

void print_dspark_usage() {
  std::printf(
      "usage: dfsel --dspark [options]      (or dfsel --gguf DRAFT on a DSpark draft)\n"
      "  --vocab V               draft vocabulary (163840)\n"
      "  --target-vocab V        target vocabulary; more than --vocab adds a random d2t map (--vocab)\n"
      "  --rank R                Markov rank, 1 to %d (256)\n"
      "  --n-draft N             drafted positions per block, 1 to %d (7)\n"
      "  --sample-from-anchor B  1: N logits rows a block; 0: N + 1, row 0 the anchor's (1)\n"
      "  --embd E                confidence head over hidden rows of E (0: none)\n"
      "  --blocks N              blocks per step (1)\n"
      "  --shards S              simulated vocabulary ranks (1)\n"
      "  --dtype T               logits and hidden type: f32, f16, bf16 (f32)\n"
      "  --weight-type T         W1 and W2: f32, f16, bf16, q8_0 (bf16)\n"
      "  --placement P           W1 replicated or sharded, which needs no d2t map (replicated)\n"
      "  --temperature T         0 greedy, > 0 sampling, subnormals included (0)\n"
      "  --p-min P               stop a block when its confidence is below P (0; needs --embd)\n"
      "  --seed S                inputs and sampling seed (1)\n"
      "  --steps N               timed steps (5)\n"
      "  --threads N             CPU worker threads, 0 for every core (0)\n"
      "  --gguf FILE             the Markov head of a DSpark draft; its sizes stand (--vocab,\n"
      "                          --target-vocab, --rank, --n-draft, --sample-from-anchor, --embd\n"
      "                          and --weight-type are refused with it)\n",
      kMaxMarkovRank, kMaxDraftSteps);
}

// The library's ranges, as the DFlash2 mode's flags take them (options.cpp).
bool parse_dspark_options(int argc, const char* const* argv, DSparkOptions* o, std::string* err) {
  static const char* const kDraftSizes[] = {"--vocab",  "--target-vocab", "--rank",       "--n-draft",
                                            "--embd",   "--weight-type",  "--sample-from-anchor"};
  DSparkProblem& p = o->problem;
  const FlagSetter set = [o, &p](const std::string& a, const char* v, std::string* err) {
    long long n = 0;
    bool ok = true;
    if (a == "--vocab") ok = parse_int(a, v, 1, INT32_MAX, &n, err), p.vocab = n;
    else if (a == "--target-vocab") ok = parse_int(a, v, 1, INT32_MAX, &n, err), p.target_vocab = n;
    else if (a == "--rank") ok = parse_int(a, v, 1, kMaxMarkovRank, &n, err), p.rank = (int)n;
    else if (a == "--n-draft") ok = parse_int(a, v, 1, kMaxDraftSteps, &n, err), p.n_draft = (int)n;
    else if (a == "--sample-from-anchor") ok = parse_int(a, v, 0, 1, &n, err), p.from_anchor = n == 1;
    else if (a == "--embd") ok = parse_int(a, v, 0, INT32_MAX, &n, err), p.embd = n;
    else if (a == "--blocks") ok = parse_int(a, v, 1, INT32_MAX, &n, err), p.blocks = (int)n;
    else if (a == "--shards") ok = parse_int(a, v, 1, 1024, &n, err), p.shards = (int)n;
    else if (a == "--steps") ok = parse_int(a, v, 1, 1000000, &n, err), o->steps = (int)n;
    else if (a == "--threads") ok = parse_int(a, v, 0, 1024, &n, err), p.threads = (int)n;
    else if (a == "--seed") ok = parse_u64(a, v, &p.seed, err);
    else if (a == "--temperature") ok = parse_float(a, v, 0.0, kMaxTemperature, &p.temperature, err);
    else if (a == "--p-min") ok = parse_float(a, v, 0.0, 1.0, &p.p_min, err);
    else if (a == "--dtype") ok = type_named(v, false, &p.logits_type) || (*err = "--dtype is f32, f16 or bf16, not " + std::string(v), false);
    else if (a == "--weight-type")
      ok = type_named(v, true, &p.weight_type) || (*err = "--weight-type is f32, f16, bf16 or q8_0, not " + std::string(v), false);
    else if (a == "--placement") {
      p.sharded = std::string(v) == "sharded";
      ok = p.sharded || std::string(v) == "replicated" || (*err = "--placement is replicated or sharded, not " + std::string(v), false);
    } else if (a == "--gguf") {
      p.gguf = v;
    } else {
      return *err = "unknown option " + a + " in the DSpark mode (see dfsel --dspark --help)", false;
    }
    return ok;
  };
  return parse_command_line(argc, argv, "--dspark", set, kDraftSizes, std::size(kDraftSizes), &o->help, err);
}

}  // namespace dfsel::tools
