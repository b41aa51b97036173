#include "options.h"

#include <cstdio>
#include <iterator>
#include <set>

#include "host/plan/plan_limits.h"
#include "kernels/common/limits.cuh"
#include "parse_number.h"

namespace dfsel::tools {

void print_usage() {
  std::printf(
      "usage: dfsel [options]\n"
      "  --vocab V         vocabulary size (248320)\n"
      "  --embd E          hidden width (5120)\n"
      "  --rank R          codebook rank, 1 to %d (256)\n"
      "  --top-k K         candidates per position, 1 to %d (16)\n"
      "  --block-size B    anchor + drafted positions, 2 to %d (16)\n"
      "  --blocks N        blocks per step (1)\n"
      "  --shards S        vocabulary shards (1): GPUs when there are that many, else simulated\n"
      "  --dtype T         logits and hidden type: f32, f16, bf16 (f32)\n"
      "  --codebook-type T f32, f16, bf16, q8_0 (bf16)\n"
      "  --placement P     replicated or sharded codebooks (replicated)\n"
      "  --temperature T   0 greedy, > 0 sampling, subnormals included (0)\n"
      "  --p-min P         stop a block when the chosen probability is below P (0)\n"
      "  --seed S          inputs and sampling seed (1)\n"
      "  --steps N         timed steps (5)\n"
      "  --backend B       auto, cpu or cuda (auto)\n"
      "  --threads N       CPU backend worker threads, 0 for every core (0)\n"
      "  --gguf FILE       take the selector (sizes, codebooks, W_h) from a DFlash2 GGUF draft;\n"
      "                    its sizes and types then stand: --vocab, --embd, --rank, --top-k,\n"
      "                    --block-size and --codebook-type are refused with it (a DSpark draft\n"
      "                    runs its chain: dfsel --dspark --help)\n"
      "  --dspark          run a DSpark draft's Markov chain instead (dfsel --dspark --help)\n",
      kMaxCodebookRank, kMaxTopK, kMaxBlockSize);
}

bool type_named(const std::string& s, bool weight, dfsel_type* t) {
  if (s == "f32") *t = DFSEL_TYPE_F32;
  else if (s == "f16") *t = DFSEL_TYPE_F16;
  else if (s == "bf16") *t = DFSEL_TYPE_BF16;
  else if (s == "q8_0" && weight) *t = DFSEL_TYPE_Q8_0;
  else return false;
  return true;
}

bool parse_command_line(int argc, const char* const* argv, const char* bare, const FlagSetter& on_flag,
                        const char* const* draft_sizes, size_t n_sizes, bool* help, std::string* err) {
  std::set<std::string> given;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") return *help = true, true;
    if (bare && a == bare) continue;
    if (a.rfind("--", 0) != 0) return *err = "unexpected argument '" + a + "' (options start with --; see --help)", false;
    // --flag=value is --flag value.
    const size_t eq = a.find('=');
    if (eq != std::string::npos) {
      const std::string flag = a.substr(0, eq), value = a.substr(eq + 1);
      if (flag == "--gguf" && value.empty()) return *err = "--gguf needs a file name, not an empty string", false;
      if (!on_flag(flag, value.c_str(), err)) return false;
      given.insert(flag);
      continue;
    }
    // A value that is itself a flag means the value was left out ("--vocab --steps 1").
    if (i + 1 >= argc || std::string(argv[i + 1]).rfind("--", 0) == 0) return *err = a + " needs a value", false;
    const char* v = argv[++i];
    if (a == "--gguf" && !*v) return *err = "--gguf needs a file name, not an empty string", false;
    if (!on_flag(a, v, err)) return false;
    given.insert(a);
  }
  if (given.count("--gguf"))
    for (size_t i = 0; i < n_sizes; ++i)
      if (given.count(draft_sizes[i]))
        return *err = std::string(draft_sizes[i]) + " cannot be combined with --gguf: the draft sets it", false;
  return true;
}

// Each flag that sets a field of the library takes the library's range (kernels/common/limits.cuh,
// host/plan/plan_limits.h), so that a value is refused by one range whichever side refuses it.
bool parse_options(int argc, const char* const* argv, Options* o, std::string* err) {
  // The draft sets its codebooks' type as it sets its sizes (the DSpark mode refuses --weight-type
  // with --gguf alike): a --codebook-type beside it would be ignored without a word.
  static const char* const kDraftSizes[] = {"--vocab", "--embd", "--rank", "--top-k", "--block-size", "--codebook-type"};
  const FlagSetter set = [o](const std::string& a, const char* v, std::string* err) {
    long long n = 0;
    bool ok = true;
    if (a == "--vocab") ok = parse_int(a, v, 1, INT32_MAX, &n, err), o->vocab = n;
    else if (a == "--embd") ok = parse_int(a, v, 1, INT32_MAX, &n, err), o->embd = n;
    else if (a == "--rank") ok = parse_int(a, v, 1, kMaxCodebookRank, &n, err), o->rank = (int)n;
    else if (a == "--top-k") ok = parse_int(a, v, 1, kMaxTopK, &n, err), o->top_k = (int)n;
    else if (a == "--block-size") ok = parse_int(a, v, 2, kMaxBlockSize, &n, err), o->block = (int)n;
    else if (a == "--blocks") ok = parse_int(a, v, 1, INT32_MAX, &n, err), o->blocks = (int)n;
    else if (a == "--shards") ok = parse_int(a, v, 1, INT32_MAX, &n, err), o->shards = (int)n;
    else if (a == "--steps") ok = parse_int(a, v, 1, 1000000, &n, err), o->steps = (int)n;
    else if (a == "--threads") ok = parse_int(a, v, 0, 1024, &n, err), o->threads = (int)n;
    else if (a == "--seed") ok = parse_u64(a, v, &o->seed, err);
    else if (a == "--temperature") ok = parse_float(a, v, 0.0, kMaxTemperature, &o->temperature, err);
    else if (a == "--p-min") ok = parse_float(a, v, 0.0, 1.0, &o->p_min, err);
    else if (a == "--dtype") o->logits_type = v;
    else if (a == "--codebook-type") o->cb_type = v;
    else if (a == "--placement") o->placement = v;
    else if (a == "--backend") o->backend = v;
    else if (a == "--gguf") o->gguf = v, o->gguf_given = true;
    else return *err = "unknown option " + a + " (see --help)", false;
    return ok;
  };
  return parse_command_line(argc, argv, nullptr, set, kDraftSizes, std::size(kDraftSizes), &o->help, err);
}

}  // namespace dfsel::tools
