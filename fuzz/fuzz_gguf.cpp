// Bytes as a GGUF draft, through every layer that reads one: gguf::File::parse, the metadata
// reads and renderings, gguf::Selector::load and gguf::DSparkDraft::load (whole vocabulary and
// a shard), the C API of include/dfsel/gguf.h and dspark.h on an in-memory file, and a CPU plan
// that runs one step (DFlash2) or one chain (DSpark) on what the file describes. A malformed file must come back as a status; anything that reads past
// the input or overflows is a sanitizer report.
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "dfsel/dspark.h"
#include "dfsel/gguf.h"
#include "host/gguf/gguf.h"
#include "kernels/common/numeric.cuh"

namespace {

// A finding of the harness itself (the library broke a promise without a sanitizer noticing).
void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_gguf: %s\n", what);
  std::abort();
}

// Reads every byte of a view's rows, so that a view reaching past its storage is reported.
unsigned touch(const dfsel_tensor& t) {
  const size_t rb = dfsel::row_bytes(t.type, t.ne[0]);
  const volatile uint8_t* p = static_cast<const uint8_t*>(t.data);
  unsigned sum = 0;
  for (int64_t r = 0; r < t.ne[1]; ++r)
    for (size_t i = 0; i < rb; i += 7) sum += p[size_t(r) * t.nb[1] + i];
  if (rb > 0 && t.ne[1] > 0) sum += p[size_t(t.ne[1] - 1) * t.nb[1] + rb - 1];
  return sum;
}

void exercise_file(const dfsel::gguf::File& f) {
  for (const dfsel::gguf::KeyValue& kv : f.metadata()) {
    expect(kv.offset <= f.size(), "a value offset lies past the file");
    int64_t i;
    double d;
    bool b;
    std::string_view s;
    f.read_int(kv, &i);
    f.read_float(kv, &d);
    f.read_bool(kv, &b);
    if (f.read_string(kv, &s)) expect(s.data() + s.size() <= reinterpret_cast<const char*>(f.data()) + f.size(), "a string runs past the file");
    expect(!f.render(kv, 16).empty(), "an empty rendering");
    expect(f.find_key(kv.key) == &kv, "find_key misses a key");
  }
  for (const dfsel::gguf::TensorInfo& t : f.tensors()) {
    expect(t.file_offset <= f.size() && t.n_bytes <= f.size() - t.file_offset,
           "a tensor's data lies past the file");
    expect(f.find_tensor(t.name) == &t, "find_tensor misses a tensor");
  }
}

void exercise_selector(const dfsel::gguf::Selector& sel) {
  const int64_t rows = sel.v_end() - sel.v_begin();
  expect(sel.e_prev().ne[1] == rows && sel.e_next().ne[1] == rows, "codebook rows != the range");
  touch(sel.e_prev());
  touch(sel.e_next());
  touch(sel.w_h());
}

