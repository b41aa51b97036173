// The CPU DSpark pass with each instruction set this CPU has (plain C++, AVX2, AVX-512) against
// the chain's rules composed here one row at a time (kernels/common/dspark_math.cuh): the
// shard's best of every block, its largest l and, sampling, every stored l, bitwise. The CPU
// backend tests reach only the widest path; this one reaches the narrower ones too, on shapes
// that cover each path's partial groups (R % 8, rows % 8, pairs, blocks beyond eight).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "host/backend/cpu_dspark_pass.h"
#include "kernels/common/order.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct PassCase {
  int32_t R = 8, n_blocks = 1;
  int64_t rows = 8, v_begin = 0, r0 = 0;
  dfsel_type w2_t = DFSEL_TYPE_F32, z_t = DFSEL_TYPE_F32;
  int scale_rows = 0;  // 0: none, 1: one, 2: one per row
  bool sampling = false, softcap = false;
  size_t w2_pad = 0;   // bytes between rows beyond the row itself, a multiple of the element's alignment
  std::string str() const {
    return "R=" + std::to_string(R) + " blocks=" + std::to_string(n_blocks) + " rows=" + std::to_string(rows) +
           " r0=" + std::to_string(r0) + " w2=" + dfsel_type_name(w2_t) + " z=" + dfsel_type_name(z_t) +
           " scale_rows=" + std::to_string(scale_rows) + " sampling=" + std::to_string(sampling) +
           " softcap=" + std::to_string(softcap);
  }
};

// A pass's inputs, owned, with ties (repeated W2 rows and base logits) and specials planted.
struct PassData {
  std::vector<uint8_t> w2, z;
  std::vector<float> scale, e;
  std::vector<int32_t> block;
  std::vector<const uint8_t*> z_rows;
  std::vector<const float*> e_rows;
  std::vector<std::vector<float>> l;
  std::vector<float*> l_rows;
  MarkovPass pass{};
};

void make_pass(const PassCase& c, std::mt19937_64& rng, PassData* d) {
  const int32_t R8 = (c.R + 7) / 8 * 8;
  const int64_t V = c.r0 + c.rows;
  std::vector<uint8_t> dense;
  fill_weights(&dense, c.w2_t, (size_t)V, (size_t)c.R, 0.5f, rng);
  const size_t row_bytes = dense.size() / (size_t)V, stride = row_bytes + c.w2_pad;
  d->w2.assign((size_t)V * stride, 0xa5);
  for (int64_t v = 0; v < V; ++v) {
    const int64_t from = v > 0 && rng() % 5 == 0 ? v - 1 : v;  // a tie with the row before
    std::memcpy(&d->w2[(size_t)v * stride], &dense[(size_t)from * row_bytes], row_bytes);
  }
  const Special specials[] = {Special::kNone, Special::kTies, Special::kNaN, Special::kNegInf, Special::kMixed};
  const Special special = specials[rng() % 5];
  std::normal_distribution<float> normal(0.0f, 2.0f);
  d->z.assign((size_t)c.n_blocks * V * elem_size(c.z_t), 0);
  d->e.assign((size_t)c.n_blocks * R8, 0.0f);
  d->l.assign(c.n_blocks, std::vector<float>((size_t)V, NAN));
  for (int32_t b = 0; b < c.n_blocks; ++b) {
    uint8_t* z = &d->z[(size_t)b * V * elem_size(c.z_t)];
    for (int64_t v = 0; v < V; ++v) store_elem(z, (size_t)v, c.z_t, special_value(special, rng, normal(rng), v));
    for (int32_t r = 0; r < c.R; ++r) d->e[(size_t)b * R8 + r] = normal(rng);
    d->block.push_back((int32_t)(rng() % 64));
  }
  if (c.scale_rows > 0)
    for (int64_t v = 0; v < (c.scale_rows == 1 ? 1 : V); ++v) d->scale.push_back(0.25f + (float)(rng() % 16) / 8);
  for (int32_t b = 0; b < c.n_blocks; ++b) {
    d->z_rows.push_back(&d->z[(size_t)b * V * elem_size(c.z_t)]);
    d->e_rows.push_back(&d->e[(size_t)b * R8]);
    d->l_rows.push_back(d->l[b].data());
  }
  const Transform t = make_transform(c.softcap ? 0.75f : 1.0f, c.softcap ? 20.0f : 0.0f);
  d->pass = MarkovPass{d->w2.data(), stride, c.w2_t, c.R, R8, c.scale_rows ? d->scale.data() : nullptr,
                       c.scale_rows == 2 ? 2 : 1, t, c.z_t, c.v_begin, c.sampling, 0.7f, rng(), (uint32_t)(rng() % 9),
                       c.n_blocks, d->block.data(), d->z_rows.data(), d->e_rows.data(),
                       c.sampling ? d->l_rows.data() : nullptr};
}

