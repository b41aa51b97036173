// Test problems: random selector inputs of any shape and type, with planted special values,
// run through the public C API on either backend with S in-process shards.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

enum class Special { kNone, kTies, kNaN, kNegInf, kShortRows, kAllEqual, kMixed };

struct Case {
  int64_t V = 1000, E = 64;
  int R = 32, K = 8, block = 5, blocks = 2;
  dfsel_type logits_t = DFSEL_TYPE_F32, hidden_t = DFSEL_TYPE_F32, cb_t = DFSEL_TYPE_F32, wh_t = DFSEL_TYPE_F32;
  float scale = 1.0f, softcap = 0.0f;
  size_t logits_pad = 0;  // extra elements between logits rows (strided rows)
  Special special = Special::kNone;
  std::string str() const;
};

struct Data {
  std::vector<float> logits_f, hidden_f;           // values as stored, for oracles
  std::vector<uint8_t> logits, hidden, e_prev, e_next, w_h;
  std::vector<int32_t> anchors;
  size_t logits_nb1 = 0, hidden_nb1 = 0;
};

Data make_data(const Case& c, uint64_t seed);

// The model's shape at vocabulary V (SPEC section 1: K 16, R 256, blocks of 16 tokens, BF16
// codebooks), with E hidden elements and the given number of blocks.
Case model_case(int64_t V, int64_t E, int blocks);

// A seed from std::random_device, so that every run tests fresh inputs; or, when the environment
// variable DFSEL_TEST_SEED is set (a decimal 64-bit value), that value, which replays a failed
// run. A test draws it once, derives the rest of its randomness from it, and names it in its
// failure output: SCOPED_TRACE("seed=" + std::to_string(seed)) next to the draw.
uint64_t fresh_seed();

// Bytes of one F32, F16 or BF16 element.
size_t elem_size(dfsel_type t);

// Stores v as type t (F32, F16 or BF16) at element i of dst; returns the value as stored.
float store_elem(uint8_t* dst, size_t i, dfsel_type t, float v);

struct RunOpts {
  dfsel_backend backend = DFSEL_BACKEND_CPU;
  std::vector<int64_t> bounds;  // S + 1 vocabulary bounds, empty: one shard
  dfsel_placement placement = DFSEL_CODEBOOKS_REPLICATED;
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 0;
  bool packed = true;
  size_t packed_pad = 0;  // extra floats per packed row
  bool nccl = false;      // CUDA only: shard s on GPU s, exchanged by NCCL (ncclCommInitAll)
  // Edits a shard's description before its plan is created (mismatch tests); may be empty.
  void (*edit_desc)(int shard, dfsel_plan_desc* desc) = nullptr;
};

struct Result {
  dfsel_status status = DFSEL_SUCCESS;
  std::string error;
  std::vector<dfsel_status> create_status;  // per shard
  std::vector<std::string> create_errors;
  std::vector<int32_t> cand_ids, path, n_emitted;
  std::vector<float> unary, scores, q, packed;
  size_t packed_row_floats = 0;
};

// Runs one step with every shard's plan (rank s gets [bounds[s], bounds[s+1])). Outputs are
// poisoned (0xff bytes) before the run, so unwritten elements show up as NaN or -1.
Result run_case(const Case& c, const Data& d, const RunOpts& r);

// run_case in steps, for tests that act between them (faults, concurrent plans). The
// constructor puts the inputs in the backend's memory and makes the NCCL communicators
// (r.nccl); the destructor destroys plans, communicators and streams.
class Session {
 public:
  Session(const Case& c, const Data& d, const RunOpts& r);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Creates every shard's plan (together for NCCL: set-up is a collective); fills
  // res->create_status / create_errors and returns the first failure.
  dfsel_status create(Result* res);
  // Poisons the outputs and enqueues one step on streams (nullptr entries: default stream).
  dfsel_status run() {
    poison();
    return enqueue();
  }
  void poison();            // 0xff bytes in every output (synchronous)
  dfsel_status enqueue();   // dfsel_run_group over every plan
  dfsel_status enqueue_shard(int s);  // dfsel_plan_run of shard s alone (NCCL plans)
  // Waits for every plan (dfsel_plan_check) and reads the outputs; every rank must agree.
  Result collect();

  int n_shards() const { return (int)plans.size(); }
  std::vector<dfsel_plan*> plans;
  std::vector<void*> streams;  // one per shard; NCCL: made by the session; else may be set
  std::vector<void*> comms;    // ncclComm_t per shard with r.nccl, set to nullptr once aborted

 private:
  struct Impl;
  Impl* impl_;
};

// A CPU plan of c's selector on data d, replicated codebooks, owning ids [v_begin, v_end).
dfsel_plan_desc cpu_desc(const Case& c, const Data& d, int32_t rank, int32_t n_ranks, int64_t v_begin, int64_t v_end);

// The inputs of one run of every block of c on data d (the whole vocabulary).
dfsel_inputs cpu_inputs(const Case& c, const Data& d);

// rows x cols weights of type t (F32, F16, BF16: normal(0, sigma); Q8_0: random scales near
// sigma / 64 and quants in [-127, 127]).
void fill_weights(std::vector<uint8_t>* out, dfsel_type t, size_t rows, size_t cols, float sigma, std::mt19937_64& rng);
// v, or the special value s plants in its place (NaN, -inf, ties, ...) for column col.
float special_value(Special s, std::mt19937_64& rng, float v, int64_t col);

// A 2-D ggml-style view {ne0, ne1} with rows nb1 bytes apart.
dfsel_tensor make_matrix(const void* data, dfsel_type t, int64_t ne0, int64_t ne1, size_t nb1);

// Random uneven split of [0, V) into S parts of at least min_part tokens each.
std::vector<int64_t> random_bounds(int64_t V, int S, int64_t min_part, std::mt19937_64& rng);
// The same with every part starting at a multiple of `unit` (min_part rounded up to it; the last
// part whatever remains): shards a kernel takes only when aligned.
std::vector<int64_t> aligned_bounds(int64_t V, int S, int64_t unit, int64_t min_part, std::mt19937_64& rng);

// Bitwise comparison helpers: the first differing index, or -1.
long first_diff(const std::vector<float>& a, const std::vector<float>& b);
long first_diff(const std::vector<int32_t>& a, const std::vector<int32_t>& b);

// Every output of a and b compared bit for bit (NaN payloads included): "" when equal, else
// the first output that differs and where, e.g. "scores differ at 17".
std::string bitwise_diff(const Result& a, const Result& b);

}  // namespace dfsel::test
