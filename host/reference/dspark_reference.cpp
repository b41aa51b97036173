#include "host/reference/dspark_reference.h"

#include <cmath>
#include <vector>

#include "kernels/common/dspark_math.cuh"
#include "kernels/common/order.cuh"

namespace dfsel::ref {

namespace {

const uint8_t* row_of(const dfsel_tensor& t, int64_t row) {
  return static_cast<const uint8_t*>(t.data) + (size_t)row * t.nb[1];
}

void widen(const dfsel_tensor& t, int64_t row, float* out) {
  for (int64_t i = 0; i < t.ne[0]; ++i) out[i] = load_elem(row_of(t, row), t.type, i);
}

template <class T>
void put(T* p, size_t i, T v) {
  if (p) p[i] = v;
}

// One step of one block over the whole vocabulary: the chosen draft id, its l, the row maximum
// and, when sampling, the normaliser.
struct StepResult {
  int32_t id;
  float logit, row_max;
  NormSum norm;
};

StepResult step(const dfsel_dspark_plan_desc& d, const dfsel_dspark_inputs& in, int64_t row, const float* e,
                uint32_t block, uint32_t k, std::vector<float>& l) {
  const dfsel_dspark_config& c = d.config;
  const Transform tr = make_transform(c.logit_scale, c.softcap);
  const bool sampling = in.temperature > 0.0f;
  StepResult r{-1, 0.0f, -INFINITY, NormSum{0, 0}};
  uint64_t best = 0;
  for (int64_t v = 0; v < c.n_vocab; ++v) {
    const float z = load_elem(row_of(in.logits, row), in.logits.type, v);
    const float dot = markov_dot(row_of(d.w2, v), d.w2.type, e, c.markov_rank);
    const float s = !d.w2_scale.data ? 1.0f : static_cast<const float*>(d.w2_scale.data)[d.w2_scale.ne[0] == 1 ? 0 : v];
    l[(size_t)v] = markov_logit(tr, z, dot, s);
    const float key =
        sampling ? markov_sample_key(l[(size_t)v], in.temperature, markov_gumbel(in.seed, block, k, (int32_t)v)) : l[(size_t)v];
    if (r.id < 0 || cand_key(key, (int32_t)v) > best) r.id = (int32_t)v, best = cand_key(key, (int32_t)v);
    if (l[(size_t)v] > r.row_max) r.row_max = l[(size_t)v];
  }
  r.logit = l[(size_t)r.id];
  if (sampling)
    for (int64_t v = 0; v < c.n_vocab; ++v) norm_add_weight(&r.norm, norm_weight(l[(size_t)v], r.row_max, in.temperature));
  return r;
}

}  // namespace

ChainFault dspark_chain(const dfsel_dspark_plan_desc& d, const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out) {
  const dfsel_dspark_config& c = d.config;
  const int32_t N = c.n_draft, R = c.markov_rank;
  const RowMap rows = dspark_rows(N, c.sample_from_anchor != 0);
  std::vector<float> e((size_t)R), h((size_t)c.n_embd), l((size_t)c.n_vocab);
  for (int32_t b = 0; b < in.n_blocks; ++b) {
    int32_t prev = in.anchors[b], n = 0;
    if (prev < 0 || prev >= c.n_target_vocab) return ChainFault{b, 0, -1, prev};
    bool going = true;
    for (int32_t k = 1; k <= N; ++k) {
      const size_t at = (size_t)b * N + (k - 1);
      put<int32_t>(out.tokens, at, -1);
      put<int32_t>(out.draft_ids, at, -1);
      for (float* p : {out.logits, out.probs, out.log_norm, out.confidence}) put<float>(p, at, 0.0f);
      if (!going) continue;
      const int64_t row = map_row(rows, (int64_t)at);
      widen(d.w1, prev, e.data());
      if (d.conf_w.data) {
        widen(in.hidden, row, h.data());
        const float conf = markov_confidence(d.conf_w.data, d.conf_w.type, h.data(), c.n_embd, e.data(), R, d.conf_bias);
        put(out.confidence, at, conf);
        if (in.p_min > 0.0f && conf < in.p_min) {
          going = false;
          continue;
        }
      }
      const StepResult r = step(d, in, row, e.data(), (uint32_t)b, (uint32_t)k, l);
      prev = d.d2t ? d.d2t[r.id] : r.id;
      if (prev < 0 || prev >= c.n_target_vocab) return ChainFault{b, k, r.id, prev};
      put(out.tokens, at, prev);
      put(out.draft_ids, at, r.id);
      put(out.logits, at, r.logit);
      if (in.temperature > 0.0f) {
        put(out.probs, at, markov_prob(r.logit, r.row_max, in.temperature, r.norm));
        put(out.log_norm, at, markov_log_norm(r.row_max, in.temperature, r.norm));
      }
      ++n;
    }
    out.n_emitted[b] = n;
  }
  return ChainFault{};
}

}  // namespace dfsel::ref
