#include "special_problems.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <numeric>
#include <sstream>

#include "kernels/common/numeric.cuh"

namespace dfsel::test {

namespace {

constexpr int64_t kSpan = 40;  // special values sit in the last kSpan ids of a row

float bits(uint32_t u) { return bits_to_float(u); }

// v as stored in type t (rounded), for special values that must survive storage unchanged.
float as_type(dfsel_type t, float v) {
  uint8_t buf[4];
  return store_elem(buf, 0, t, v);
}

bool same_value(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return std::memcmp(&a, &b, 4) == 0;
}

// Id of special value k in token row t: a permutation of the last kSpan ids that moves with
// the row, so rows differ and the specials fall into different shards.
int64_t special_id(int64_t V, int k, int64_t t) { return V - kSpan + (k * 7 + t * 11) % kSpan; }

// Small negative values, distinct within the last kSpan ids of a row, exact in F16 and BF16.
float background(int64_t t, int64_t v) { return -1.0f - 0.125f * (float)((v * 7 + t * 3) % kSpan); }

SpecialProblem base(const std::string& name, dfsel_type logits_t, Size size, Gate gate) {
  SpecialProblem p;
  p.name = name;
  p.gate = gate;
  Case& c = p.c;
  c.V = size == Size::kNarrow ? kSpan : 50000;
  c.E = 96;  // >= K + K * K: packed rows are written too
  c.R = 32;
  c.K = 8;
  c.block = 4;
  c.blocks = size == Size::kTall ? 48 : 2;
  c.logits_t = logits_t;
  c.hidden_t = c.cb_t = c.wh_t = DFSEL_TYPE_F32;
  Data& d = p.d;
  const size_t n_tokens = (size_t)c.blocks * c.block;
  // W_h is the identity on the first R hidden elements, so g[r] = h[r] exactly.
  d.w_h.assign((size_t)c.R * c.E * 4, 0);
  for (int r = 0; r < c.R; ++r) store_elem(d.w_h.data(), (size_t)r * c.E + r, DFSEL_TYPE_F32, 1.0f);
  d.hidden_nb1 = (size_t)c.E * 4;
  d.hidden.assign(n_tokens * d.hidden_nb1, 0);
  d.hidden_f.assign(n_tokens * c.E, 0.0f);
  for (size_t t = 0; t < n_tokens; ++t)
    for (int r = 0; r < c.R; ++r) {
      const bool on = gate == Gate::kOnes || (gate == Gate::kOneHot && r == kGateR);
      d.hidden_f[t * c.E + r] = store_elem(d.hidden.data(), t * c.E + r, DFSEL_TYPE_F32, on ? 1.0f : 0.0f);
    }
  // F32 codebooks: small integers in column kGateR (products exact), other columns finite.
  d.e_prev.assign((size_t)c.V * c.R * 4, 0);
  d.e_next.assign((size_t)c.V * c.R * 4, 0);
  for (int64_t v = 0; v < c.V; ++v)
    for (int r = 0; r < c.R; ++r) {
      const size_t i = (size_t)v * c.R + r;
      store_elem(d.e_prev.data(), i, DFSEL_TYPE_F32,
          r == kGateR ? (float)((v * 5) % 7 - 3) : 0.5f * (float)((v + r) % 5 - 2));
      store_elem(d.e_next.data(), i, DFSEL_TYPE_F32,
          r == kGateR ? (float)((v * 3) % 11 - 5) : 0.25f * (float)((v * 3 + r) % 7 - 3));
    }
  d.anchors.resize(c.blocks);
  for (int b = 0; b < c.blocks; ++b) d.anchors[b] = (int32_t)((b * 17 + 3) % c.V);
  return p;
}

// Fills the logits: specials[k] at special_id(k, t), fill(t, v) elsewhere.
template <class Fill>
void set_logits(SpecialProblem* p, const std::vector<float>& specials, Fill fill) {
  const Case& c = p->c;
  Data& d = p->d;
  const size_t n_tokens = (size_t)c.blocks * c.block;
  d.logits_nb1 = (size_t)c.V * elem_size(c.logits_t);
  d.logits.assign(n_tokens * d.logits_nb1, 0);
  d.logits_f.assign(n_tokens * c.V, 0.0f);
  std::vector<float> row((size_t)c.V);
  for (size_t t = 0; t < n_tokens; ++t) {
    for (int64_t v = 0; v < c.V; ++v) row[(size_t)v] = fill((int64_t)t, v);
    for (size_t k = 0; k < specials.size(); ++k) row[(size_t)special_id(c.V, (int)k, (int64_t)t)] = specials[k];
    for (int64_t v = 0; v < c.V; ++v) {
      const float s = store_elem(d.logits.data(), t * c.V + v, c.logits_t, row[(size_t)v]);
      if (!same_value(s, row[(size_t)v]))
        ADD_FAILURE() << p->name << ": logit " << row[(size_t)v] << " is not representable as "
                      << dfsel_type_name(c.logits_t);
      d.logits_f[t * c.V + v] = s;
    }
  }
}

std::string tname(dfsel_type t) { return dfsel_type_name(t); }

std::string num(float x) {
  std::ostringstream o;
  o << x;
  return o.str();
}

float cb_value(const SpecialProblem& p, int which, int64_t v, int r) {
  const std::vector<uint8_t>& b = which ? p.d.e_next : p.d.e_prev;
  return load_elem(b.data() + (size_t)v * row_bytes(p.c.cb_t, p.c.R), p.c.cb_t, r);
}

bool row_has_nan(const SpecialProblem& p, int which, int64_t v) {
  for (int r = 0; r < p.c.R; ++r)
    if (std::isnan(cb_value(p, which, v, r))) return true;
  return false;
}

bool gate_has_nan(const SpecialProblem& p) {
  for (float h : p.d.hidden_f)
    if (std::isnan(h)) return true;
  for (size_t i = 0; i < (size_t)p.c.R * p.c.E; ++i)
    if (std::isnan(load_elem(p.d.w_h.data(), p.c.wh_t, (int64_t)i))) return true;
  return false;
}

}  // namespace

std::string SpecialProblem::str() const { return name + " (" + c.str() + ")"; }

std::vector<int64_t> even_bounds(int64_t V, int S) {
  std::vector<int64_t> b(S + 1);
  for (int s = 0; s <= S; ++s) b[s] = V * s / S;
  return b;
}

SpecialProblem all_neg_inf(dfsel_type t, float softcap, Size size) {
  SpecialProblem p = base("all -inf " + tname(t) + " softcap=" + num(softcap), t, size, Gate::kOneHot);
  p.c.softcap = softcap;
  set_logits(&p, {}, [](int64_t, int64_t) { return -INFINITY; });
  return p;
}

SpecialProblem all_nan(dfsel_type t, Size size) {
  SpecialProblem p = base("all NaN " + tname(t), t, size, Gate::kOneHot);
  // F32 keeps the payload and sign of each NaN; 16-bit types store a quiet NaN of that sign.
  set_logits(&p, {}, [](int64_t, int64_t v) {
    static const uint32_t kNaNs[4] = {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fffffffu};
    return bits(kNaNs[v % 4]);
  });
  return p;
}

SpecialProblem nan_below_neg_inf(dfsel_type t, Size size) {
  SpecialProblem p = base("NaN below -inf " + tname(t), t, size, Gate::kOneHot);
  const float low = t == DFSEL_TYPE_F16 ? -65504.0f : as_type(t, -1e30f);
  set_logits(&p, {-INFINITY, -INFINITY, -INFINITY, 2.5f, low},
             [](int64_t, int64_t v) { return bits(v % 2 ? 0xffc00000u : 0x7fc00000u); });
  return p;
}

SpecialProblem all_equal(dfsel_type t, float value, float scale, Gate gate, Size size) {
  SpecialProblem p = base("all equal " + num(value) + " " + tname(t) + " scale=" + num(scale) +
                              (gate == Gate::kZero ? " g=0" : " g=e_r"),
                          t, size, gate);
  p.c.scale = scale;
  set_logits(&p, {}, [value](int64_t, int64_t) { return value; });
  return p;
}

SpecialProblem signed_zeros(dfsel_type t, Size size) {
  SpecialProblem p = base("signed zeros " + tname(t), t, size, Gate::kZero);
  set_logits(&p, {}, [](int64_t row, int64_t v) { return (v + row) % 2 ? -0.0f : 0.0f; });
  return p;
}

SpecialProblem huge_logits(dfsel_type t, float scale, float softcap, Size size) {
  SpecialProblem p = base("huge " + tname(t) + " scale=" + num(scale) + " softcap=" + num(softcap), t, size,
                          Gate::kOneHot);
  p.c.scale = scale;
  p.c.softcap = softcap;
  std::vector<float> s;
  if (t == DFSEL_TYPE_F32) {
    s = {1e30f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, 3e38f, FLT_MAX, -1e30f, INFINITY, 1e38f};
  } else if (t == DFSEL_TYPE_F16) {
    s = {60000.0f, 65504.0f, -65504.0f, INFINITY, -INFINITY, 32768.0f, 65504.0f, -60000.0f, INFINITY, 1024.0f};
  } else {
    const float mx = bf16_to_float(0x7f7f);  // the largest finite BF16
    s = {as_type(t, 1e30f), mx, -mx, INFINITY, -INFINITY, as_type(t, 3e38f), mx, as_type(t, -1e30f), INFINITY,
         as_type(t, 1e38f)};
  }
  set_logits(&p, s, background);
  return p;
}

SpecialProblem subnormal_logits(dfsel_type t, float scale, Size size) {
  SpecialProblem p = base("subnormal " + tname(t) + " scale=" + num(scale), t, size, Gate::kZero);
  p.c.scale = scale;
  std::vector<float> s;
  if (t == DFSEL_TYPE_F32) {
    s = {1e-40f, -1e-42f, 0.0f, -0.0f, bits(0x00000001u), bits(0x80000001u), FLT_MIN, bits(0x007fffffu),
         5e-39f, -0.0f, 0.0f};
  } else {
    static const uint16_t kF16[11] = {0x0001, 0x8001, 0x0000, 0x8000, 0x03ff, 0x0400, 0x0200, 0x8200, 0x0003, 0x8000, 0x0000};
    static const uint16_t kBF16[11] = {0x0001, 0x8001, 0x0000, 0x8000, 0x007f, 0x0080, 0x0040, 0x8040, 0x0003, 0x8000, 0x0000};
    for (int k = 0; k < 11; ++k) s.push_back(t == DFSEL_TYPE_F16 ? f16_to_float(kF16[k]) : bf16_to_float(kBF16[k]));
  }
  set_logits(&p, s, background);
  return p;
}

SpecialProblem q8_scales(uint16_t prev_scale, uint16_t next_scale, Gate gate, Size size) {
  std::ostringstream name;
  name << "Q8_0 scales 0x" << std::hex << prev_scale << "/0x" << next_scale
       << (gate == Gate::kOnes ? " g=1" : gate == Gate::kZero ? " g=0" : " g=e_r");
  SpecialProblem p = base(name.str(), DFSEL_TYPE_F32, size, gate);
  Case& c = p.c;
  c.cb_t = DFSEL_TYPE_Q8_0;  // R = 32: one block per row
  static const int8_t kPrev[6] = {127, -128, -127, 1, 0, -1};
  static const int8_t kNext[7] = {-128, 127, 0, 64, -1, 127, -128};
  for (int which = 0; which < 2; ++which) {
    std::vector<uint8_t>& buf = which ? p.d.e_next : p.d.e_prev;
    buf.assign((size_t)c.V * sizeof(BlockQ8_0), 0);
    BlockQ8_0* b = reinterpret_cast<BlockQ8_0*>(buf.data());
    for (int64_t v = 0; v < c.V; ++v) {
      b[v].d = which ? next_scale : prev_scale;
      for (int r = 0; r < kQ8Block; ++r) {
        if (r == kGateR) b[v].qs[r] = which ? kNext[(v * 5) % 7] : kPrev[v % 6];
        else if (which) b[v].qs[r] = r % 3 == 0 ? -128 : 127;
        else b[v].qs[r] = r % 2 ? 127 : -128;
      }
    }
  }
  // Distinct logits per row (7 is prime to both widths).
  set_logits(&p, {}, [V = c.V](int64_t t, int64_t v) { return 0.25f * (float)((v * 7 + t * 3) % V) - 4.0f; });
  return p;
}

SpecialProblem softcap_extremes(float softcap, float scale, Size size) {
  SpecialProblem p = base("softcap=" + num(softcap) + " scale=" + num(scale), DFSEL_TYPE_F32, size, Gate::kOneHot);
  p.c.softcap = softcap;
  p.c.scale = scale;
  set_logits(&p, {1e30f, 3e38f, FLT_MAX, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f, -3.0f, 1e-30f, 1e-40f, -1e30f},
             [](int64_t t, int64_t v) { return -5.0f - 0.5f * (float)((v * 7 + t) % kSpan); });
  return p;
}

std::vector<std::function<SpecialProblem()>> special_problems(Size size) {
  std::vector<std::function<SpecialProblem()>> ps;
  const std::string suffix = size == Size::kNarrow ? "" : size == Size::kWide ? " wide" : " tall";
  auto add = [&](auto make) {
    ps.push_back([make, suffix] {
      SpecialProblem p = make();
      p.name += suffix;
      return p;
    });
  };
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16}) {
    add([=] { return all_neg_inf(t, 0.0f, size); });
    add([=] { return all_neg_inf(t, 30.0f, size); });
    add([=] { return all_nan(t, size); });
    add([=] { return nan_below_neg_inf(t, size); });
    add([=] { return all_equal(t, 0.5f, 1.0f, Gate::kZero, size); });
    add([=] { return all_equal(t, 0.5f, 3.0f, Gate::kOneHot, size); });
    add([=] { return signed_zeros(t, size); });
    add([=] { return huge_logits(t, 1.0f, 0.0f, size); });
    add([=] { return huge_logits(t, 2.0f, 0.0f, size); });
    add([=] { return huge_logits(t, 1.0f, 30.0f, size); });
    add([=] { return subnormal_logits(t, 1.0f, size); });
    add([=] { return subnormal_logits(t, 0.5f, size); });
  }
  if (size == Size::kTall) return ps;  // the rest stress the lattice, not the top-K
  add([=] { return huge_logits(DFSEL_TYPE_F32, 1e30f, 0.0f, size); });
  add([=] { return huge_logits(DFSEL_TYPE_F32, 1e30f, 30.0f, size); });
  add([=] { return subnormal_logits(DFSEL_TYPE_F32, 1e30f, size); });
  for (const auto& s : std::vector<std::pair<uint16_t, uint16_t>>{
           {0x7bff, 0x7bff}, {0xfbff, 0x7bff}, {0x0001, 0x0001}, {0x8001, 0x03ff},
           {0x7bff, 0x0001}, {0x0000, 0x7bff}, {0x8000, 0x0000}})
    add([=] { return q8_scales(s.first, s.second, Gate::kOneHot, size); });
  add([=] { return q8_scales(0x7bff, 0x7bff, Gate::kOnes, size); });
  add([=] { return q8_scales(0xfbff, 0x7bff, Gate::kOnes, size); });
  add([=] { return q8_scales(0x0001, 0x8001, Gate::kOnes, size); });
  for (const auto& s : std::vector<std::pair<float, float>>{
           {30.0f, 1.0f}, {30.0f, 1e30f}, {1e-30f, 1.0f}, {3e38f, 1.0f}, {3e38f, 1e30f}, {bits(1u), 1.0f}})
    add([=] { return softcap_extremes(s.first, s.second, size); });
  return ps;
}

