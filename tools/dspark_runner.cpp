// The DSpark runner (dspark_runner.h): a synthetic draft or a GGUF draft's Markov head, cut into
// S ranks' descriptions, and one chain of all of them per step.
#include "dspark_runner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iterator>
#include <new>
#include <numeric>
#include <random>

#include "field_names.h"
#include "kernels/common/dspark_math.cuh"
#include "kernels/common/numeric.cuh"
#include "synthetic.h"

namespace dfsel::tools {

namespace {

// The fields of a DSpark description as the command's user set them: a flag, or a draft's key.
constexpr FieldName kFlags[] = {
    {"config.n_vocab", "--vocab"},         {"config.n_target_vocab", "--target-vocab"},
    {"config.markov_rank", "--rank"},      {"config.n_draft", "--n-draft"},
    {"config.n_embd", "--embd"},           {"config.sample_from_anchor", "--sample-from-anchor"},
    {"config.max_blocks", "--blocks"},     {"shard.n_ranks", "--shards"},
    {"n_threads", "--threads"},            {"inputs.temperature", "--temperature"},
    {"inputs.p_min", "--p-min"},           {"w1 is Q8_0 but ne[0]", "--weight-type q8_0 but --rank"},
    {"the plan has none (conf_w)", "this chain has none (--embd)"}};
constexpr FieldName kDraftKeys[] = {
    {"config.n_vocab", "the draft's vocabulary (rows of markov_w2.weight)"},
    {"config.n_target_vocab", "the draft's target vocabulary (rows of markov_w1.weight)"},
    {"config.markov_rank", "the Markov rank (ne[0] of markov_w1.weight)"},
    {"config.n_draft", "dflash.block_size"},
    {"config.n_embd", "dflash.embedding_length"},
    {"w2_scale", "markov_w2.scale"},
    {"conf_bias", "conf_proj.bias"},
    {"conf_w[", "conf_proj.weight["}};  // not "(conf_w)": that sentence is --p-min's
constexpr UsersWords kWords{kFlags, std::size(kFlags), kDraftKeys, std::size(kDraftKeys)};

// A refusal of the library in the user's words, and whether the request itself was bad: a value
// the flags gave that the library refuses; a draft's own values are the file's fault.
std::string refusal(const DSparkProblem& p, dfsel_status st, const char* msg, bool* bad_request) {
  return dfsel::tools::refusal(st, msg, kWords, p.gguf.empty() ? "" : printable(p.gguf.c_str()), bad_request);
}

// --placement sharded splits W1 by draft ids, which needs the draft ids to be the target ids:
// a d2t map conflicts with the flag, whichever made it (the draft's own, or the random one that
// --target-vocab larger than --vocab asks for). The request is bad, not the file: the library's
// refusal would name its fields and, for a draft, the file. "" when there is no conflict.
std::string placement_refusal(const DSparkProblem& p, bool has_d2t) {
  if (!p.sharded || !has_d2t) return "";
  const std::string why = "--placement sharded splits W1 by draft ids, so it needs the draft ids to be the target ids, but ";
  if (p.gguf.empty())
    return why + "--target-vocab " + std::to_string(p.target_vocab) + " is larger than --vocab " + std::to_string(p.vocab) +
           " (a random d2t map); give --placement replicated, or no --target-vocab";
  return why + printable(p.gguf.c_str()) + " maps its draft ids to target ids (d2t); give --placement replicated";
}

}  // namespace

struct DSparkRunner::Impl {
  DSparkProblem p;
  dfsel_gguf* g = nullptr;
  dfsel_dspark_plan_desc full{};  // the whole draft as one rank
  std::vector<uint8_t> w1, w2, conf, logits, hidden;
  std::vector<int32_t> d2t, anchors;
  std::vector<dfsel_dspark_plan*> plans;
  std::vector<dfsel_dspark_inputs> in;
  std::vector<dfsel_dspark_outputs> out;
  std::vector<std::vector<int32_t>> tokens, n_emitted;

  ~Impl() {
    for (dfsel_dspark_plan* pl : plans) dfsel_dspark_plan_destroy(pl);
    if (g) dfsel_gguf_close(g);
  }

