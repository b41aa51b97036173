#include "packed_compare.h"

#include <algorithm>
#include <cmath>
#include <unordered_map>

namespace dfsel::test {

namespace {

std::string at(int b, int p) { return "block " + std::to_string(b) + " p " + std::to_string(p) + ": "; }

// The ids of a packed row, or "" -> a message when one is not a token id.
std::string row_ids(const float* row, int K, int64_t V, std::vector<int32_t>* ids) {
  ids->resize((size_t)K);
  for (int j = 0; j < K; ++j) {
    const int32_t id = (int32_t)row[j];
    if ((float)id != row[j] || id < 0 || id >= V) return "candidate " + std::to_string(j) + " is not an id";
    (*ids)[(size_t)j] = id;
  }
  return "";
}

// The same candidates, but for ids at the row's K-th value.
std::string same_set(const float* z, const std::vector<int32_t>& a, const std::vector<int32_t>& b, long* swaps) {
  float kth = INFINITY;
  for (int32_t id : b) kth = std::min(kth, z[id]);
  for (int32_t id : a) {
    if (std::find(b.begin(), b.end(), id) != b.end()) continue;
    if (!(z[id] == kth)) return "the peer's candidate " + std::to_string(id) + " is missing from dfsel's";
    ++*swaps;
  }
  return "";
}

int argmax(const float* s, int K) {
  int best = 0;
  for (int j = 1; j < K; ++j)
    if (s[j] > s[best]) best = j;
  return best;
}

}  // namespace

std::string compare_packed(const PackedLayout& s, const float* peer, const float* mine,
                           const std::vector<float>& logits, int64_t V, const ScoreTolerance& tol,
                           PackedStats* st) {
  const int K = s.K;
  std::vector<int32_t> pid, mid, prev_pid, prev_mid;
  for (int b = 0; b < s.blocks; ++b) {
    for (int p = 0; p < s.block; ++p) {
      const int64_t t = (int64_t)b * s.block + p;
      const float* pr = peer + t * s.E;
      const float* mr = mine + t * s.E;
      const int64_t used = p == 0 ? 0 : K + (int64_t)K * K;
      for (int64_t e = used; e < s.E; ++e) {
        if (mr[e] != 0.0f) return at(b, p) + "dfsel's element " + std::to_string(e) + " is not 0";
        if (pr[e] != 0.0f) return at(b, p) + "the peer's element " + std::to_string(e) + " is not 0";
      }
      if (p == 0) continue;
      std::string e = row_ids(pr, K, V, &pid);
      if (e.empty()) e = row_ids(mr, K, V, &mid);
      if (e.empty()) e = same_set(&logits[(size_t)(t * V)], pid, mid, &st->tie_swaps);
      if (!e.empty()) return at(b, p) + e;
      std::unordered_map<int32_t, int> pj;
      for (int j = 0; j < K; ++j) pj[pid[(size_t)j]] = j;
      double row_max = 0;
      for (int x = K; x < K + K * K; ++x) row_max = std::max(row_max, (double)std::fabs(mr[x]));
      st->largest_row = std::max(st->largest_row, row_max);
      for (int i = 0; i < K; ++i) {
        // dfsel's predecessor i, found among the peer's (p = 1: the anchor, every row the same).
        int pi = i;
        int32_t pred = -1;
        if (p >= 2) {
          pred = prev_mid[(size_t)i];
          auto it = std::find(prev_pid.begin(), prev_pid.end(), pred);
          pi = it == prev_pid.end() ? -1 : (int)(it - prev_pid.begin());
        }
        for (int j = 0; j < K; ++j) {
          ++st->scores;
          auto jt = pj.find(mid[(size_t)j]);
          if (pi < 0 || jt == pj.end()) continue;  // swapped out at a tie
          const double a = mr[K + i * K + j], c = pr[K + pi * K + jt->second];
          const double diff = std::fabs(a - c);
          if (row_max > 0) st->worst_rel = std::max(st->worst_rel, diff / row_max);
          const double lim = tol(b, p, mid[(size_t)j], pred, row_max);
          if (!(diff <= lim))
            return at(b, p) + "S(pred " + std::to_string(pred) + ", cand " + std::to_string(mid[(size_t)j]) +
                   "): dfsel " + std::to_string(a) + ", the peer " + std::to_string(c) + ", allowed " +
                   std::to_string(lim);
          ++st->compared;
        }
      }
      prev_pid = pid;
      prev_mid = mid;
    }
  }
  return "";
}

std::vector<int32_t> walk_packed(const PackedLayout& s, const float* rows) {
  const int K = s.K, L = s.block - 1;
  std::vector<int32_t> out((size_t)s.blocks * L);
  for (int b = 0; b < s.blocks; ++b) {
    int prev = 0;
    for (int p = 1; p <= L; ++p) {
      const float* row = rows + ((int64_t)b * s.block + p) * s.E;
      prev = argmax(row + K + prev * K, K);
      out[(size_t)b * L + p - 1] = (int32_t)row[prev];
    }
  }
  return out;
}

std::string compare_walks(const PackedLayout& s, const float* peer, const float* mine, double tol,
                          PackedStats* st) {
  const int K = s.K, L = s.block - 1;
  for (int b = 0; b < s.blocks; ++b) {
    int pp = 0, mp = 0;  // each one's choice at the last step (the same token so far)
    for (int p = 1; p <= L; ++p) {
      const float* pr = peer + ((int64_t)b * s.block + p) * s.E;
      const float* mr = mine + ((int64_t)b * s.block + p) * s.E;
      const float* mscores = mr + K + mp * K;
      pp = argmax(pr + K + pp * K, K);
      mp = argmax(mscores, K);
      ++st->walk_steps;
      if (pr[pp] == mr[mp]) continue;
      // Parted: the peer's token must score within tol of dfsel's in dfsel's own row, or be a
      // candidate dfsel left out at a tie of the K-th logit.
      int other = -1;
      for (int j = 0; j < K; ++j)
        if (mr[j] == pr[pp]) other = j;
      if (other >= 0 && !(std::fabs((double)mscores[mp] - mscores[other]) <= tol))
        return at(b, p) + "the walks part: dfsel takes " + std::to_string((int)mr[mp]) + " (" +
               std::to_string(mscores[mp]) + "), the peer " + std::to_string((int)pr[pp]) + " (" +
               std::to_string(mscores[other]) + " in dfsel's row), beyond " + std::to_string(tol);
      ++st->near_ties;
      break;
    }
  }
  return "";
}

}  // namespace dfsel::test
