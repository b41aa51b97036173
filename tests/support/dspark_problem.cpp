#include "dspark_problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "gguf_writer.h"
#include "host/gguf/dequant.h"
#include "host/reference/dspark_reference.h"
#include "kernels/common/dspark_math.cuh"

namespace dfsel::test {

namespace {

// rows x cols weights of type t, and the values the library computes with.
void weights(dfsel_type t, size_t rows, size_t cols, float sigma, std::mt19937_64& rng, std::vector<uint8_t>* bytes,
             std::vector<float>* values) {
  if (is_widened_type(t)) {
    std::normal_distribution<float> nd(0.0f, sigma);
    std::vector<float> x(rows * cols);
    for (float& v : x) v = nd(rng);
    *bytes = quantize(t, x.data(), (int64_t)x.size());
    std::vector<uint16_t> wide(rows * cols);
    gguf::widen_to_bf16(bytes->data(), t, (int64_t)rows, (int64_t)cols, row_bytes(t, (int64_t)cols), wide.data());
    values->resize(rows * cols);
    for (size_t i = 0; i < wide.size(); ++i) (*values)[i] = bf16_to_float(wide[i]);
    return;
  }
  fill_weights(bytes, t, rows, cols, sigma, rng);
  values->resize(rows * cols);
  const size_t rb = row_bytes(t, (int64_t)cols);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) (*values)[r * cols + i] = load_elem(bytes->data() + r * rb, t, (int64_t)i);
}

// Rows of a float matrix stored as t with nb1 bytes between rows; the stored values kept.
void floats(dfsel_type t, size_t rows, size_t cols, size_t pad, std::vector<float>& src, std::vector<uint8_t>* bytes,
            size_t* nb1) {
  *nb1 = (cols + pad) * elem_size(t);
  bytes->assign(rows * *nb1, 0);
  for (size_t r = 0; r < rows; ++r)
    for (size_t i = 0; i < cols; ++i) src[r * cols + i] = store_elem(bytes->data() + r * *nb1, i, t, src[r * cols + i]);
}

dfsel_tensor rows_of(const std::vector<uint8_t>& bytes, dfsel_type t, int64_t ne0, int64_t first, int64_t n) {
  const size_t rb = row_bytes(t, ne0);
  return make_matrix(bytes.data() + (size_t)first * rb, t, ne0, n, rb);
}

template <class T>
void poison(std::vector<T>& v, size_t n) {
  v.resize(n);
  std::memset(v.data(), 0xff, n * sizeof(T));
}

template <class T>
long first_bits_diff(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], sizeof(T)) != 0) return (long)i;
  return -1;
}

}  // namespace

std::string DSparkCase::str() const {
  std::ostringstream os;
  os << "V=" << V << " V_target=" << V_target << " E=" << E << " R=" << R << " N=" << N << " blocks=" << blocks
     << " max_blocks=" << max_blocks << " from_anchor=" << from_anchor << " d2t=" << d2t << " scale_rows=" << scale_rows
     << " logits=" << dfsel_type_name(logits_t) << " w1=" << dfsel_type_name(w1_t) << " w2=" << dfsel_type_name(w2_t)
     << " conf=" << dfsel_type_name(conf_t) << " m=" << logit_scale << " c=" << softcap << " special=" << (int)special;
  return os.str();
}

