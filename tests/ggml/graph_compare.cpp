#include "graph_compare.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_map>

namespace dfsel::test {

namespace {

std::string at(int b, int p) { return "block " + std::to_string(b) + " p " + std::to_string(p) + ": "; }

// The candidate sets of one row: the same multiset of logits, the same ids above the K-th
// value; ids at the K-th value may differ (ggml_top_k breaks ties its own way).
std::string compare_candidates(const float* z, const int32_t* g, const std::vector<int32_t>& d, int K,
                               long* swaps) {
  std::vector<float> gv, dv;
  for (int j = 0; j < K; ++j) {
    gv.push_back(z[g[j]]);
    dv.push_back(z[d[(size_t)j]]);
  }
  // dfsel's order: raw logit descending, then id ascending (SPEC section 3).
  for (int j = 1; j < K; ++j) {
    const bool ordered = dv[(size_t)j - 1] > dv[(size_t)j] || (dv[(size_t)j - 1] == dv[(size_t)j] && d[(size_t)j - 1] < d[(size_t)j]);
    if (!ordered) return "dfsel's candidates out of order at " + std::to_string(j);
  }
  std::sort(gv.begin(), gv.end());
  std::sort(dv.begin(), dv.end());
  if (gv != dv) return "ggml's top-K values differ from dfsel's";
  const float kth = dv[0];
  for (int j = 0; j < K; ++j) {
    const bool in_d = std::find(d.begin(), d.end(), g[j]) != d.end();
    if (!in_d && z[g[j]] > kth) return "ggml's candidate " + std::to_string(g[j]) + " is missing from dfsel's";
    if (!in_d) ++*swaps;
  }
  return "";
}

}  // namespace

std::string compare_with_ggml_ops(const PackedShape& s, const std::vector<float>& logits_f, int64_t V,
                                  const float* packed,
                                  const GgmlSelectorNodes& ref, double tol, CompareStats* st) {
  const int K = s.K;
  const int32_t* gids = static_cast<const int32_t*>(ref.ids->data);
  const float* rest = static_cast<const float*>(ref.rest->data);
  const float* first = static_cast<const float*>(ref.first->data);
  std::vector<std::unordered_map<int32_t, int>> index((size_t)s.blocks * s.block);
  for (int b = 0; b < s.blocks; ++b) {
    for (int p = 0; p < s.block; ++p) {
      const int64_t t = (int64_t)b * s.block + p;
      const float* row = packed + t * s.E;
      const int64_t used = p == 0 ? 0 : K + (int64_t)K * K;
      for (int64_t e = used; e < s.E; ++e) {
        if (row[e] != 0.0f || std::signbit(row[e])) return at(b, p) + "element " + std::to_string(e) + " is not +0";
      }
      if (p == 0) continue;
      std::vector<int32_t> d((size_t)K);
      for (int j = 0; j < K; ++j) {
        d[(size_t)j] = (int32_t)row[j];
        if ((float)d[(size_t)j] != row[j] || d[(size_t)j] < 0 || d[(size_t)j] >= V) return at(b, p) + "bad id";
        index[(size_t)t][d[(size_t)j]] = j;
      }
      const std::string c = compare_candidates(&logits_f[(size_t)(t * V)], gids + t * K, d, K, &st->tie_swaps);
      if (!c.empty()) return at(b, p) + c;
      double row_max = 0;
      for (int e = K; e < K + K * K; ++e) row_max = std::max(row_max, (double)std::fabs(row[e]));
      const double limit = tol * (1 + row_max);
      for (int i = 0; i < K; ++i) {
        // p = 1: the anchor is the one predecessor and every row i repeats its scores.
        int ip = i;
        if (p >= 2) {
          auto it = index[(size_t)t - 1].find(gids[(t - 1) * K + i]);
          ip = it == index[(size_t)t - 1].end() ? -1 : it->second;
        }
        for (int j = 0; j < K; ++j) {
          ++st->scores;
          auto jt = index[(size_t)t].find(gids[t * K + j]);
          if (jt == index[(size_t)t].end() || ip < 0) continue;  // a tie swapped this candidate out
          const float mine = row[K + ip * K + jt->second];
          const float theirs = p == 1 ? first[(size_t)b * K + j] : rest[((size_t)(t - 1) * K + i) * K + j];
          if (p == 1 && std::memcmp(&mine, &row[K + jt->second], 4) != 0) {
            return at(b, p) + "predecessor row " + std::to_string(i) + " does not repeat the anchor's";
          }
          const double diff = std::fabs((double)mine - theirs);
          st->worst = std::max(st->worst, diff / (1 + row_max));
          if (!(diff <= limit)) {
            return at(b, p) + "S(" + std::to_string(i) + ", " + std::to_string(j) + ") = " + std::to_string(mine) +
                   ", ggml's ops give " + std::to_string(theirs);
          }
          ++st->compared;
        }
      }
    }
  }
  return "";
}

}  // namespace dfsel::test
