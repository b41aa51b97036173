// DSpark test problems: random drafts of any shape and weight type, with planted special
// values, run through the public C API on the CPU backend with S in-process ranks, or through
// the reference (host/reference/dspark_reference.h).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dfsel/dspark.h"
#include "problem.h"

namespace dfsel::test {

struct DSparkCase {
  int64_t V = 300, V_target = 300;  // V_target > V needs d2t
  int64_t E = 0;                     // hidden width; 0: no confidence head
  int R = 16, N = 4, blocks = 2;
  int max_blocks = 0;                // config.max_blocks; 0: blocks
  bool from_anchor = true;           // config.sample_from_anchor
  bool d2t = false;
  int scale_rows = 0;                // 0: no markov_w2.scale, 1: one, 2: one per row
  dfsel_type logits_t = DFSEL_TYPE_F32, hidden_t = DFSEL_TYPE_F32;
  dfsel_type w1_t = DFSEL_TYPE_F32, w2_t = DFSEL_TYPE_F32, conf_t = DFSEL_TYPE_F32;
  float logit_scale = 0.0f, softcap = 0.0f, conf_bias = 0.0f;
  size_t logits_pad = 0;             // extra elements between logits rows
  Special special = Special::kNone;  // planted in the base logits (and ties in W2 rows)
  int rows() const { return from_anchor ? N : N + 1; }
  std::string str() const;
};

struct DSparkData {
  std::vector<uint8_t> logits, hidden, w1, w2, conf_w;
  std::vector<float> scale;
  std::vector<int32_t> d2t, anchors;
  size_t logits_nb1 = 0, hidden_nb1 = 0;
  // Every value as the library computes with it (block types but Q8_0 widened to BF16 first).
  std::vector<float> logits_f, hidden_f, w1_f, w2_f, conf_f;
};

DSparkData make_dspark_data(const DSparkCase& c, uint64_t seed);

struct DSparkRunOpts {
  std::vector<int64_t> bounds;  // S + 1 draft-vocabulary bounds; empty: one rank
  dfsel_placement placement = DFSEL_CODEBOOKS_REPLICATED;
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 0;
  int32_t n_threads = 0;
  bool optional_outputs = true;  // draft_ids, logits, probs, log_norm, confidence
};

struct DSparkResult {
  dfsel_status status = DFSEL_SUCCESS;
  std::string error;
  std::vector<int32_t> tokens, n_emitted, draft_ids;
  std::vector<float> logits, probs, log_norm, confidence;
};

// A random case: sizes, layout, d2t, scale, confidence head, types, transform and padding.
DSparkCase random_dspark_case(std::mt19937_64& rng);
// Random run options for c: 1 to 4 ranks over uneven ranges, placement, greedy or sampling,
// p_min (with a confidence head), seed and worker count.
DSparkRunOpts random_dspark_opts(const DSparkCase& c, std::mt19937_64& rng);

// n random cases with random run options; every planted special value (ties, NaN, -inf, short
// rows, all equal, mixed) in F32, F16 and BF16 logits, greedy and sampling, on random cases.
std::vector<std::pair<DSparkCase, DSparkRunOpts>> random_dspark_runs(std::mt19937_64& rng, int n);
std::vector<std::pair<DSparkCase, DSparkRunOpts>> special_dspark_runs(std::mt19937_64& rng);

// The description of rank s of bounds (or of one rank over [0, V)), on d's weights.
dfsel_dspark_plan_desc dspark_desc(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, int s);
dfsel_dspark_inputs dspark_inputs(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, int s);

// Outputs of n_blocks blocks over caller buffers store[0..6] (tokens, n_emitted, draft_ids,
// logits, probs, log_norm, confidence), made here: cells elements each (n_blocks for
// n_emitted) plus slack, set to fill, so that a test can move a pointer within its buffer.
dfsel_dspark_outputs dspark_outputs_over(std::vector<int32_t> (&store)[7], int32_t n_blocks, size_t cells, size_t slack,
                                         int32_t fill);

// One chain of every rank (dfsel_dspark_run_group). Outputs are poisoned (0xff bytes) before
// the run; every rank's outputs must be bitwise the same, or error says where they differ.
DSparkResult run_dspark(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r);

// The chain by the reference alone (one rank, K-quant weights widened as plan creation does).
DSparkResult reference_dspark(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r);

// Every output compared bit for bit: "" or the first that differs and where.
std::string dspark_bitwise_diff(const DSparkResult& a, const DSparkResult& b);

}  // namespace dfsel::test