DSparkData make_dspark_data(const DSparkCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  DSparkData d;
  const size_t n_rows = (size_t)c.blocks * c.rows();
  // e and W2 rows of spread R^-1/4 each give biases of unit spread, as large as the logits'.
  const float sigma = 1.0f / std::sqrt(std::sqrt((float)c.R));
  weights(c.w1_t, (size_t)c.V_target, (size_t)c.R, sigma, rng, &d.w1, &d.w1_f);
  weights(c.w2_t, (size_t)c.V, (size_t)c.R, sigma, rng, &d.w2, &d.w2_f);
  if (c.special == Special::kTies)  // equal rows of W2 under equal logits tie exactly
    for (int64_t v = 1; v < c.V; v += 3) {
      const size_t rb = row_bytes(c.w2_t, c.R);
      std::memcpy(&d.w2[(size_t)v * rb], &d.w2[(size_t)(v - 1) * rb], rb);
      std::copy_n(&d.w2_f[(size_t)(v - 1) * c.R], c.R, &d.w2_f[(size_t)v * c.R]);
    }
  std::normal_distribution<float> nd(0.0f, 1.0f);
  d.logits_f.resize(n_rows * (size_t)c.V);
  for (size_t t = 0; t < n_rows; ++t)
    for (int64_t v = 0; v < c.V; ++v) {
      const float x = c.special == Special::kTies ? std::round(2.0f * nd(rng)) : nd(rng);
      d.logits_f[t * c.V + v] = special_value(c.special, rng, x, v);
    }
  floats(c.logits_t, n_rows, (size_t)c.V, c.logits_pad, d.logits_f, &d.logits, &d.logits_nb1);
  if (c.E > 0) {
    d.hidden_f.resize(n_rows * (size_t)c.E);
    for (float& x : d.hidden_f) x = nd(rng);
    floats(c.hidden_t, n_rows, (size_t)c.E, 0, d.hidden_f, &d.hidden, &d.hidden_nb1);
    weights(c.conf_t, 1, (size_t)(c.E + c.R), 1.0f / std::sqrt((float)(c.E + c.R)), rng, &d.conf_w, &d.conf_f);
  }
  if (c.scale_rows) {
    d.scale.resize(c.scale_rows == 1 ? 1 : (size_t)c.V);
    for (float& s : d.scale) s = 0.5f + (float)(rng() % 1024) / 1024.0f;
  }
  if (c.d2t) {
    std::vector<int32_t> ids((size_t)c.V_target);
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    d.d2t.assign(ids.begin(), ids.begin() + c.V);
  }
  d.anchors.resize((size_t)c.blocks);
  for (int32_t& a : d.anchors) a = (int32_t)(rng() % (uint64_t)(c.d2t ? c.V_target : c.V));
  return d;
}

dfsel_dspark_plan_desc dspark_desc(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, int s) {
  const int S = r.bounds.empty() ? 1 : (int)r.bounds.size() - 1;
  const int64_t vb = r.bounds.empty() ? 0 : r.bounds[s], ve = r.bounds.empty() ? c.V : r.bounds[s + 1];
  const bool sharded = r.placement == DFSEL_CODEBOOKS_SHARDED;
  dfsel_dspark_plan_desc desc{};
  desc.config = dfsel_dspark_config{c.V, c.V_target, c.E, c.R, c.N, c.from_anchor ? 1 : 0, c.logit_scale, c.softcap,
                                    c.max_blocks ? c.max_blocks : c.blocks};
  desc.shard = dfsel_shard{s, S, vb, ve};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.placement = r.placement;
  desc.w1 = sharded ? rows_of(d.w1, c.w1_t, c.R, vb, ve - vb) : rows_of(d.w1, c.w1_t, c.R, 0, c.V_target);
  desc.w2 = rows_of(d.w2, c.w2_t, c.R, vb, ve - vb);
  if (c.scale_rows == 1) desc.w2_scale = make_matrix(d.scale.data(), DFSEL_TYPE_F32, 1, 1, 4);
  if (c.scale_rows == 2) desc.w2_scale = make_matrix(d.scale.data() + vb, DFSEL_TYPE_F32, ve - vb, 1, (size_t)(ve - vb) * 4);
  if (c.E > 0) desc.conf_w = rows_of(d.conf_w, c.conf_t, c.E + c.R, 0, 1);
  desc.conf_bias = c.conf_bias;
  desc.d2t = c.d2t ? d.d2t.data() + vb : nullptr;
  desc.n_threads = r.n_threads;
  return desc;
}

dfsel_dspark_outputs dspark_outputs_over(std::vector<int32_t> (&store)[7], int32_t n_blocks, size_t cells, size_t slack,
                                         int32_t fill) {
  for (int i = 0; i < 7; ++i) store[i].assign((i == 1 ? (size_t)n_blocks : cells) + slack, fill);
  auto f = [&](int i) { return reinterpret_cast<float*>(store[i].data()); };
  return dfsel_dspark_outputs{n_blocks, store[0].data(), store[1].data(), store[2].data(), f(3), f(4), f(5), f(6)};
}

dfsel_dspark_inputs dspark_inputs(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, int s) {
  const int64_t vb = r.bounds.empty() ? 0 : r.bounds[s], ve = r.bounds.empty() ? c.V : r.bounds[s + 1];
  const int64_t n_rows = (int64_t)c.blocks * c.rows();
  dfsel_dspark_inputs in{};
  in.logits = make_matrix(d.logits.data() + (size_t)vb * elem_size(c.logits_t), c.logits_t, ve - vb, n_rows, d.logits_nb1);
  if (c.E > 0) in.hidden = make_matrix(d.hidden.data(), c.hidden_t, c.E, n_rows, d.hidden_nb1);
  in.anchors = d.anchors.data();
  in.n_blocks = c.blocks;
  in.temperature = r.temperature;
  in.p_min = r.p_min;
  in.seed = r.seed;
  return in;
}

