#include "oracle.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "kernels/common/numeric.cuh"

namespace dfsel::test {

namespace {

double weight(const std::vector<uint8_t>& buf, dfsel_type t, size_t row, size_t cols, size_t col) {
  const uint8_t* base = buf.data();
  switch (t) {
    case DFSEL_TYPE_F32: {
      float f;
      std::memcpy(&f, base + 4 * (row * cols + col), 4);
      return f;
    }
    case DFSEL_TYPE_F16:
    case DFSEL_TYPE_BF16: {
      uint16_t h;
      std::memcpy(&h, base + 2 * (row * cols + col), 2);
      return t == DFSEL_TYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
    }
    case DFSEL_TYPE_Q8_0: {
      const size_t blk = (row * cols + col) / 32;
      uint16_t dh;
      std::memcpy(&dh, base + blk * 34, 2);
      const int8_t q = (int8_t)base[blk * 34 + 2 + (row * cols + col) % 32];
      return (double)f16_to_float(dh) * q;
    }
    default: return 0;
  }
}

}  // namespace

Oracle oracle_lattice(const Case& c, const Data& d) {
  const int L = c.block - 1, K = c.K, R = c.R;
  const size_t nd = (size_t)c.blocks * L;
  Oracle o;
  o.cand_ids.resize(nd * K);
  o.unary.resize(nd * K);
  o.scores.resize(nd * K * K);
  std::vector<int32_t> ids(c.V);
  for (int b = 0; b < c.blocks; ++b)
    for (int p = 1; p <= L; ++p) {
      const size_t t = (size_t)b * c.block + p, dd = (size_t)b * L + p - 1;
      const float* z = &d.logits_f[t * c.V];
      std::iota(ids.begin(), ids.end(), 0);
      std::sort(ids.begin(), ids.end(), [&](int32_t a, int32_t x) {
        const bool na = std::isnan(z[a]), nx = std::isnan(z[x]);
        if (na != nx) return nx;                       // numbers before NaN
        if (!na && z[a] != z[x]) return z[a] > z[x];   // larger first (-0 == +0)
        return a < x;                                  // then ids ascending
      });
      std::vector<double> g(R, 0.0);
      for (int r = 0; r < R; ++r)
        for (int64_t e = 0; e < c.E; ++e) g[r] += weight(d.w_h, c.wh_t, r, c.E, e) * d.hidden_f[t * c.E + e];
      const double m = c.scale > 0 ? c.scale : 1.0;
      for (int j = 0; j < K; ++j) {
        o.cand_ids[dd * K + j] = ids[j];
        const double x = m * z[ids[j]];
        o.unary[dd * K + j] = c.softcap > 0 ? c.softcap * std::tanh(x / c.softcap) : x;
      }
      for (int i = 0; i < K; ++i) {
        const int32_t pred = p == 1 ? d.anchors[b] : o.cand_ids[(dd - 1) * K + i];
        for (int j = 0; j < K; ++j) {
          double acc = 0;
          for (int r = 0; r < R; ++r)
            acc += weight(d.e_prev, c.cb_t, pred, R, r) * g[r] * weight(d.e_next, c.cb_t, o.cand_ids[dd * K + j], R, r);
          o.scores[(dd * K + i) * K + j] = o.unary[dd * K + j] + acc;
        }
      }
    }
  return o;
}

std::string compare_lattice(const Case& c, const Oracle& o, const Result& r, double tol) {
  std::ostringstream err;
  const int L = c.block - 1, K = c.K;
  const size_t nd = (size_t)c.blocks * L;
  if (r.cand_ids.size() != nd * K) return "result has no candidates";
  for (size_t i = 0; i < nd * K; ++i)
    if (r.cand_ids[i] != o.cand_ids[i]) {
      err << "cand_ids[" << i / K << "][" << i % K << "] = " << r.cand_ids[i] << ", oracle " << o.cand_ids[i];
      return err.str();
    }
  auto close = [&](double got, double want, double scale) {
    if (std::isnan(want)) return std::isnan(got);
    if (std::isinf(want)) return got == want;
    return std::fabs(got - want) <= tol * std::max(1.0, scale);
  };
  for (size_t dd = 0; dd < nd; ++dd) {
    double scale = 0;
    for (int x = 0; x < K * K; ++x)
      if (std::isfinite(o.scores[dd * K * K + x])) scale = std::max(scale, std::fabs(o.scores[dd * K * K + x]));
    for (int x = 0; x < K; ++x)
      if (!close(r.unary[dd * K + x], o.unary[dd * K + x], scale)) {
        err << "unary[" << dd << "][" << x << "] = " << r.unary[dd * K + x] << ", oracle " << o.unary[dd * K + x];
        return err.str();
      }
    for (int x = 0; x < K * K; ++x)
      if (!close(r.scores[dd * K * K + x], o.scores[dd * K * K + x], scale)) {
        err << "scores[" << dd << "][" << x / K << "][" << x % K << "] = " << r.scores[dd * K * K + x] << ", oracle "
            << o.scores[dd * K * K + x];
        return err.str();
      }
  }
  return "";
}

std::string compare_with_oracle(const Case& c, const Oracle& o, const Result& r, float p_min, double tol) {
  const std::string lattice = compare_lattice(c, o, r, tol);
  if (!lattice.empty()) return lattice;
  std::ostringstream err;
  const int L = c.block - 1, K = c.K;
  for (int b = 0; b < c.blocks; ++b) {
    int prev = 0, n = 0;
    for (int p = 1; p <= L; ++p) {
      const double* row = &o.scores[(((size_t)b * L + p - 1) * K + prev) * K];
      int best = -1, second = -1;
      for (int j = 0; j < K; ++j) {
        if (std::isnan(row[j])) continue;
        if (best < 0 || row[j] > row[best]) { second = best; best = j; }
        else if (second < 0 || row[j] > row[second]) second = j;
      }
      if (best < 0) best = 0;
      double mx = 0;
      for (int j = 0; j < K; ++j) mx = std::max(mx, std::isfinite(row[j]) ? std::fabs(row[j]) : 0.0);
      if (second >= 0 && std::isfinite(row[best]) && row[best] - row[second] <= tol * std::max(1.0, mx)) {
        n = -1;  // near-tie: either choice is right; stop comparing this block
        break;
      }
      double sum = 0;
      int n_top = 0;
      for (int j = 0; j < K; ++j) {
        sum += std::isnan(row[j]) ? 0 : std::exp(row[j] - row[best]);
        n_top += row[j] == row[best];
      }
      const double prob = std::isfinite(row[best]) ? 1.0 / sum : row[best] > 0 ? 1.0 / n_top : 1.0 / K;
      if (p_min > 0 && std::fabs(prob - p_min) <= tol) { n = -1; break; }
      if (p_min > 0 && prob < p_min) break;
      const int32_t want = o.cand_ids[((size_t)b * L + p - 1) * K + best];
      if (r.path[(size_t)b * L + p - 1] != want) {
        err << "block " << b << " position " << p << ": path " << r.path[(size_t)b * L + p - 1] << ", oracle " << want;
        return err.str();
      }
      prev = best;
      ++n;
    }
    if (n >= 0 && r.n_emitted[b] != n) {
      err << "block " << b << ": n_emitted " << r.n_emitted[b] << ", oracle " << n;
      return err.str();
    }
    if (n >= 0)
      for (int p = n + 1; p <= L; ++p)
        if (r.path[(size_t)b * L + p - 1] != -1) {
          err << "block " << b << ": path[" << p - 1 << "] = " << r.path[(size_t)b * L + p - 1] << " after the stop";
          return err.str();
        }
  }
  return "";
}

}  // namespace dfsel::test
