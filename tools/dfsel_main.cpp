// dfsel: runs the selector on seeded synthetic inputs of realistic size (or on the sizes of a
// GGUF draft) and prints, per block, the drafted tokens, the emitted length and the step time.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "kernels/common/numeric.cuh"
#include "dspark_options.h"
#include "options.h"
#include "synthetic.h"

#if defined(DFSEL_WITH_CUDA)
#include <cuda_runtime.h>
#endif

int main(int argc, char** argv) {
  if (dfsel::tools::wants_dspark(argc, argv)) return dfsel::tools::dspark_main(argc, argv);
  dfsel::tools::Options o;
  std::string perr;
  if (!dfsel::tools::parse_options(argc, argv, &o, &perr)) {
    std::fprintf(stderr, "dfsel: %s\n", perr.c_str());
    return 2;
  }
  if (o.help) {
    dfsel::tools::print_usage();
    return 0;
  }
  dfsel::tools::Problem pb;
  pb.vocab = o.vocab;
  pb.embd = o.embd;
  pb.rank = o.rank;
  pb.top_k = o.top_k;
  pb.block = o.block;
  pb.blocks = o.blocks;
  pb.shards = o.shards;
  pb.seed = o.seed;
  pb.threads = o.threads;
  pb.sharded = o.placement == "sharded";
  if (!dfsel::tools::type_named(o.logits_type, false, &pb.logits_type)) {
    std::fprintf(stderr, "dfsel: --dtype is f32, f16 or bf16, not %s\n", o.logits_type.c_str());
    return 2;
  }
  if (!dfsel::tools::type_named(o.cb_type, true, &pb.cb_type)) {
    std::fprintf(stderr, "dfsel: --codebook-type is f32, f16, bf16 or q8_0, not %s\n", o.cb_type.c_str());
    return 2;
  }
  if (o.placement != "replicated" && o.placement != "sharded") {
    std::fprintf(stderr, "dfsel: --placement is replicated or sharded, not %s\n", o.placement.c_str());
    return 2;
  }
  if (o.backend == "cpu") pb.backend = DFSEL_BACKEND_CPU;
  else if (o.backend == "cuda") pb.backend = DFSEL_BACKEND_CUDA;
  else if (o.backend == "auto") pb.backend = DFSEL_BACKEND_AUTO;
  else {
    std::fprintf(stderr, "dfsel: --backend is auto, cpu or cuda, not %s\n", o.backend.c_str());
    return 2;
  }
  pb.wh_type = pb.cb_type;
  pb.gguf = o.gguf;
  pb.temperature = o.temperature;
  pb.p_min = o.p_min;

  // Exit status 2: the request is invalid (a flag, a value, a combination); 1: it could not
  // run here (a file, memory, a device).
  std::string err;
  dfsel::tools::Runner runner;
  bool bad_request = false;
  if (!runner.setup(pb, &err, &bad_request)) {
    std::fprintf(stderr, "dfsel: %s\n", err.c_str());
    return bad_request ? 2 : 1;
  }
  const dfsel::tools::Problem& q = runner.problem();
  std::printf("dfsel %d.%d.%d  backend %s  V=%" PRId64 " R=%d K=%d block=%d blocks=%d shards=%d%s  logits %s  codebooks %s %s\n",
              DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR, DFSEL_VERSION_PATCH, runner.backend_name(), q.vocab, q.rank, q.top_k,
              q.block, q.blocks, q.shards, runner.shard_note(), o.logits_type.c_str(),
              q.stored_cb_type.empty() ? dfsel_type_name(q.cb_type) : q.stored_cb_type.c_str(), o.placement.c_str());
  std::vector<double> times;
  for (int s = 0; s < std::max(1, o.steps); ++s) {
    double us = 0;
    if (!runner.step(&us, &err)) {
      std::fprintf(stderr, "dfsel: %s\n", err.c_str());
      return 1;
    }
    times.push_back(us);
  }
  std::vector<int32_t> path, n_emitted;
  runner.results(&path, &n_emitted);
  const int L = q.block - 1;
  for (int b = 0; b < o.blocks; ++b) {
    std::printf("block %d: anchor %d, emitted %d:", b, runner.anchor(b), n_emitted[b]);
    for (int p = 0; p < n_emitted[b]; ++p) std::printf(" %d", path[(size_t)b * L + p]);
    std::printf("\n");
  }
  int left_top = 0, emitted = 0;
  runner.walk_stats(&left_top, &emitted);
  std::printf("walk: %d of %d emitted tokens are not their position's top unary candidate\n", left_top, emitted);
  std::sort(times.begin(), times.end());
  std::printf("step time: median %.1f us, min %.1f us over %zu steps (%s)\n", times[times.size() / 2], times[0],
              times.size(), runner.timing_note());
  return 0;
}