// The rules one row at a time: what markov_rows must give over [r0, r1).
std::vector<MarkovBest> by_the_rules(const MarkovPass& p, int64_t r0, int64_t r1, std::vector<std::vector<float>>* l) {
  std::vector<MarkovBest> best(p.n_blocks, MarkovBest{0, -1, 0.0f, -INFINITY});
  for (int32_t b = 0; b < p.n_blocks; ++b)
    for (int64_t v = r0; v < r1; ++v) {
      const float dot = markov_dot(p.w2 + (size_t)v * p.w2_stride, p.w2_type, p.e[b], p.R);
      const float s = p.scale ? p.scale[p.scale_rows == 1 ? 0 : v] : 1.0f;
      const float lv = markov_logit(p.transform, load_elem(p.z[b], p.z_type, v), dot, s);
      const int32_t id = (int32_t)(p.v_begin + v);
      const float key =
          p.sampling ? markov_sample_key(lv, p.temperature, markov_gumbel(p.seed, (uint32_t)p.block[b], p.step, id)) : lv;
      const uint64_t k = cand_key(key, id);
      MarkovBest& m = best[b];
      if (m.id < 0 || k > m.key) m.key = k, m.id = (int32_t)v, m.logit = lv;
      if (lv > m.row_max) m.row_max = lv;
      (*l)[b][v] = lv;
    }
  return best;
}

std::vector<PassIsa> isas_here() {
  std::vector<PassIsa> isas{PassIsa::kPlain};
  if (cpu_pass_isa() >= PassIsa::kAvx2) isas.push_back(PassIsa::kAvx2);
  if (cpu_pass_isa() >= PassIsa::kAvx512) isas.push_back(PassIsa::kAvx512);
  return isas;
}

const char* isa_name(PassIsa isa) {
  return isa == PassIsa::kPlain ? "plain" : isa == PassIsa::kAvx2 ? "avx2" : "avx512";
}

void expect_rules(const PassCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  PassData d;
  make_pass(c, rng, &d);
  std::vector<std::vector<float>> want_l = d.l;
  const std::vector<MarkovBest> want = by_the_rules(d.pass, c.r0, c.r0 + c.rows, &want_l);
  for (PassIsa isa : isas_here()) {
    for (auto& row : d.l) std::fill(row.begin(), row.end(), NAN);
    std::vector<MarkovBest> got(c.n_blocks, MarkovBest{0, -1, 0.0f, -INFINITY});
    markov_rows(d.pass, c.r0, c.r0 + c.rows, isa, got.data());
    for (int32_t b = 0; b < c.n_blocks; ++b) {
      const std::string where = c.str() + " isa=" + isa_name(isa) + " block " + std::to_string(b) + " seed " + std::to_string(seed);
      ASSERT_EQ(got[b].id, want[b].id) << where;
      ASSERT_EQ(got[b].key, want[b].key) << where;
      ASSERT_EQ(std::memcmp(&got[b].logit, &want[b].logit, 4), 0) << where << ": " << got[b].logit << " vs " << want[b].logit;
      // A greedy vector pass does not keep the row maximum (only sampling's normaliser reads it).
      if (c.sampling || isa == PassIsa::kPlain || c.softcap)
        ASSERT_EQ(std::memcmp(&got[b].row_max, &want[b].row_max, 4), 0) << where;
      if (c.sampling)
        ASSERT_EQ(std::memcmp(&d.l[b][c.r0], &want_l[b][c.r0], (size_t)c.rows * 4), 0) << where << ": stored l";
    }
  }
}

TEST(DSparkPass, EveryInstructionSetIsTheRulesOnManyShapes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const dfsel_type w2_types[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
  const dfsel_type z_types[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
  for (int i = 0; i < 300; ++i) {
    PassCase c;
    c.w2_t = w2_types[i % 4];
    c.R = c.w2_t == DFSEL_TYPE_Q8_0 ? 32 * (1 + (int32_t)(rng() % 3)) : 1 + (int32_t)(rng() % 48);
    c.n_blocks = 1 + (int32_t)(rng() % 11);
    c.rows = 1 + (int64_t)(rng() % 40);
    c.r0 = (int64_t)(rng() % 5);
    c.v_begin = (int64_t)(rng() % 1000);
    c.z_t = z_types[rng() % 3];
    c.scale_rows = (int)(rng() % 3);
    c.sampling = rng() % 3 == 0;
    c.softcap = rng() % 4 == 0;
    c.w2_pad = (size_t)(rng() % 3) * (c.w2_t == DFSEL_TYPE_F32 ? 4 : 2);  // Q8_0: its f16 scale
    expect_rules(c, rng());
    if (HasFatalFailure()) return;
  }
}

TEST(DSparkPass, WideRowsOfEveryTypeAndBlockCount) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0})
    for (int32_t nb = 1; nb <= 9; ++nb) {
      PassCase c;
      c.w2_t = t;
      c.R = 256;
      c.n_blocks = nb;
      c.rows = 64 + (int64_t)(rng() % 8);
      c.scale_rows = nb % 3;
      c.sampling = nb % 2 == 0;
      expect_rules(c, rng());
      if (HasFatalFailure()) return;
    }
}

}  // namespace
}  // namespace dfsel::test
