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
#include "synthetic.h"

#if defined(DFSEL_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace {

struct Options {
  int64_t vocab = 248320, embd = 5120;
  int rank = 256, top_k = 16, block = 16, blocks = 1, shards = 1, steps = 5;
  std::string gguf;
  std::string logits_type = "f32", cb_type = "bf16", placement = "replicated", backend = "auto";
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 1;
};

void usage() {
  std::printf(
      "usage: dfsel [options]\n"
      "  --vocab V         vocabulary size (248320)\n"
      "  --embd E          hidden width (5120)\n"
      "  --rank R          codebook rank (256)\n"
      "  --top-k K         candidates per position (16)\n"
      "  --block-size B    anchor + drafted positions (16)\n"
      "  --blocks N        blocks per step (1)\n"
      "  --shards S        vocabulary shards (1): GPUs when there are that many, else simulated\n"
      "  --dtype T         logits and hidden type: f32, f16, bf16 (f32)\n"
      "  --codebook-type T f32, f16, bf16, q8_0 (bf16)\n"
      "  --placement P     replicated or sharded codebooks (replicated)\n"
      "  --temperature T   0 greedy, > 0 sampling (0)\n"
      "  --p-min P         stop a block when the chosen probability is below P (0)\n"
      "  --seed S          inputs and sampling seed (1)\n"
      "  --steps N         timed steps (5)\n"
      "  --backend B       auto, cpu or cuda (auto)\n"
      "  --gguf FILE       take the selector (sizes, codebooks, W_h) from a DFlash2 GGUF draft\n");
}

bool parse(int argc, char** argv, Options* o) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage();
      std::exit(0);
    }
    if (i + 1 >= argc) {
      std::fprintf(stderr, "dfsel: %s needs a value\n", a.c_str());
      return false;
    }
    const char* v = argv[++i];
    if (a == "--vocab") o->vocab = std::atoll(v);
    else if (a == "--embd") o->embd = std::atoll(v);
    else if (a == "--rank") o->rank = std::atoi(v);
    else if (a == "--top-k") o->top_k = std::atoi(v);
    else if (a == "--block-size") o->block = std::atoi(v);
    else if (a == "--blocks") o->blocks = std::atoi(v);
    else if (a == "--shards") o->shards = std::atoi(v);
    else if (a == "--dtype") o->logits_type = v;
    else if (a == "--codebook-type") o->cb_type = v;
    else if (a == "--placement") o->placement = v;
    else if (a == "--temperature") o->temperature = (float)std::atof(v);
    else if (a == "--p-min") o->p_min = (float)std::atof(v);
    else if (a == "--seed") o->seed = std::strtoull(v, nullptr, 10);
    else if (a == "--steps") o->steps = std::atoi(v);
    else if (a == "--backend") o->backend = v;
    else if (a == "--gguf") o->gguf = v;
    else {
      std::fprintf(stderr, "dfsel: unknown option %s (see --help)\n", a.c_str());
      return false;
    }
  }
  return true;
}

bool type_of(const std::string& s, dfsel_type* t) {
  if (s == "f32") *t = DFSEL_TYPE_F32;
  else if (s == "f16") *t = DFSEL_TYPE_F16;
  else if (s == "bf16") *t = DFSEL_TYPE_BF16;
  else if (s == "q8_0") *t = DFSEL_TYPE_Q8_0;
  else return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  if (!parse(argc, argv, &o)) return 2;
  dfsel::tools::Problem pb;
  pb.vocab = o.vocab;
  pb.embd = o.embd;
  pb.rank = o.rank;
  pb.top_k = o.top_k;
  pb.block = o.block;
  pb.blocks = o.blocks;
  pb.shards = o.shards;
  pb.seed = o.seed;
  pb.sharded = o.placement == "sharded";
  if (!type_of(o.logits_type, &pb.logits_type) || pb.logits_type == DFSEL_TYPE_Q8_0 || !type_of(o.cb_type, &pb.cb_type) ||
      (o.placement != "replicated" && o.placement != "sharded")) {
    std::fprintf(stderr, "dfsel: bad --dtype, --codebook-type or --placement (see --help)\n");
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

  std::string err;
  dfsel::tools::Runner runner;
  if (!runner.setup(pb, &err)) {
    std::fprintf(stderr, "dfsel: %s\n", err.c_str());
    return 1;
  }
  const dfsel::tools::Problem& q = runner.problem();
  std::printf("dfsel %d.%d.%d  backend %s  V=%" PRId64 " R=%d K=%d block=%d blocks=%d shards=%d%s  logits %s  codebooks %s %s\n",
              DFSEL_VERSION_MAJOR, DFSEL_VERSION_MINOR, DFSEL_VERSION_PATCH, runner.backend_name(), q.vocab, q.rank, q.top_k,
              q.block, q.blocks, q.shards, runner.shard_note(), o.logits_type.c_str(), dfsel_type_name(q.cb_type),
              o.placement.c_str());
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
  std::sort(times.begin(), times.end());
  std::printf("step time: median %.1f us, min %.1f us over %zu steps (%s)\n", times[times.size() / 2], times[0],
              times.size(), runner.timing_note());
  return 0;
}
