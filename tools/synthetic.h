// Seeded synthetic selector problems of realistic size, run through the public C API on the
// CPU or on CUDA devices. Used by the dfsel command and the step benchmarks.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "dfsel/gguf.h"

namespace dfsel::tools {

struct Problem {
  int64_t vocab = 248320, embd = 5120;
  int rank = 256, top_k = 16, block = 16, blocks = 1, shards = 1;
  dfsel_type logits_type = DFSEL_TYPE_F32, cb_type = DFSEL_TYPE_BF16, wh_type = DFSEL_TYPE_BF16;
  float logit_scale = 1.0f, softcap = 0.0f;
  std::string gguf;  // when set, the codebooks, W_h and sizes come from this DFlash2 draft
  std::string stored_cb_type;  // a draft's codebooks as the file stores them (cb_type: as read)
  bool sharded = false;
  dfsel_backend backend = DFSEL_BACKEND_AUTO;
  float temperature = 0.0f, p_min = 0.0f;
  uint64_t seed = 1;
  int threads = 0;  // CPU backend worker threads (0: every core)
};

// Host copies of every input, in the stored types.
struct HostData {
  std::vector<uint8_t> logits, hidden, e_prev, e_next, w_h;
  std::vector<int32_t> anchors;
};

// Fills h: the inputs, and the weights unless a draft's were copied in (copy_weights).
void make_host_data(const Problem& p, HostData* h);

// A DFlash2 draft opened for the Runner: its selector's views into the file, valid while it is.
struct OpenDraft {
  dfsel_gguf* g = nullptr;
  dfsel_tensor e_prev{}, e_next{}, w_h{};
  std::string path;  // as messages print it (printable)
  OpenDraft() = default;
  OpenDraft(const OpenDraft&) = delete;
  OpenDraft& operator=(const OpenDraft&) = delete;
  ~OpenDraft();
};
// Opens the draft p->gguf: its sizes and types into p, its selector's views into d, the
// metadata to log (may be null). Nothing is copied (host_bytes counts the copy). False with err
// set on failure.
bool open_gguf(Problem* p, OpenDraft* d, std::FILE* log, std::string* err);
// Copies the draft's weights into h (rows packed) and closes it; throws std::bad_alloc. A
// weight that holds NaN or infinite values is warned of on `warn`, named with the file: the
// library does not read every codebook value (docs/SPEC.md 2.4), so nothing else would say it.
void copy_weights(OpenDraft* d, HostData* h, std::FILE* log, std::FILE* warn);
// How many of the values packed in `rows` (F32, F16, BF16, or Q8_0 blocks) are NaN or infinite,
// read from their bits: an exponent of all ones; a Q8_0 value is when its block's scale is.
int64_t count_nonfinite(const std::vector<uint8_t>& rows, dfsel_type t);
// The type of tensor `name` of an open draft as the file stores it: "Q4_K (read as BF16)" where
// the reader's view (of type read_as) widened it, else read_as's name. Both modes of the command
// report a draft's weights by it.
std::string stored_type(const dfsel_gguf* g, const char* name, dfsel_type read_as);
// The version and every metadata key and value of an open draft, a line each, to log.
void print_metadata(const dfsel_gguf* g, double open_seconds, std::FILE* log);
// Fills n values of type t with seeded normal(0, sigma) draws.
void fill_random(std::vector<uint8_t>* out, dfsel_type t, size_t n, float sigma, uint64_t seed);
// Stores v as element i of an F32, F16 or BF16 buffer (rounded to nearest even).
void store_value(uint8_t* base, size_t i, dfsel_type t, float v);
// Bytes of one F32, F16 or BF16 element.
size_t elem_size(dfsel_type t);
// Host memory the inputs and weights of p take (a draft's weights are copied too).
double host_bytes(const Problem& p);
// What the flags --shards and --blocks must be whatever the library says: at least 1, and no
// more shards than the vocabulary (vocab, the draft's when from_draft) has tokens. "" when they
// are, else the sentence that refuses them.
std::string count_refusal(int shards, int blocks, int64_t vocab, bool from_draft);
// Memory this process may still take now, or -1 when unknown: the kernel's MemAvailable, or
// less where a limit on the process (ulimit -v, ulimit -d) leaves less.
double available_bytes();
// A number of bytes as a person reads it: "70 MiB", "1.5 GiB".
std::string bytes_text(double bytes);
// s with every byte outside printable ASCII (and the backslash) written as \xNN.
std::string printable(const char* s);

class Runner {
 public:
  Runner();
  ~Runner();
  // Validates the problem through the library's own rules and checks that it fits in memory
  // before allocating anything; false with err set otherwise, and *bad_request (may be NULL)
  // true when the request itself is invalid (a flag's value), false when it could not run here.
  bool setup(const Problem& p, std::string* err, bool* bad_request = nullptr);
  bool step(double* us, std::string* err);  // one selector step, timed
  void results(std::vector<int32_t>* path, std::vector<int32_t>* n_emitted) const;
  int32_t anchor(int b) const;
  // Of the positions emitted by the last step, how many took another candidate than the one
  // with the largest logit (candidate 0).
  void walk_stats(int* left_top, int* emitted) const;
  const Problem& problem() const;  // after setup: the sizes actually run (a GGUF's own)
  const char* backend_name() const;
  const char* shard_note() const;
  const char* timing_note() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace dfsel::tools