// One CPU step on the selector the file describes, when the sizes keep it quick.
void run_plan(const dfsel_config& file_cfg, const dfsel_tensor& e_prev, const dfsel_tensor& e_next,
              const dfsel_tensor& w_h, uint32_t seed) {
  dfsel_config cfg = file_cfg;
  cfg.max_blocks = 1;
  if (cfg.block_size > 1024 || cfg.n_vocab > (1 << 20) || cfg.n_embd > (1 << 20) ||
      cfg.n_vocab * cfg.block_size > (1 << 20) || cfg.n_embd * cfg.block_size > (1 << 20))
    return;
  dfsel_plan_desc desc{};
  desc.config = cfg;
  desc.shard = dfsel_shard{0, 1, 0, cfg.n_vocab};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.e_prev = e_prev;
  desc.e_next = e_next;
  desc.w_h = w_h;
  char msg[128];
  dfsel_plan* plan = nullptr;
  if (dfsel_plan_create(&desc, &plan, msg, sizeof msg) != DFSEL_SUCCESS) return;
  const int64_t n_tokens = cfg.block_size;
  std::vector<float> logits(size_t(cfg.n_vocab * n_tokens)), hidden(size_t(cfg.n_embd * n_tokens));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 2654435761u + seed) % 1000) / 100.0f;
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = float((i * 40503u + seed) % 200) / 100.0f - 1.0f;
  auto matrix = [](const std::vector<float>& v, int64_t ne0, int64_t ne1) {
    return dfsel_tensor_2d(v.data(), DFSEL_TYPE_F32, ne0, ne1, size_t(ne0) * sizeof(float));
  };
  const int32_t anchor = int32_t(seed % uint32_t(cfg.n_vocab));
  dfsel_inputs in{};
  in.logits = matrix(logits, cfg.n_vocab, n_tokens);
  in.hidden = matrix(hidden, cfg.n_embd, n_tokens);
  in.anchors = &anchor;
  in.n_blocks = 1;
  in.temperature = seed & 1 ? 0.7f : 0.0f;
  in.seed = seed;
  const int32_t L = cfg.block_size - 1;
  std::vector<int32_t> path(static_cast<size_t>(L)), ids(static_cast<size_t>(L) * size_t(cfg.top_k));
  int32_t n_emitted = -1;
  dfsel_outputs out{};
  out.path = path.data();
  out.n_emitted = &n_emitted;
  out.cand_ids = ids.data();
  const dfsel_status s = dfsel_plan_run(plan, &in, &out, nullptr);
  expect(s == DFSEL_SUCCESS, "a run on a loaded draft failed");
  expect(n_emitted >= 0 && n_emitted <= L, "n_emitted is outside [0, L]");
  for (int32_t p = 0; p < n_emitted; ++p)
    expect(path[size_t(p)] >= 0 && path[size_t(p)] < cfg.n_vocab, "a drafted token is outside [0, V)");
  dfsel_plan_destroy(plan);
}

// One CPU chain on the Markov head a DSpark draft describes, when the sizes keep it quick.
void run_dspark(dfsel_dspark_plan_desc desc, uint32_t seed) {
  dfsel_dspark_config& c = desc.config;
  const int64_t rows = c.sample_from_anchor ? c.n_draft : int64_t(c.n_draft) + 1;
  if (c.n_draft > 64 || c.n_vocab * rows > (1 << 20) || c.n_embd * rows > (1 << 20)) return;
  c.max_blocks = 1;
  desc.shard.rank = 0;
  desc.shard.n_ranks = 1;
  desc.backend = DFSEL_BACKEND_CPU;
  char msg[128];
  dfsel_dspark_plan* plan = nullptr;
  const dfsel_status created = dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg);
  expect(created == DFSEL_SUCCESS || msg[0] != '\0', "a refused DSpark plan without a message");
  if (created != DFSEL_SUCCESS) return;
  std::vector<float> logits(size_t(c.n_vocab * rows)), hidden(size_t(c.n_embd * rows));
  for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 2654435761u + seed) % 1000) / 100.0f;
  for (size_t i = 0; i < hidden.size(); ++i) hidden[i] = float((i * 40503u + seed) % 200) / 100.0f - 1.0f;
  const int32_t anchor = int32_t(seed % uint32_t(c.n_target_vocab));
  dfsel_dspark_inputs in{};
  in.logits = dfsel_tensor_2d(logits.data(), DFSEL_TYPE_F32, c.n_vocab, rows, size_t(c.n_vocab) * 4);
  if (c.n_embd > 0) in.hidden = dfsel_tensor_2d(hidden.data(), DFSEL_TYPE_F32, c.n_embd, rows, size_t(c.n_embd) * 4);
  in.anchors = &anchor;
  in.n_blocks = 1;
  in.temperature = seed & 1 ? 0.7f : 0.0f;
  in.p_min = c.n_embd > 0 && (seed & 2) ? 0.5f : 0.0f;
  in.seed = seed;
  std::vector<int32_t> tokens(size_t(c.n_draft), -7);
  int32_t n_emitted = -1;
  const dfsel_dspark_outputs out{1, tokens.data(), &n_emitted, nullptr, nullptr, nullptr, nullptr, nullptr};
  expect(dfsel_dspark_plan_run(plan, &in, &out, nullptr) == DFSEL_SUCCESS, "a chain on a loaded draft failed");
  expect(n_emitted >= 0 && n_emitted <= c.n_draft, "n_emitted is outside [0, N]");
  for (int32_t k = 0; k < n_emitted; ++k)
    expect(tokens[size_t(k)] >= 0 && tokens[size_t(k)] < c.n_target_vocab, "a drafted token is outside [0, V_target)");
  dfsel_dspark_plan_destroy(plan);
}

