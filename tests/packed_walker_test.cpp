// llama.cpp's DFlash2 walker reads only the packed lattice rows (SPEC section 6.5). A walker
// written here from that layout alone must reproduce dfsel's own path, p_min included.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "support/problem.h"

namespace dfsel::test {
namespace {

// Greedy walk over packed rows: row p of a block = [K ids as float | K*K scores | zeros].
void walk_packed(const float* rows, size_t row_floats, int block_size, int K, float p_min, std::vector<int32_t>* out) {
  int prev = 0;
  for (int p = 1; p < block_size; ++p) {
    const float* row = rows + (size_t)p * row_floats;
    const float* s = row + K + (size_t)prev * K;
    int best = 0;
    for (int j = 1; j < K; ++j)
      if (s[j] > s[best] || (std::isnan(s[best]) && !std::isnan(s[j]))) best = j;
    if (p_min > 0) {
      double sum = 0;
      for (int j = 0; j < K; ++j) sum += std::isnan(s[j]) ? 0.0 : std::exp((double)s[j] - s[best]);
      if (1.0 / sum < p_min) break;
    }
    out->push_back((int32_t)row[best]);
    prev = best;
  }
}

TEST(PackedWalker, ReproducesDfselPaths) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 12; ++i) {
    Case c;
    c.V = 2000 + rng() % 3000;
    c.K = 1 + rng() % 12;
    c.E = c.K + c.K * c.K + rng() % 40;
    c.block = 2 + rng() % 15;
    c.blocks = 1 + rng() % 4;
    RunOpts r;
    r.p_min = i % 3 == 0 ? 0.0f : 0.02f * (float)(rng() % 20);
    r.packed_pad = rng() % 3;
    const Data d = make_data(c, rng());
    const Result x = run_case(c, d, r);
    ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
    const int L = c.block - 1;
    for (int b = 0; b < c.blocks; ++b) {
      std::vector<int32_t> walked;
      walk_packed(&x.packed[(size_t)b * c.block * x.packed_row_floats], x.packed_row_floats, c.block, c.K, r.p_min, &walked);
      ASSERT_EQ((int)walked.size(), x.n_emitted[b]) << c.str() << " block " << b;
      for (int p = 0; p < x.n_emitted[b]; ++p) EXPECT_EQ(walked[p], x.path[(size_t)b * L + p]);
    }
  }
}

}  // namespace
}  // namespace dfsel::test
