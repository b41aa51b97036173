// The inputs of the dfsel command: seeded synthetic problems, or the selector of a GGUF draft.
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstring>

#include "dfsel/gguf.h"
#include "kernels/common/numeric.cuh"
#include "synthetic.h"

namespace dfsel::tools {

namespace {

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately normal: the sum of four uniforms, centred and scaled to unit variance.
float normalish(uint64_t* s) {
  const uint64_t a = splitmix(s), b = splitmix(s);
  const float u = ((a & 0xffffffu) + ((a >> 32) & 0xffffffu) + (b & 0xffffffu) + ((b >> 32) & 0xffffffu)) / 16777216.0f;
  return (u - 2.0f) * 1.7320508f;
}

// Rows of a host view, packed contiguously.
void copy_rows(const dfsel_tensor& t, std::vector<uint8_t>* out) {
  const size_t rb = row_bytes(t.type, t.ne[0]);
  out->resize(rb * (size_t)t.ne[1]);
  for (int64_t r = 0; r < t.ne[1]; ++r)
    std::memcpy(out->data() + rb * r, static_cast<const uint8_t*>(t.data) + t.nb[1] * r, rb);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

size_t elem_size(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

void store_value(uint8_t* base, size_t i, dfsel_type t, float v) {
  if (t == DFSEL_TYPE_F32) {
    std::memcpy(base + 4 * i, &v, 4);
  } else {
    const uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
    std::memcpy(base + 2 * i, &h, 2);
  }
}


std::string printable(const char* s) {
  std::string out;
  for (const unsigned char* p = reinterpret_cast<const unsigned char*>(s); *p; ++p) {
    if (*p >= 0x20 && *p < 0x7f && *p != '\\') {
      out.push_back((char)*p);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", *p);
      out += buf;
    }
  }
  return out;
}

void fill_random(std::vector<uint8_t>* out, dfsel_type t, size_t n, float sigma, uint64_t seed) {
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  if (t == DFSEL_TYPE_Q8_0) {
    out->resize(n / kQ8Block * sizeof(BlockQ8_0));
    BlockQ8_0* blocks = reinterpret_cast<BlockQ8_0*>(out->data());
    for (size_t b = 0; b < n / kQ8Block; ++b) {
      float v[kQ8Block], amax = 0.0f;
      for (int i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(v[i] = sigma * normalish(&s)));
      const float d = amax / 127.0f;
      blocks[b].d = float_to_f16(d);
      for (int i = 0; i < kQ8Block; ++i) blocks[b].qs[i] = (int8_t)(d > 0 ? std::lround(v[i] / d) : 0);
    }
    return;
  }
  out->resize(n * elem_size(t));
  for (size_t i = 0; i < n; ++i) store_value(out->data(), i, t, sigma * normalish(&s));
}

std::string stored_type(const dfsel_gguf* g, const char* name, dfsel_type read_as) {
  int64_t n = 0;
  dfsel_gguf_tensor_count(g, &n);
  for (int64_t i = 0; i < n; ++i) {
    dfsel_gguf_tensor_desc t{};
    if (dfsel_gguf_tensor_info(g, i, &t) != DFSEL_SUCCESS || std::strcmp(t.name, name) != 0) continue;
    if (t.ggml_type == (int32_t)read_as) break;
    std::string s = t.type_name;
    for (char& ch : s) ch = (char)std::toupper((unsigned char)ch);
    return s + " (read as " + dfsel_type_name(read_as) + ")";
  }
  return dfsel_type_name(read_as);
}

void print_metadata(const dfsel_gguf* g, double open_seconds, std::FILE* log) {
  uint32_t version = 0;
  int64_t n_kv = 0;
  dfsel_gguf_version(g, &version);
  dfsel_gguf_metadata_count(g, &n_kv);
  std::fprintf(log, "  GGUF v%u, %lld metadata keys, opened in %.2f s\n", version, (long long)n_kv, open_seconds);
  for (int64_t i = 0; i < n_kv; ++i) {
    const char* key = nullptr;
    char value[96];
    dfsel_gguf_metadata_key(g, i, &key);
    dfsel_gguf_metadata_value_string(g, i, value, sizeof value);
    // Keys are the file's bytes: escaped like the values, so that none reaches the terminal raw.
    std::fprintf(log, "  %-40s %s\n", printable(key).c_str(), value);
  }
}

OpenDraft::~OpenDraft() {
  if (g) dfsel_gguf_close(g);
}

bool open_gguf(Problem* p, OpenDraft* d, std::FILE* log, std::string* err) {
  const auto t0 = std::chrono::steady_clock::now();
  d->path = printable(p->gguf.c_str());
  if (log) std::fprintf(log, "loading %s ...\n", d->path.c_str());
  char msg[512] = "";
  if (dfsel_gguf_open(p->gguf.c_str(), -1, -1, &d->g, msg, sizeof msg) != DFSEL_SUCCESS) {
    *err = msg;
    return false;
  }
  dfsel_config cfg{};
  if (dfsel_gguf_config(d->g, &cfg) != DFSEL_SUCCESS ||
      dfsel_gguf_tensors(d->g, &d->e_prev, &d->e_next, &d->w_h) != DFSEL_SUCCESS) {
    *err = dfsel_gguf_last_error(d->g);
    return false;
  }
  const dfsel_tensor &ep = d->e_prev, &en = d->e_next, &wh = d->w_h;
  // The view widens block-type weights (but Q8_0) to BF16; the draft's own types are the file's,
  // reported as the DSpark mode reports its weights.
  p->stored_cb_type = stored_type(d->g, "selector_predecessor.weight", ep.type);
  if (log) {
    print_metadata(d->g, seconds_since(t0), log);
    std::fprintf(log, "  selector_predecessor %s {%lld, %lld}, selector_successor %s, selector_hidden %s {%lld, %lld}\n",
                 p->stored_cb_type.c_str(), (long long)ep.ne[0], (long long)ep.ne[1],
                 stored_type(d->g, "selector_successor.weight", en.type).c_str(),
                 stored_type(d->g, "selector_hidden.weight", wh.type).c_str(), (long long)wh.ne[0], (long long)wh.ne[1]);
  }
  p->vocab = cfg.n_vocab;
  p->embd = cfg.n_embd;
  p->rank = cfg.codebook_rank;
  p->top_k = cfg.top_k;
  p->block = cfg.block_size;
  p->logit_scale = cfg.logit_scale;
  p->softcap = cfg.softcap;
  p->cb_type = ep.type;
  p->wh_type = wh.type;
  return true;
}

int64_t count_nonfinite(const std::vector<uint8_t>& rows, dfsel_type t) {
  int64_t n = 0;
  const uint8_t* b = rows.data();
  const size_t bytes = rows.size();
  auto f16_nonfinite = [](const uint8_t* p) { return (p[1] & 0x7c) == 0x7c; };  // little endian
  switch (t) {
    case DFSEL_TYPE_F32:
      for (size_t i = 0; i + 4 <= bytes; i += 4) n += (b[i + 3] & 0x7f) == 0x7f && (b[i + 2] & 0x80) == 0x80;
      break;
    case DFSEL_TYPE_F16:
      for (size_t i = 0; i + 2 <= bytes; i += 2) n += f16_nonfinite(b + i);
      break;
    case DFSEL_TYPE_BF16:
      for (size_t i = 0; i + 2 <= bytes; i += 2) n += (b[i + 1] & 0x7f) == 0x7f && (b[i] & 0x80) == 0x80;
      break;
    case DFSEL_TYPE_Q8_0:
      for (size_t i = 0; i + sizeof(BlockQ8_0) <= bytes; i += sizeof(BlockQ8_0))
        n += f16_nonfinite(b + i) ? kQ8Block : 0;
      break;
    default:
      break;
  }
  return n;
}

namespace {

void warn_nonfinite(std::FILE* warn, const std::string& path, const char* name, const std::vector<uint8_t>& rows,
                    const dfsel_tensor& t) {
  const int64_t bad = count_nonfinite(rows, t.type), all = t.ne[0] * t.ne[1];
  if (bad == 0 || !warn) return;
  const std::string count = bad == all ? "all " + std::to_string(all) + " values are"
                                       : std::to_string(bad) + " of " + std::to_string(all) +
                                             (bad == 1 ? " values is" : " values are");
  std::fprintf(warn,
               "dfsel: warning: %s: %s: %s NaN or infinite; a score that reads one is NaN (outside the "
               "selector's contract, docs/SPEC.md 2.4), and the run goes on\n",
               path.c_str(), name, count.c_str());
}

}  // namespace

void copy_weights(OpenDraft* d, HostData* h, std::FILE* log, std::FILE* warn) {
  const auto t0 = std::chrono::steady_clock::now();
  copy_rows(d->e_prev, &h->e_prev);
  copy_rows(d->e_next, &h->e_next);
  copy_rows(d->w_h, &h->w_h);
  dfsel_gguf_close(d->g);
  d->g = nullptr;
  if (log) std::fprintf(log, "  weights read in %.2f s\n", seconds_since(t0));
  // The library reads the codebooks only where a step needs them, so a draft of NaN or infinite
  // weights ran without a word (DSpark's conf_w and scale, a few values, are refused by name).
  warn_nonfinite(warn, d->path, "selector_predecessor.weight", h->e_prev, d->e_prev);
  warn_nonfinite(warn, d->path, "selector_successor.weight", h->e_next, d->e_next);
  warn_nonfinite(warn, d->path, "selector_hidden.weight", h->w_h, d->w_h);
}

// The scales make both terms of a score count, as in a trained draft (SPEC section 2):
// each drafted row has a few dozen plausible tokens well above the rest (logits N(4, 0.5^2)
// against N(0, 1)), and in some rows one of them leads by a wide margin; codebook rows of
// N(0, 0.25^2) and a gate of unit variance give lattice terms of about unit spread, so the
// walk sometimes leaves the top unary candidate, and p_min 0.5 sometimes lets a block emit.
void make_host_data(const Problem& p, HostData* h) {
  const size_t n_tokens = (size_t)p.blocks * p.block;
  const bool weights = h->e_prev.empty();  // a GGUF draft supplied them
  fill_random(&h->logits, p.logits_type, n_tokens * p.vocab, 1.0f, p.seed * 7 + 1);
  uint64_t s = p.seed * 7 + 8;
  const int n_plausible = 24;
  for (size_t t = 0; t < n_tokens; ++t) {
    uint8_t* row = h->logits.data() + t * p.vocab * elem_size(p.logits_type);
    const bool led = splitmix(&s) % 5 < 3;
    for (int i = 0; i < n_plausible; ++i) {
      const size_t v = (size_t)(splitmix(&s) % (uint64_t)p.vocab);
      store_value(row, v, p.logits_type, 4.0f + 0.5f * normalish(&s) + (led && i == 0 ? 4.0f : 0.0f));
    }
  }
  fill_random(&h->hidden, p.logits_type, n_tokens * p.embd, 1.0f, p.seed * 7 + 2);
  if (weights) {
    fill_random(&h->e_prev, p.cb_type, (size_t)p.vocab * p.rank, 0.25f, p.seed * 7 + 3);
    fill_random(&h->e_next, p.cb_type, (size_t)p.vocab * p.rank, 0.25f, p.seed * 7 + 4);
    fill_random(&h->w_h, p.wh_type, (size_t)p.rank * p.embd, 1.0f / std::sqrt((float)p.embd), p.seed * 7 + 5);
  }
  s = p.seed * 7 + 6;
  h->anchors.resize(p.blocks);
  for (auto& a : h->anchors) a = (int32_t)(splitmix(&s) % (uint64_t)p.vocab);
}

std::string count_refusal(int shards, int blocks, int64_t vocab, bool from_draft) {
  if (shards < 1 || blocks < 1) return "--shards and --blocks must be at least 1";
  if (shards > vocab)
    return "--shards = " + std::to_string(shards) + " is more than the " + (from_draft ? "draft's " : "") +
           "vocabulary has tokens (V = " + std::to_string(vocab) + "); every shard holds at least one";
  return "";
}

double host_bytes(const Problem& p) {
  const double n_tokens = (double)p.blocks * p.block;
  const double ls = (double)elem_size(p.logits_type);
  return n_tokens * (double)p.vocab * ls + n_tokens * (double)p.embd * ls +
         2.0 * (double)p.vocab * (double)row_bytes(p.cb_type, p.rank) + (double)p.rank * (double)row_bytes(p.wh_type, p.embd);
}

std::string bytes_text(double bytes) {
  char s[32];
  const double mib = bytes / 1048576.0;
  if (mib < 1024) std::snprintf(s, sizeof s, "%.0f MiB", mib);
  else std::snprintf(s, sizeof s, "%.1f GiB", mib / 1024);
  return s;
}

}  // namespace dfsel::tools
