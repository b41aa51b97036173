// The dfsel command's DSpark mode: a chain of a synthetic draft or of a DSpark GGUF draft on
// the CPU backend; per block the anchor and the drafted tokens, then the step time.
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "dspark_options.h"

namespace dfsel::tools {

bool wants_dspark(int argc, const char* const* argv) {
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--dspark") return true;
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::string(argv[i]) != "--gguf") continue;
    // A draft that does not open is the DFlash2 mode's to report, with its message.
    dfsel_gguf* g = nullptr;
    if (dfsel_gguf_open(argv[i + 1], -1, -1, &g, nullptr, 0) != DFSEL_SUCCESS) return false;
    dfsel_draft_kind kind = DFSEL_DRAFT_DFLASH2;
    dfsel_gguf_draft_kind(g, &kind);
    dfsel_gguf_close(g);
    return kind == DFSEL_DRAFT_DSPARK;
  }
  return false;
}

int dspark_main(int argc, const char* const* argv) {
  DSparkOptions o;
  std::string err;
  if (!parse_dspark_options(argc, argv, &o, &err)) {
    std::fprintf(stderr, "dfsel: %s\n", err.c_str());
    return 2;
  }
  if (o.help) {
    print_dspark_usage();
    return 0;
  }
  // Exit status 2: the request is invalid (a flag, a value, a combination); 1: it could not
  // run here (a file, memory), as in the DFlash2 mode.
  DSparkRunner runner;
  bool bad_request = false;
  if (!runner.setup(o.problem, stdout, &err, &bad_request)) {
    std::fprintf(stderr, "dfsel: %s\n", err.c_str());
    return bad_request ? 2 : 1;
  }
  const DSparkProblem& p = runner.problem();
  std::printf("dfsel %d.%d.%d  DSpark chain  backend cpu  V=%" PRId64 " V_target=%" PRId64 " R=%d N=%d%s blocks=%d "
              "shards=%d  logits %s  W2 %s  confidence head %s\n",
              DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR, DFSEL_VERSION_PATCH, p.vocab, p.target_vocab, p.rank, p.n_draft,
              p.from_anchor ? "" : " (anchor row first)", p.blocks, p.shards, dfsel_type_name(p.logits_type),
              p.stored_weight_type.empty() ? dfsel_type_name(p.weight_type) : p.stored_weight_type.c_str(),
              p.embd > 0 ? "yes" : "no");
  std::vector<double> times;
  for (int s = 0; s < o.steps; ++s) {
    double us = 0;
    if (!runner.step(&us, &err, &bad_request)) {
      std::fprintf(stderr, "dfsel: %s\n", err.c_str());
      return bad_request ? 2 : 1;
    }
    times.push_back(us);
  }
  // A step whose blocks have all stopped (p_min) reads nothing: W2 is read once for each token
  // position some block drafted, the longest block's count.
  int passes = 0;
  for (int b = 0; b < p.blocks; ++b) {
    const int n = runner.n_emitted()[b];
    passes = n > passes ? n : passes;
    std::printf("block %d: anchor %d, emitted %d:", b, runner.anchor(b), n);
    for (int k = 0; k < n; ++k) std::printf(" %d", runner.tokens()[(size_t)b * p.n_draft + k]);
    std::printf("\n");
  }
  std::sort(times.begin(), times.end());
  const double median = times[times.size() / 2], gb = (double)runner.w2_bytes() * passes / 1e9;
  std::printf("step time: median %.1f us, min %.1f us over %zu steps (wall clock, CPU backend); W2 read %d of %d times: "
              "%.2f GB, %.1f GB/s at the median\n",
              median, times[0], times.size(), passes, p.n_draft, gb, gb / (median * 1e-6));
  return 0;
}

}  // namespace dfsel::tools