  // Rank s's part of the whole draft's description.
  dfsel_dspark_plan_desc rank_desc(int s) const {
    dfsel_dspark_plan_desc d = full;
    const int64_t vb = p.vocab * s / p.shards, ve = p.vocab * (s + 1) / p.shards;
    d.shard = dfsel_shard{s, p.shards, vb, ve};
    d.config.max_blocks = p.blocks;
    d.backend = DFSEL_BACKEND_CPU;
    d.n_threads = p.threads;
    d.placement = p.sharded ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
    auto rows = [&](dfsel_tensor t, int64_t first, int64_t n) {
      t.data = static_cast<const uint8_t*>(t.data) + (size_t)first * t.nb[1];
      t.ne[1] = n;
      t.nb[2] = t.nb[3] = t.nb[1] * (size_t)n;
      return t;
    };
    d.w2 = rows(full.w2, vb, ve - vb);
    if (p.sharded) d.w1 = rows(full.w1, vb, ve - vb);
    if (full.w2_scale.data && full.w2_scale.ne[0] > 1) {
      d.w2_scale.data = static_cast<const float*>(full.w2_scale.data) + vb;
      d.w2_scale.ne[0] = ve - vb;
    }
    if (full.d2t) d.d2t = full.d2t + vb;
    return d;
  }
};

DSparkRunner::DSparkRunner() : impl_(new Impl) {}
DSparkRunner::~DSparkRunner() = default;

namespace {

bool load_draft(DSparkProblem* p, dfsel_gguf** g, dfsel_dspark_plan_desc* full, std::FILE* log,
                std::string* err) {
  const auto t0 = std::chrono::steady_clock::now();
  if (log) std::fprintf(log, "loading %s ...\n", printable(p->gguf.c_str()).c_str());
  char msg[512] = "";
  if (dfsel_gguf_open(p->gguf.c_str(), -1, -1, g, msg, sizeof msg) != DFSEL_SUCCESS) {
    *err = msg;
    return false;
  }
  if (dfsel_gguf_dspark_desc(*g, full) != DFSEL_SUCCESS) {
    *err = dfsel_gguf_last_error(*g);
    return false;
  }
  // The view widens block-type weights (but Q8_0) to BF16; the draft's own types are the file's.
  const std::string w1_type = stored_type(*g, "markov_w1.weight", full->w1.type);
  p->stored_weight_type = stored_type(*g, "markov_w2.weight", full->w2.type);
  if (log) {
    print_metadata(*g, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), log);
    std::fprintf(log, "  markov_w1 %s {%lld, %lld}, markov_w2 %s, scale %s, confidence head %s, d2t %s\n",
                 w1_type.c_str(), (long long)full->w1.ne[0], (long long)full->w1.ne[1],
                 p->stored_weight_type.c_str(), full->w2_scale.data ? "yes" : "no", full->conf_w.data ? "yes" : "no",
                 full->d2t ? "yes" : "no");
  }
  const dfsel_dspark_config& c = full->config;
  p->vocab = c.n_vocab;
  p->target_vocab = c.n_target_vocab;
  p->embd = c.n_embd;
  p->rank = c.markov_rank;
  p->n_draft = c.n_draft;
  p->from_anchor = c.sample_from_anchor != 0;
  p->weight_type = full->w2.type;
  return true;
}

// A synthetic draft's weights: W1 and W2 rows of spread R^-1/4 make the bias as large as the
// logits' spread, so that the chain sometimes leaves the base logits' favourite.
void make_weights(const DSparkProblem& p, std::vector<uint8_t>* w1, std::vector<uint8_t>* w2,
                  std::vector<uint8_t>* conf, std::vector<int32_t>* d2t, dfsel_dspark_plan_desc* full) {
  const float sigma = 1.0f / std::sqrt(std::sqrt((float)p.rank));
  const size_t rb = row_bytes(p.weight_type, p.rank);
  fill_random(w1, p.weight_type, (size_t)p.target_vocab * p.rank, sigma, p.seed * 7 + 3);
  fill_random(w2, p.weight_type, (size_t)p.vocab * p.rank, sigma, p.seed * 7 + 4);
  full->config = dfsel_dspark_config{p.vocab, p.target_vocab, p.embd, p.rank, p.n_draft, p.from_anchor ? 1 : 0, 0.0f, 0.0f, 0};
  full->w1 = dfsel_tensor_2d(w1->data(), p.weight_type, p.rank, p.target_vocab, rb);
  full->w2 = dfsel_tensor_2d(w2->data(), p.weight_type, p.rank, p.vocab, rb);
  if (p.embd > 0) {
    fill_random(conf, DFSEL_TYPE_F32, (size_t)(p.embd + p.rank), 1.0f / std::sqrt((float)(p.embd + p.rank)), p.seed * 7 + 5);
    full->conf_w = dfsel_tensor_2d(conf->data(), DFSEL_TYPE_F32, p.embd + p.rank, 1, conf->size());
  }
  if (p.target_vocab > p.vocab) {
    std::vector<int32_t> ids((size_t)p.target_vocab);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), std::mt19937_64(p.seed * 7 + 6));
    d2t->assign(ids.begin(), ids.begin() + p.vocab);
    full->d2t = d2t->data();
  }
}