bool has_nan_input(const SpecialProblem& p) {
  for (float z : p.d.logits_f)
    if (std::isnan(z)) return true;
  for (int which = 0; which < 2; ++which)
    for (int64_t v = 0; v < p.c.V; ++v)
      if (row_has_nan(p, which, v)) return true;
  return gate_has_nan(p);
}

Expected expected_outcome(const SpecialProblem& p) {
  const Case& c = p.c;
  const int L = c.block - 1, K = c.K;
  const size_t nd = (size_t)c.blocks * L;
  Expected e;
  if (p.gate == Gate::kOnes) ADD_FAILURE() << p.name << ": g = 1 sums R products; compare with the oracle instead";
  e.cand_ids.resize(nd * K);
  e.unary.resize(nd * K);
  e.unary_exact.resize(nd * K);
  e.dot.resize(nd * K * K);
  const float m = c.scale > 0.0f ? c.scale : 1.0f;
  std::vector<int32_t> ids((size_t)c.V);
  for (int b = 0; b < c.blocks; ++b)
    for (int pos = 1; pos <= L; ++pos) {
      const size_t t = (size_t)b * c.block + pos, d = (size_t)b * L + pos - 1;
      const float* z = &p.d.logits_f[t * c.V];
      std::iota(ids.begin(), ids.end(), 0);
      std::partial_sort(ids.begin(), ids.begin() + K, ids.end(), [z](int32_t a, int32_t x) {
        if (std::isnan(z[a]) != std::isnan(z[x])) return std::isnan(z[x]);
        if (!std::isnan(z[a]) && z[a] != z[x]) return z[a] > z[x];  // -0 == +0 here
        return a < x;
      });
      for (int j = 0; j < K; ++j) {
        e.cand_ids[d * K + j] = ids[j];
        const float x = m * z[ids[j]];
        float u = x;
        bool exact = true;
        if (c.softcap > 0.0f && !std::isnan(x) && x != 0.0f) {
          const double y = (double)x / c.softcap;
          if (std::fabs(y) >= 20.0) {
            u = std::copysign(c.softcap, x);  // tanh rounds to ±1
          } else {
            u = (float)(c.softcap * std::tanh(y));
            exact = false;
          }
        }
        e.unary[d * K + j] = u;
        e.unary_exact[d * K + j] = exact;
      }
      for (int i = 0; i < K; ++i) {
        const int32_t pred = pos == 1 ? p.d.anchors[b] : e.cand_ids[(d - 1) * K + i];
        for (int j = 0; j < K; ++j) {
          float dot = 0.0f;
          if (p.gate == Gate::kOneHot) {
            // Both factors have at most 24 significant bits: the double product is exact.
            const double prod = (double)cb_value(p, 0, pred, kGateR) * cb_value(p, 1, e.cand_ids[d * K + j], kGateR);
            dot = prod == 0.0 ? 0.0f : (float)prod;
          }
          e.dot[(d * K + i) * K + j] = dot;
        }
      }
    }
  return e;
}