namespace {

dfsel_dspark_outputs bind(const DSparkCase& c, const DSparkRunOpts& r, DSparkResult& res) {
  const size_t cells = (size_t)c.blocks * c.N;
  poison(res.tokens, cells);
  poison(res.n_emitted, (size_t)c.blocks);
  dfsel_dspark_outputs o{};
  o.n_blocks = c.blocks;
  o.tokens = res.tokens.data();
  o.n_emitted = res.n_emitted.data();
  if (!r.optional_outputs) return o;
  poison(res.draft_ids, cells);
  poison(res.logits, cells);
  o.draft_ids = res.draft_ids.data();
  o.logits = res.logits.data();
  if (r.temperature > 0.0f) {
    poison(res.probs, cells);
    poison(res.log_norm, cells);
    o.probs = res.probs.data();
    o.log_norm = res.log_norm.data();
  }
  if (c.E > 0) {
    poison(res.confidence, cells);
    o.confidence = res.confidence.data();
  }
  return o;
}

}  // namespace

DSparkResult run_dspark(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r) {
  const int S = r.bounds.empty() ? 1 : (int)r.bounds.size() - 1;
  std::vector<dfsel_dspark_plan*> plans(S, nullptr);
  std::vector<DSparkResult> res(S);
  std::vector<dfsel_dspark_inputs> in(S);
  std::vector<dfsel_dspark_outputs> out(S);
  DSparkResult first;
  for (int s = 0; s < S && first.status == DFSEL_SUCCESS; ++s) {
    const dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, s);
    char msg[512] = "";
    first.status = dfsel_dspark_plan_create(&desc, &plans[s], msg, sizeof msg);
    first.error = msg;
    in[s] = dspark_inputs(c, d, r, s);
    out[s] = bind(c, r, res[s]);
  }
  if (first.status == DFSEL_SUCCESS) {
    first.status = dfsel_dspark_run_group(S, plans.data(), in.data(), out.data(), nullptr);
    first.error = dfsel_dspark_plan_last_error(plans[0]);
  }
  for (dfsel_dspark_plan* p : plans) dfsel_dspark_plan_destroy(p);
  if (first.status != DFSEL_SUCCESS) return first;
  for (int s = 1; s < S; ++s) {
    const std::string diff = dspark_bitwise_diff(res[0], res[s]);
    if (!diff.empty()) {
      res[0].status = DFSEL_INTERNAL_ERROR;
      res[0].error = "rank " + std::to_string(s) + " differs from rank 0: " + diff;
    }
  }
  return res[0];
}

DSparkResult reference_dspark(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r) {
  DSparkRunOpts one = r;
  one.bounds.clear();
  one.placement = DFSEL_CODEBOOKS_REPLICATED;
  dfsel_dspark_plan_desc desc = dspark_desc(c, d, one, 0);
  // Plan creation widens block-type weights to BF16; the reference reads what the plan reads.
  std::vector<uint16_t> wide[3];
  dfsel_tensor* ts[3] = {&desc.w1, &desc.w2, &desc.conf_w};
  for (int i = 0; i < 3; ++i) {
    dfsel_tensor& t = *ts[i];
    if (!t.data || !is_widened_type(t.type)) continue;
    wide[i].resize((size_t)(t.ne[0] * t.ne[1]));
    gguf::widen_to_bf16(static_cast<const uint8_t*>(t.data), t.type, t.ne[1], t.ne[0], t.nb[1], wide[i].data());
    t = make_matrix(wide[i].data(), DFSEL_TYPE_BF16, t.ne[0], t.ne[1], (size_t)t.ne[0] * 2);
  }
  DSparkResult res;
  const dfsel_dspark_outputs out = bind(c, r, res);
  const ref::ChainFault f = ref::dspark_chain(desc, dspark_inputs(c, d, one, 0), out);
  if (f.block >= 0) {
    res.status = DFSEL_INVALID_ARGUMENT;
    res.error = f.step == 0 ? "anchor " + std::to_string(f.id) + " of block " + std::to_string(f.block) + " is out of range"
                            : "d2t maps draft id " + std::to_string(f.draft_id) + " (block " + std::to_string(f.block) +
                                  ", step " + std::to_string(f.step) + ") to " + std::to_string(f.id);
  }
  return res;
}

std::string dspark_bitwise_diff(const DSparkResult& a, const DSparkResult& b) {
  std::ostringstream os;
  const struct {
    const char* name;
    long at;
  } diffs[] = {{"tokens", first_bits_diff(a.tokens, b.tokens)},       {"n_emitted", first_bits_diff(a.n_emitted, b.n_emitted)},
               {"draft_ids", first_bits_diff(a.draft_ids, b.draft_ids)}, {"logits", first_bits_diff(a.logits, b.logits)},
               {"probs", first_bits_diff(a.probs, b.probs)},           {"log_norm", first_bits_diff(a.log_norm, b.log_norm)},
               {"confidence", first_bits_diff(a.confidence, b.confidence)}};
  for (const auto& x : diffs)
    if (x.at >= 0) {
      os << x.name << " differ at " << x.at;
      return os.str();
    }
  return "";
}