// A DSpark draft through the C API: its description and every byte of its views.
void exercise_dspark(const dfsel_gguf* g, uint32_t seed) {
  dfsel_dspark_plan_desc d{};
  dfsel_config cfg;
  dfsel_tensor t;
  expect(dfsel_gguf_dspark_desc(g, &d) == DFSEL_SUCCESS, "dspark_desc failed");
  expect(dfsel_gguf_config(g, &cfg) == DFSEL_INVALID_ARGUMENT, "config answered for a DSpark draft");
  expect(dfsel_gguf_tensors(g, &t, &t, &t) == DFSEL_INVALID_ARGUMENT, "tensors answered for a DSpark draft");
  const int64_t rows = d.shard.v_end - d.shard.v_begin;
  expect(d.w2.ne[1] == rows && d.w1.ne[1] == d.config.n_target_vocab, "Markov rows != the range");
  touch(d.w1);
  touch(d.w2);
  if (d.conf_w.data) touch(d.conf_w);
  if (d.w2_scale.data) touch(d.w2_scale);
  for (int64_t i = 0; d.d2t && i < rows; ++i)
    expect(d.d2t[i] >= 0 && d.d2t[i] < d.config.n_target_vocab, "a d2t entry outside [0, V_target)");
  if (d.shard.v_begin == 0 && d.shard.v_end == d.config.n_vocab) run_dspark(d, seed);
}

// The C API on a path: an in-memory file (memfd) named through /proc/self/fd.
class MemoryFile {
 public:
  MemoryFile() {
    fd_ = memfd_create("fuzz_gguf", MFD_CLOEXEC);
    if (fd_ >= 0) path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  bool write(const uint8_t* data, size_t size) {
    if (fd_ < 0 || ftruncate(fd_, 0) != 0) return false;
    size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, off_t(done));
      if (n <= 0) return false;
      done += size_t(n);
    }
    return true;
  }
  const char* path() const { return path_.c_str(); }

 private:
  int fd_ = -1;
  std::string path_;
};

