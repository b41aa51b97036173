// DSpark chains of realistic size through the public C API (dspark.h) on the CPU backend:
// seeded synthetic drafts, or the Markov head of a DSpark GGUF draft, over S simulated ranks.
// Used by `dfsel --dspark`, `dfsel --gguf` on a DSpark draft and the CpuDSparkStep benchmark.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dfsel/dspark.h"

namespace dfsel::tools {

struct DSparkProblem {
  int64_t vocab = 163840, target_vocab = 0, embd = 0;  // target_vocab > vocab: a random d2t map
  int rank = 256, n_draft = 7, blocks = 1, shards = 1, threads = 0;
  bool from_anchor = true, sharded = false;
  dfsel_type logits_type = DFSEL_TYPE_F32, weight_type = DFSEL_TYPE_BF16;
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 1;
  std::string gguf;  // when set, the Markov head and sizes come from this DSpark draft
  std::string stored_weight_type;  // a draft's W2 as the file stores it (weight_type: as read)
};

class DSparkRunner {
 public:
  DSparkRunner();
  ~DSparkRunner();
  // Validates through the library's own rules and checks the memory the problem needs before
  // allocating anything; false with err set otherwise (the library's fields named by the
  // command's flags, or by the draft's keys), and *bad_request (may be NULL) true when the
  // request itself is invalid (a flag's value), as the DFlash2 Runner says. log (may be null)
  // gets the draft's metadata when one is loaded.
  bool setup(const DSparkProblem& p, std::FILE* log, std::string* err, bool* bad_request = nullptr);
  // One chain, timed (wall clock); a refusal is worded and judged as setup's.
  bool step(double* us, std::string* err, bool* bad_request = nullptr);
  const DSparkProblem& problem() const;     // after setup: the sizes run (a draft's own)
  const std::vector<int32_t>& tokens() const;
  const std::vector<int32_t>& n_emitted() const;
  int32_t anchor(int b) const;
  // Bytes of W2 a step reads on every rank together (the floor's unit), and its type.
  size_t w2_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dfsel::tools
