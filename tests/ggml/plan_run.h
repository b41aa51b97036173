// One selector step through dfsel's public API on host views, the baseline the ggml node
// and ggml's own ops are compared with.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

struct PlanIo {
  dfsel_config cfg{};
  dfsel_tensor e_prev{}, e_next{}, w_h{}, logits{}, hidden{};
  const int32_t* anchors = nullptr;
  int32_t n_blocks = 0;
  int32_t n_threads = 0;
};

struct PlanOut {
  dfsel_status status = DFSEL_SUCCESS;
  std::string error;
  std::vector<int32_t> cand_ids;     // [n_blocks * L][K]
  std::vector<float> unary, scores;  // [n_blocks * L][K], [n_blocks * L][K][K]
  std::vector<float> packed;         // n_blocks * block_size rows of n_embd
};

// Creates a CPU plan, poisons every output (0xff bytes) and runs one greedy step.
PlanOut run_plan(const PlanIo& io);

// A config of the model's form: K, R, block as given, scale m, softcap c.
dfsel_config make_config(int64_t V, int64_t E, int R, int K, int block, int max_blocks, float scale,
                         float softcap);

}  // namespace dfsel::test