void exercise_c_api(const char* path, int64_t v_begin, int64_t v_end, uint32_t seed) {
  char msg[96];
  dfsel_gguf* g = nullptr;
  const dfsel_status s = dfsel_gguf_open(path, v_begin, v_end, &g, msg, sizeof msg);
  expect((s == DFSEL_SUCCESS) == (g != nullptr), "open's status and handle disagree");
  expect(std::memchr(msg, '\0', sizeof msg) != nullptr, "the open message is not terminated");
  if (g == nullptr) return;
  dfsel_draft_kind kind{};
  expect(dfsel_gguf_draft_kind(g, &kind) == DFSEL_SUCCESS, "draft_kind failed");
  if (kind == DFSEL_DRAFT_DSPARK) {
    exercise_dspark(g, seed);
    dfsel_gguf_close(g);
    return;
  }
  dfsel_config cfg;
  dfsel_tensor ep, en, wh;
  int64_t vb, ve, n_kv, n_t;
  uint32_t version;
  expect(dfsel_gguf_config(g, &cfg) == DFSEL_SUCCESS, "config failed");
  expect(dfsel_gguf_tensors(g, &ep, &en, &wh) == DFSEL_SUCCESS, "tensors failed");
  expect(dfsel_gguf_shard(g, &vb, &ve) == DFSEL_SUCCESS, "shard failed");
  expect(dfsel_gguf_version(g, &version) == DFSEL_SUCCESS, "version failed");
  expect(dfsel_gguf_metadata_count(g, &n_kv) == DFSEL_SUCCESS, "metadata_count failed");
  expect(dfsel_gguf_tensor_count(g, &n_t) == DFSEL_SUCCESS, "tensor_count failed");
  expect(dfsel_gguf_tensors(g, &ep, nullptr, &wh) == DFSEL_INVALID_ARGUMENT, "a NULL output passed");
  for (int64_t i = -1; i <= n_kv; ++i) {
    const char* key = nullptr;
    dfsel_gguf_kv_type type;
    char value[24];
    const size_t len = 1 + (size_t(i) + seed) % sizeof value;
    const bool in_range = i >= 0 && i < n_kv;
    expect((dfsel_gguf_metadata_key(g, i, &key) == DFSEL_SUCCESS) == in_range, "metadata_key index check");
    expect((dfsel_gguf_metadata_type(g, i, &type) == DFSEL_SUCCESS) == in_range, "metadata_type index check");
    expect((dfsel_gguf_metadata_value_string(g, i, value, len) == DFSEL_SUCCESS) == in_range,
           "metadata_value_string index check");
    if (in_range) {
      expect(std::strlen(value) < len, "a value string overran its buffer length");
      dfsel_gguf_value_type_name(type.type);
    }
  }
  for (int64_t i = -1; i <= n_t; ++i) {
    dfsel_gguf_tensor_desc t;
    const bool in_range = i >= 0 && i < n_t;
    expect((dfsel_gguf_tensor_info(g, i, &t) == DFSEL_SUCCESS) == in_range, "tensor_info index check");
  }
  dfsel_gguf_value_type_name(static_cast<dfsel_gguf_value_type>(seed % 16));
  dfsel_gguf_last_error(g);
  touch(ep);
  touch(en);
  touch(wh);
  if (vb == 0 && ve == cfg.n_vocab) run_plan(cfg, ep, en, wh, seed);
  dfsel_gguf_close(g);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint32_t seed = 0;
  for (size_t i = 0; i < size && i < 64; ++i) seed = seed * 31 + data[size - 1 - i];

  dfsel::gguf::File f;
  const dfsel::Status parsed = dfsel::gguf::File::parse(data, size, &f);
  expect(parsed.ok() || !parsed.msg.empty(), "a failure without a message");
  int64_t v_begin = -1, v_end = -1;
  if (parsed.ok()) {
    exercise_file(f);
    dfsel::gguf::DSparkDraft dspark;
    const dfsel::Status markov = dfsel::gguf::DSparkDraft::load(f, -1, -1, &dspark);
    expect(markov.ok() || !markov.msg.empty(), "a failure without a message");
    if (markov.ok()) {  // a shard chosen by the input, as for the selector below
      const int64_t V = dspark.v_end();
      v_begin = int64_t(seed % uint64_t(V + 1)) - (seed >> 30 == 3 ? 1 : 0);
      v_end = v_begin + 1 + int64_t((seed >> 8) % uint64_t(V + 1));
    }
    dfsel::gguf::Selector sel;
    const dfsel::Status loaded = dfsel::gguf::Selector::load(f, -1, -1, &sel);
    expect(loaded.ok() || !loaded.msg.empty(), "a failure without a message");
    if (loaded.ok()) {
      exercise_selector(sel);
      // A shard chosen by the input, sometimes outside [0, V) on purpose.
      const int64_t V = sel.config().n_vocab;
      v_begin = int64_t(seed % uint64_t(V + 1)) - (seed >> 30 == 3 ? 1 : 0);
      v_end = v_begin + 1 + int64_t((seed >> 8) % uint64_t(V + 1));
      dfsel::gguf::Selector shard;
      if (dfsel::gguf::Selector::load(f, v_begin, v_end, &shard).ok()) exercise_selector(shard);
    }
  }

  static MemoryFile file;
  if (file.write(data, size)) {
    exercise_c_api(file.path(), -1, -1, seed);
    if (v_begin != -1) exercise_c_api(file.path(), v_begin, v_end, seed);
  }
  return 0;
}