// Base logits N(0, 1) with a few dozen plausible tokens per row near 4, as a trained draft's.
void make_logits(const DSparkProblem& p, std::vector<uint8_t>* logits, std::vector<uint8_t>* hidden) {
  const int rows = p.blocks * dspark_rows_per_block(p.n_draft, p.from_anchor);
  fill_random(logits, p.logits_type, (size_t)rows * p.vocab, 1.0f, p.seed * 7 + 1);
  std::mt19937_64 rng(p.seed * 7 + 8);
  std::normal_distribution<float> plausible(4.0f, 0.5f);
  for (int r = 0; r < rows; ++r)
    for (int i = 0; i < 24; ++i)
      store_value(logits->data(), (size_t)r * p.vocab + rng() % (uint64_t)p.vocab, p.logits_type, plausible(rng));
  if (p.embd > 0) fill_random(hidden, p.logits_type, (size_t)rows * p.embd, 1.0f, p.seed * 7 + 2);
}

}  // namespace

bool DSparkRunner::setup(const DSparkProblem& problem, std::FILE* log, std::string* err, bool* bad_request) {
  Impl& m = *impl_;
  m.p = problem;
  DSparkProblem& p = m.p;
  if (bad_request) *bad_request = false;
  if (!p.gguf.empty() && !load_draft(&p, &m.g, &m.full, log, err)) return false;
  if (p.target_vocab == 0) p.target_vocab = p.vocab;
  // What the flags alone decide is refused before anything is made (a synthetic draft's weights
  // take about a second to fill).
  if (p.gguf.empty() && p.target_vocab < p.vocab) {
    if (bad_request) *bad_request = true;
    return *err = "--target-vocab " + std::to_string(p.target_vocab) + " is smaller than --vocab " +
                  std::to_string(p.vocab) + "; a synthetic chain's target vocabulary is --vocab, or larger with a random "
                  "d2t map", false;
  }
  *err = placement_refusal(p, p.gguf.empty() ? p.target_vocab > p.vocab : m.full.d2t != nullptr);
  if (!err->empty()) {
    if (bad_request) *bad_request = true;
    return false;
  }
  if (p.p_min > 0.0f && p.embd == 0) {
    if (bad_request) *bad_request = true;
    char v[32];
    std::snprintf(v, sizeof v, "%g", p.p_min);
    return *err = "--p-min = " + std::string(v) + " needs a confidence head, and " +
                  (p.gguf.empty() ? std::string("this chain has none (--embd)") : "the draft has none"), false;
  }
  *err = count_refusal(p.shards, p.blocks, p.vocab, !p.gguf.empty());
  if (!err->empty()) {
    if (bad_request) *bad_request = true;
    return false;
  }
  // The library judges the sizes first (stand-in weights, never read), then the memory.
  alignas(64) static const uint8_t stand_in[64] = {};
  dfsel_dspark_plan_desc probe = m.full;
  if (p.gguf.empty()) {
    const size_t rb = row_bytes(p.weight_type, p.rank);
    probe.config = dfsel_dspark_config{p.vocab, p.vocab, p.embd, p.rank, p.n_draft, p.from_anchor ? 1 : 0, 0.0f, 0.0f, 0};
    probe.w1 = dfsel_tensor_2d(stand_in, p.weight_type, p.rank, p.vocab, rb);
    probe.w2 = dfsel_tensor_2d(stand_in, p.weight_type, p.rank, p.vocab, rb);
    if (p.embd > 0) probe.conf_w = dfsel_tensor_2d(stand_in, DFSEL_TYPE_F32, p.embd + p.rank, 1, (size_t)(p.embd + p.rank) * 4);
    // A synthetic d2t is judged with the real map, at plan creation.
  }
  const dfsel_dspark_plan_desc whole = m.full;
  m.full = probe;
  double need = 0;
  for (int s = 0; s < p.shards; ++s) {
    size_t ws = 0;
    char msg[512] = "";
    const dfsel_dspark_plan_desc d = m.rank_desc(s);
    const dfsel_status st = dfsel_dspark_workspace_size(&d, &ws, msg, sizeof msg);
    if (st != DFSEL_SUCCESS) {
      const std::string why = refusal(p, st, msg, bad_request);
      return *err = p.shards > 1 ? "shard " + std::to_string(s) + ": " + why : why, false;
    }
    need += (double)ws;
  }
  m.full = whole;
  const double n_rows = (double)p.blocks * dspark_rows_per_block(p.n_draft, p.from_anchor);
  need += n_rows * ((double)p.vocab + (double)p.embd) * (double)elem_size(p.logits_type);
  if (p.gguf.empty()) need += (double)(p.vocab + p.target_vocab) * (double)row_bytes(p.weight_type, p.rank);
  const double have = available_bytes();
  if (have >= 0 && need > have) {
    return *err = "this chain needs about " + bytes_text(need) + " of memory and " + bytes_text(have) +
                  " are available; " + (p.gguf.empty() ? "lower --vocab, --blocks or --n-draft" : "lower --blocks or --shards"),
           false;
  }
  try {
    if (p.gguf.empty()) make_weights(p, &m.w1, &m.w2, &m.conf, &m.d2t, &m.full);
    make_logits(p, &m.logits, &m.hidden);
  } catch (const std::bad_alloc&) {
    return *err = "the chain's inputs could not be allocated", false;
  }
  std::mt19937_64 rng(p.seed * 7 + 9);
  m.anchors.resize(p.blocks);
  for (int32_t& a : m.anchors) a = (int32_t)(rng() % (uint64_t)p.target_vocab);
  const int rpb = dspark_rows_per_block(p.n_draft, p.from_anchor);
  const size_t es = elem_size(p.logits_type);
  m.plans.assign(p.shards, nullptr);
  m.in.assign(p.shards, dfsel_dspark_inputs{});
  m.out.assign(p.shards, dfsel_dspark_outputs{});
  m.tokens.assign(p.shards, std::vector<int32_t>((size_t)p.blocks * p.n_draft));
  m.n_emitted.assign(p.shards, std::vector<int32_t>(p.blocks));
  for (int s = 0; s < p.shards; ++s) {
    const dfsel_dspark_plan_desc d = m.rank_desc(s);
    char msg[512] = "";
    const dfsel_status st = dfsel_dspark_plan_create(&d, &m.plans[s], msg, sizeof msg);
    if (st != DFSEL_SUCCESS) return *err = "plan for shard " + std::to_string(s) + ": " + refusal(p, st, msg, bad_request), false;
    dfsel_dspark_inputs& in = m.in[s];
    const int64_t vb = d.shard.v_begin, vs = d.shard.v_end - vb;
    in.logits = dfsel_tensor_2d(m.logits.data() + (size_t)vb * es, p.logits_type, vs, (int64_t)p.blocks * rpb, p.vocab * es);
    if (p.embd > 0) in.hidden = dfsel_tensor_2d(m.hidden.data(), p.logits_type, p.embd, (int64_t)p.blocks * rpb, p.embd * es);
    in.anchors = m.anchors.data();
    in.n_blocks = p.blocks;
    in.temperature = p.temperature;
    in.p_min = p.p_min;
    in.seed = p.seed;
    m.out[s] = dfsel_dspark_outputs{p.blocks, m.tokens[s].data(), m.n_emitted[s].data(), nullptr, nullptr, nullptr, nullptr,
                                    nullptr};
  }
  return true;
}

bool DSparkRunner::step(double* us, std::string* err, bool* bad_request) {
  Impl& m = *impl_;
  const auto t0 = std::chrono::steady_clock::now();
  const dfsel_status st = dfsel_dspark_run_group((int)m.plans.size(), m.plans.data(), m.in.data(), m.out.data(), nullptr);
  if (st != DFSEL_SUCCESS) {
    *err = refusal(m.p, st, dfsel_dspark_plan_last_error(m.plans[0]), bad_request);
    return false;
  }
  *us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

const DSparkProblem& DSparkRunner::problem() const { return impl_->p; }
const std::vector<int32_t>& DSparkRunner::tokens() const { return impl_->tokens[0]; }
const std::vector<int32_t>& DSparkRunner::n_emitted() const { return impl_->n_emitted[0]; }
int32_t DSparkRunner::anchor(int b) const { return impl_->anchors[b]; }
size_t DSparkRunner::w2_bytes() const { return (size_t)impl_->p.vocab * row_bytes(impl_->full.w2.type, impl_->p.rank); }

}  // namespace dfsel::tools
