#include "dspark_oracle.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <limits>
#include <sstream>
#include <thread>
#include <vector>

#include "kernels/common/dspark_math.cuh"

namespace dfsel::test {

namespace {

bool close(double want, double got, double tol) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return want == got;
  return std::fabs(want - got) <= tol * (1.0 + std::fabs(want));
}

// A float output of a value that may lie beyond float's range (log_norm is +-inf there,
// docs/dspark.md): within tol of it, or, where it is within tol of that range's edge or beyond,
// infinite of its sign.
bool close_float(double want, double got, double tol) {
  if (std::isinf(got) && std::isfinite(want) && std::fabs(want) * (1.0 + tol) >= FLT_MAX) return (got > 0) == (want > 0);
  return close(want, got, tol);
}

// "a ranks above b": larger first, NaN below everything, then the lower id.
bool above(double a, int64_t ia, double b, int64_t ib) {
  if (std::isnan(a) != std::isnan(b)) return std::isnan(b);
  if (!std::isnan(a) && a != b) return a > b;
  return ia < ib;
}

struct Step {
  std::vector<double> l, key;
  int64_t best = 0;
};

Step oracle_step(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, size_t row, const std::vector<double>& e,
                 int b, int k) {
  Step s;
  s.l.resize((size_t)c.V);
  s.key.resize((size_t)c.V);
  const double m = c.logit_scale > 0 ? c.logit_scale : 1.0;
  for (int64_t v = 0; v < c.V; ++v) {
    const double z = m * d.logits_f[row * c.V + v];
    double bias = 0;
    for (int i = 0; i < c.R; ++i) bias += (double)d.w2_f[(size_t)v * c.R + i] * e[i];
    if (c.scale_rows) bias *= d.scale[c.scale_rows == 1 ? 0 : v];
    s.l[v] = (c.softcap > 0 ? c.softcap * std::tanh(z / c.softcap) : z) + bias;
    s.key[v] = r.temperature > 0 ? s.l[v] / r.temperature + markov_gumbel(r.seed, (uint32_t)b, (uint32_t)k, (int32_t)v)
                                 : s.l[v];
    if (above(s.key[v], v, s.key[s.best], s.best)) s.best = v;
  }
  return s;
}

// Whether token v's l is computed from the same values as token u's: the same base logit, W2
// row and scale. Every backend computes a token's l from those alone (its bits do not depend on
// where the token falls among the shard's rows: they are the same for every shard count), so
// no rounding can split such a tie.
bool same_inputs(const DSparkCase& c, const DSparkData& d, size_t row, int64_t v, int64_t u) {
  if (d.logits_f[row * c.V + v] != d.logits_f[row * c.V + u]) return false;
  if (c.scale_rows == 2 && d.scale[v] != d.scale[u]) return false;
  return std::equal(&d.w2_f[(size_t)v * c.R], &d.w2_f[(size_t)(v + 1) * c.R], &d.w2_f[(size_t)u * c.R]);
}

// Whether the step's choice is beyond rounding: every other key is NaN, lies more than tol below
// the best (relative to 1 + |best|), or equals it for a reason no rounding changes (both
// infinite, or the same inputs: then the lowest id wins, as the order says). Any other key within
// tol of the best, a near-tie or an exact tie that only double rounding made, may go either way.
bool decided(const DSparkCase& c, const DSparkData& d, size_t row, const Step& s, double tol) {
  const double best = s.key[s.best];  // NaN only when every key is: the lowest id
  for (int64_t v = 0; v < c.V; ++v) {
    const double k = s.key[v];
    if (v == s.best || std::isnan(k)) continue;
    if (k == best) {
      if (std::isinf(best) || same_inputs(c, d, row, v, s.best)) continue;
      return false;
    }
    if (std::isfinite(best) && best - k <= tol * (1.0 + std::fabs(best))) return false;
  }
  return true;
}

// log sum_v exp(l_v / T), and q at the chosen id, by the rules of dspark.h's special rows.
void normaliser(const std::vector<double>& l, double T, int64_t x, double* log_norm, double* prob) {
  double mx = -INFINITY;
  for (double v : l)
    if (v > mx) mx = v;
  double z = 0, wx = 0;
  for (size_t v = 0; v < l.size(); ++v) {
    double w = 0;
    if (std::isnan(l[v])) w = 0;
    else if (mx == INFINITY) w = l[v] == INFINITY;
    else if (mx == -INFINITY) w = l[v] == -INFINITY;
    else w = std::exp((l[v] - mx) / T);
    z += w;
    if ((int64_t)v == x) wx = w;
  }
  *log_norm = mx / T + std::log(z);
  *prob = z > 0 ? wx / z : 0.0;
}

// Block b along the run's own chain: "" or its first mismatch; *judged is the steps compared (a
// p_min stop is one) before the end or a step that may go either way.
std::string compare_block(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkResult& got,
                          double tol, int b, int64_t* judged) {
  std::ostringstream err;
  const bool sampling = r.temperature > 0;
  int64_t prev = d.anchors[b];
  *judged = 0;
  for (int k = 1; k <= c.N; ++k) {
    const size_t at = (size_t)b * c.N + (k - 1);
    const size_t row = (size_t)b * c.rows() + (c.from_anchor ? k - 1 : k);
    std::vector<double> e(c.R);
    for (int i = 0; i < c.R; ++i) e[i] = d.w1_f[(size_t)prev * c.R + i];
    if (c.E > 0) {
      double x = c.conf_bias;
      for (int64_t i = 0; i < c.E + c.R; ++i)
        x += (double)d.conf_f[i] * (i < c.E ? (double)d.hidden_f[row * c.E + i] : e[i - c.E]);
      const double conf = 1.0 / (1.0 + std::exp(-x));
      if (!got.confidence.empty() && !close(conf, got.confidence[at], tol))
        return (err << "block " << b << " step " << k << ": confidence " << got.confidence[at] << ", oracle " << conf, err.str());
      if (r.p_min > 0 && std::fabs(conf - r.p_min) <= tol) return "";  // near the threshold: either way
      if (r.p_min > 0 && conf < r.p_min) {
        if (got.tokens[at] != -1) return (err << "block " << b << " step " << k << ": drafted past p_min", err.str());
        if (got.n_emitted[b] != k - 1)
          return (err << "block " << b << ": n_emitted " << got.n_emitted[b] << ", oracle " << k - 1, err.str());
        ++*judged;
        return "";
      }
    }
    const Step s = oracle_step(c, d, r, row, e, b, k);
    if (!decided(c, d, row, s, tol)) return "";  // a near-tie: either way
    const int32_t want = c.d2t ? d.d2t[s.best] : (int32_t)s.best;
    if (got.tokens[at] != want || (!got.draft_ids.empty() && got.draft_ids[at] != s.best))
      return (err << "block " << b << " step " << k << ": token " << got.tokens[at] << ", oracle " << want
                  << " (draft id " << s.best << ")", err.str());
    if (!got.logits.empty() && !close(s.l[s.best], got.logits[at], tol))
      return (err << "block " << b << " step " << k << ": logit " << got.logits[at] << ", oracle " << s.l[s.best], err.str());
    if (sampling && !got.probs.empty()) {
      double log_norm, prob;
      normaliser(s.l, r.temperature, s.best, &log_norm, &prob);
      if (!close_float(log_norm, got.log_norm[at], tol) || !close(prob, got.probs[at], tol))
        return (err << "block " << b << " step " << k << ": prob " << got.probs[at] << " log_norm " << got.log_norm[at]
                    << ", oracle " << prob << " " << log_norm, err.str());
    }
    ++*judged;
    prev = want;
  }
  if (got.n_emitted[b] != c.N)
    return (err << "block " << b << ": n_emitted " << got.n_emitted[b] << ", oracle " << c.N, err.str());
  return "";
}

}  // namespace

std::string compare_dspark_with_oracle(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                                       const DSparkResult& got, double tol, OracleTally* tally) {
  // Blocks are independent chains: a thread each (in turn), for realistic sizes.
  std::vector<std::string> errs((size_t)c.blocks);
  std::vector<int64_t> judged((size_t)c.blocks, 0);
  const int n_threads = (int)std::min<unsigned>((unsigned)c.blocks, std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::thread> threads;
  for (int t = 0; t < n_threads; ++t)
    threads.emplace_back([&, t] {
      for (int b = t; b < c.blocks; b += n_threads) errs[b] = compare_block(c, d, r, got, tol, b, &judged[b]);
    });
  for (std::thread& t : threads) t.join();
  for (int b = 0; b < c.blocks; ++b) {
    if (!errs[b].empty()) return errs[b];
    if (tally != nullptr) {
      tally->steps += std::min(c.N, std::max(0, got.n_emitted[b]) + 1);
      tally->judged += judged[b];
    }
  }
  return "";
}

}  // namespace dfsel::test
