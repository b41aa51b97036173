#include "host/reference/cpu_reference.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstring>

#include "kernels/common/numeric.cuh"

namespace dfsel::ref {

namespace {

const uint8_t* row_ptr(const dfsel_tensor& t, int64_t row) {
  return static_cast<const uint8_t*>(t.data) + (size_t)row * t.nb[1];
}

}  // namespace

void shard_topk(const dfsel_tensor& logits, RowMap map, int32_t n_rows, int32_t k,
                int64_t id_offset, CandRec* out) {
  const int64_t n = logits.ne[0];
  std::vector<uint64_t> keys((size_t)n);
  for (int32_t s = 0; s < n_rows; ++s) {
    const uint8_t* row = row_ptr(logits, map_row(map, s));
    for (int64_t c = 0; c < n; ++c)
      keys[(size_t)c] = cand_key(load_elem(row, logits.type, c), (int32_t)(id_offset + c));
    // The K largest keys are the top-K in candidate order; the logit itself comes back
    // from the row so that NaN payloads and -0 are returned as stored.
    std::partial_sort(keys.begin(), keys.begin() + k, keys.end(), std::greater<uint64_t>());
    for (int32_t j = 0; j < k; ++j) {
      const int32_t id = cand_from_key(keys[(size_t)j]).id;
      out[(size_t)s * k + j] = CandRec{load_elem(row, logits.type, id - id_offset), id};
    }
  }
}

void merge_candidates(const CandRec* recs, int32_t n_recs, int32_t k, CandRec* out, int32_t* src) {
  for (int32_t i = 0; i < n_recs; ++i) {
    const int r = cand_rank(recs, n_recs, i);
    if (r < k) {
      out[r] = recs[i];
      if (src) src[r] = i;
    }
  }
}

void load_row(const void* row, dfsel_type type, int32_t r, float* out) { load_elems(row, type, r, out); }

void gate(const dfsel_tensor& w_h, const dfsel_tensor& hidden, RowMap map, int32_t n_rows,
          float* g) {
  const int64_t n_embd = w_h.ne[0];
  const int32_t R = (int32_t)w_h.ne[1];
  std::vector<float> w((size_t)n_embd * R), h((size_t)n_embd);
  for (int32_t r = 0; r < R; ++r)
    for (int64_t e = 0; e < n_embd; ++e) w[(size_t)r * n_embd + e] = load_elem(row_ptr(w_h, r), w_h.type, e);
  for (int32_t s = 0; s < n_rows; ++s) {
    const uint8_t* hr = row_ptr(hidden, map_row(map, s));
    for (int64_t e = 0; e < n_embd; ++e) h[(size_t)e] = load_elem(hr, hidden.type, e);
    for (int32_t r = 0; r < R; ++r) {
      const float* wr = &w[(size_t)r * n_embd];
      float acc = 0.0f;
      for (int64_t e = 0; e < n_embd; ++e) acc = std::fma(wr[e], h[(size_t)e], acc);
      g[(size_t)s * R + r] = acc;
    }
  }
}

void score_lattice(const float* eprev_rows, int32_t n_prev, const float* g,
                   const float* enext_rows, const float* u, int32_t k, int32_t r, float* s) {
  for (int32_t i = 0; i < n_prev; ++i) {
    for (int32_t j = 0; j < k; ++j) {
      float acc = 0.0f;
      for (int32_t x = 0; x < r; ++x)
        acc = std::fma(eprev_rows[(size_t)i * r + x] * g[x], enext_rows[(size_t)j * r + x], acc);
      s[(size_t)i * k + j] = u[j] + acc;
    }
  }
}

void walk_block(const float* lattice, const CandRec* cands, int32_t L, int32_t k, WalkParams w,
                uint32_t block, int32_t* path, int32_t* n_emitted, float* q) {
  auto row_of = [&](int p, int i) { return lattice + ((size_t)p * k + i) * k; };
  *n_emitted = walk_path(
      L, true, [&](int p, int i) { return walk_choice(row_of(p, i), k, w, block, (uint32_t)(p + 1)); },
      [&](int p, int row, int j) {
        path[p] = j >= 0 ? cands[(size_t)p * k + j].id : -1;
        if (!q) return;
        float* qrow = q + (size_t)p * k;
        if (row >= 0 && w.temperature > 0.0f) softmax_row(row_of(p, row), k, w.temperature, qrow);
        else std::fill(qrow, qrow + k, 0.0f);
      });
}

}  // namespace dfsel::ref