std::string check_expected(const SpecialProblem& p, const Expected& e, const Result& r) {
  const Case& c = p.c;
  const int L = c.block - 1, K = c.K;
  const size_t nd = (size_t)c.blocks * L;
  std::ostringstream err;
  if (r.cand_ids.size() != nd * K || r.scores.size() != nd * K * K || r.path.size() != nd)
    return "the result has the wrong size";
  for (size_t x = 0; x < nd * K; ++x)
    if (r.cand_ids[x] != e.cand_ids[x]) {
      err << "cand_ids[" << x / K << "][" << x % K << "] = " << r.cand_ids[x] << ", expected " << e.cand_ids[x];
      return err.str();
    }
  for (size_t x = 0; x < nd * K; ++x) {
    const float got = r.unary[x], want = e.unary[x];
    // Rounding of m * z / c (a subnormal quotient when c is huge) and of a subnormal result.
    const double tol = 4e-6 * std::fabs(want) + std::ldexp(1.0, -149) * (1.0 + (c.softcap > 0 ? c.softcap : 0.0));
    const bool ok = e.unary_exact[x] ? same_value(got, want) : std::fabs((double)got - want) <= tol;
    if (!ok) {
      err << "unary[" << x / K << "][" << x % K << "] = " << got << ", expected " << want
          << (e.unary_exact[x] ? " exactly" : "");
      return err.str();
    }
  }
  for (size_t d = 0; d < nd; ++d)
    for (int i = 0; i < K; ++i)
      for (int j = 0; j < K; ++j) {
        const size_t o = (d * K + i) * K + j;
        const float want = r.unary[d * K + j] + e.dot[o];
        if (!same_value(r.scores[o], want)) {
          err << "scores[" << d << "][" << i << "][" << j << "] = " << r.scores[o] << ", expected " << want << " = "
              << r.unary[d * K + j] << " + " << e.dot[o];
          return err.str();
        }
      }
  for (int b = 0; b < c.blocks; ++b) {
    int prev = 0;
    for (int pos = 1; pos <= L; ++pos) {
      const size_t d = (size_t)b * L + pos - 1;
      const float* row = &r.scores[(d * K + prev) * K];
      int best = -1;
      for (int j = 0; j < K; ++j)
        if (!std::isnan(row[j]) && (best < 0 || row[j] > row[best])) best = j;
      if (best < 0) best = 0;
      if (r.path[d] != e.cand_ids[d * K + best]) {
        err << "block " << b << " position " << pos << ": path " << r.path[d] << ", expected "
            << e.cand_ids[d * K + best] << " (j = " << best << ")";
        return err.str();
      }
      prev = best;
    }
    if (r.n_emitted[b] != L) {
      err << "block " << b << ": n_emitted " << r.n_emitted[b] << ", expected " << L;
      return err.str();
    }
  }
  return "";
}