namespace {

const dfsel_type kFloats[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
const dfsel_type kWeights[] = {DFSEL_TYPE_F32,  DFSEL_TYPE_F16,  DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_Q4_0,
                               DFSEL_TYPE_Q4_1, DFSEL_TYPE_Q5_0, DFSEL_TYPE_Q5_1, DFSEL_TYPE_Q2_K, DFSEL_TYPE_Q3_K,
                               DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q5_K, DFSEL_TYPE_Q6_K};

// A weight type that rows of n elements can hold.
dfsel_type weight_type(std::mt19937_64& rng, int64_t n) {
  for (;;) {
    const dfsel_type t = kWeights[rng() % std::size(kWeights)];
    const int64_t block = t == DFSEL_TYPE_Q8_0 ? 32 : is_widened_type(t) ? widened_block(t).elems : 1;
    if (n % block == 0) return t;
  }
}

}  // namespace

DSparkCase random_dspark_case(std::mt19937_64& rng) {
  DSparkCase c;
  c.V = 40 + (int64_t)(rng() % 900);
  c.d2t = rng() % 3 == 0;
  c.V_target = c.d2t ? c.V + (int64_t)(rng() % 200) : c.V;
  c.R = rng() % 4 == 0 ? 256 : rng() % 2 ? 32 * (1 + (int)(rng() % 4)) : 1 + (int)(rng() % 70);
  c.E = rng() % 2 ? 0 : 8 + (int64_t)(rng() % 60);
  if (c.E > 0 && rng() % 4 == 0) c.E = 256 * 2 - c.R % 256;  // lets the head's row be a K-quant
  c.N = 1 + (int)(rng() % 7);
  c.blocks = 1 + (int)(rng() % 5);
  c.from_anchor = rng() % 2;
  c.scale_rows = (int)(rng() % 3);
  c.logits_t = kFloats[rng() % 3];
  c.hidden_t = kFloats[rng() % 3];
  c.w1_t = weight_type(rng, c.R);
  c.w2_t = weight_type(rng, c.R);
  c.conf_t = weight_type(rng, c.E + c.R);
  c.logit_scale = rng() % 3 == 0 ? 0.5f + (float)(rng() % 100) / 100.0f : 0.0f;
  c.softcap = rng() % 3 == 0 ? 5.0f + (float)(rng() % 20) : 0.0f;
  c.conf_bias = rng() % 2 ? 0.0f : (float)((int)(rng() % 200) - 100) / 100.0f;
  c.logits_pad = rng() % 3 == 0 ? rng() % 9 : 0;
  return c;
}

DSparkRunOpts random_dspark_opts(const DSparkCase& c, std::mt19937_64& rng) {
  DSparkRunOpts r;
  const int S = 1 + (int)(rng() % 4);
  if (S > 1) r.bounds = random_bounds(c.V, S, 1, rng);
  r.placement = !c.d2t && rng() % 2 ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
  r.temperature = rng() % 2 ? 0.0f : 0.3f + (float)(rng() % 200) / 100.0f;
  r.p_min = c.E > 0 && rng() % 2 ? 0.3f + (float)(rng() % 40) / 100.0f : 0.0f;
  r.seed = rng();
  r.n_threads = (int32_t)(rng() % 4);
  return r;
}

std::vector<std::pair<DSparkCase, DSparkRunOpts>> random_dspark_runs(std::mt19937_64& rng, int n) {
  std::vector<std::pair<DSparkCase, DSparkRunOpts>> runs;
  for (int i = 0; i < n; ++i) {
    const DSparkCase c = random_dspark_case(rng);
    runs.emplace_back(c, random_dspark_opts(c, rng));
  }
  return runs;
}

std::vector<std::pair<DSparkCase, DSparkRunOpts>> special_dspark_runs(std::mt19937_64& rng) {
  std::vector<std::pair<DSparkCase, DSparkRunOpts>> runs;
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual, Special::kMixed})
    for (dfsel_type t : kFloats)
      for (float temperature : {0.0f, 0.7f}) {
        DSparkCase c = random_dspark_case(rng);
        c.special = s;
        c.logits_t = t;
        DSparkRunOpts r = random_dspark_opts(c, rng);
        r.temperature = temperature;
        runs.emplace_back(c, r);
      }
  return runs;
}

}  // namespace dfsel::test