std::string unexplained_nan(const SpecialProblem& p, const Result& r) {
  const Case& c = p.c;
  const int L = c.block - 1, K = c.K;
  const size_t nd = (size_t)c.blocks * L;
  std::ostringstream err;
  if (r.cand_ids.size() != nd * K || r.unary.size() != nd * K || r.scores.size() != nd * K * K)
    return "the result has the wrong size";
  const bool g_nan = gate_has_nan(p);
  for (int b = 0; b < c.blocks; ++b)
    for (int pos = 1; pos <= L; ++pos) {
      const size_t t = (size_t)b * c.block + pos, d = (size_t)b * L + pos - 1;
      for (int j = 0; j < K; ++j) {
        const int32_t id = r.cand_ids[d * K + j];
        if (id < 0 || id >= c.V) {
          err << "cand_ids[" << d << "][" << j << "] = " << id << " is not a token";
          return err.str();
        }
        const bool z_nan = std::isnan(p.d.logits_f[t * c.V + id]);
        if (std::isnan(r.unary[d * K + j]) && !z_nan) {
          err << "unary[" << d << "][" << j << "] is NaN but logit " << id << " is " << p.d.logits_f[t * c.V + id];
          return err.str();
        }
        const bool next_nan = row_has_nan(p, 1, id);
        for (int i = 0; i < K; ++i) {
          const int32_t pred = pos == 1 ? p.d.anchors[b] : r.cand_ids[(d - 1) * K + i];
          if (std::isnan(r.scores[(d * K + i) * K + j]) && !z_nan && !next_nan && !g_nan &&
              !row_has_nan(p, 0, pred)) {
            err << "scores[" << d << "][" << i << "][" << j << "] is NaN with no NaN input: logit "
                << p.d.logits_f[t * c.V + id] << ", unary " << r.unary[d * K + j];
            return err.str();
          }
        }
      }
    }
  for (size_t x = 0; x < r.q.size(); ++x)
    if (std::isnan(r.q[x])) {
      err << "q[" << x / K << "][" << x % K << "] is NaN";
      return err.str();
    }
  if (!r.packed.empty()) {
    for (int b = 0; b < c.blocks; ++b)
      for (int pos = 1; pos <= L; ++pos) {
        const float* row = &r.packed[((size_t)b * c.block + pos) * r.packed_row_floats];
        const size_t d = (size_t)b * L + pos - 1;
        for (int j = 0; j < K; ++j)
          if (row[j] != (float)r.cand_ids[d * K + j]) {
            err << "packed block " << b << " row " << pos << " id " << j << " = " << row[j];
            return err.str();
          }
        if (std::memcmp(row + K, &r.scores[d * K * K], (size_t)K * K * 4) != 0) {
          err << "packed block " << b << " row " << pos << " does not hold the scores bitwise";
          return err.str();
        }
      }
  }
  return "";
}

}  // namespace dfsel::test
