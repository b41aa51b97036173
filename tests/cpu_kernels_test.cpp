// The CPU backend's kernels with and without the vector paths: a CPU without AVX2 and FMA
// takes the plain loops, which must give bitwise what the vector code (and the reference) gives.
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "host/backend/cpu_simd.h"
#include "host/backend/cpu_topk.h"
#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"
#include "kernels/common/row_map.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

std::vector<float> randoms(size_t n, std::mt19937_64& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// R below, at, past and a multiple of the gate's lane count; n_embd and rows drawn from the seed.
class CpuKernelsGate : public testing::TestWithParam<int32_t> {};
TEST_P(CpuKernelsGate, IsTheReferenceWithAndWithoutVectors) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: only the plain loops exist here";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int32_t R = GetParam();
  const int64_t E = 1 + rng() % 700;
  const int32_t rows = 1 + rng() % 7;
  const std::vector<float> w = randoms((size_t)R * E, rng), h = randoms((size_t)rows * E, rng);
  const dfsel_tensor wt = make_matrix(w.data(), DFSEL_TYPE_F32, E, R, E * 4);
  const dfsel_tensor ht = make_matrix(h.data(), DFSEL_TYPE_F32, E, rows, E * 4);
  std::vector<float> want((size_t)rows * R);
  ref::gate(wt, ht, RowMap{1, 1, 0}, rows, want.data());
  for (bool simd : {false, true}) {
    GateWeights gw;
    prepare_gate(wt, simd, &gw);
    std::vector<float> g((size_t)rows * gw.rp, -1.0f);
    for (int32_t c = 0; c < gw.rp / kGateLanes; ++c) gate_chunk(gw, h.data(), 0, rows, c, g.data());
    for (int32_t s = 0; s < rows; ++s)
      ASSERT_EQ(std::memcmp(&g[(size_t)s * gw.rp], &want[(size_t)s * R], (size_t)R * 4), 0)
          << "R=" << R << " E=" << E << " row " << s << " simd=" << simd;
  }
}
INSTANTIATE_TEST_SUITE_P(, CpuKernelsGate, testing::Values(1, 31, 32, 33, 256),
                         [](const testing::TestParamInfo<int32_t>& info) { return "R" + std::to_string(info.param); });

// K below, at and past a 16-lane chunk of the transposed rows, at three R.
class CpuKernelsLattice : public testing::TestWithParam<std::tuple<int32_t, int32_t>> {};
TEST_P(CpuKernelsLattice, IsTheReferenceWithAndWithoutVectors) {
  if (!cpu_has_avx2_fma()) GTEST_SKIP() << "this CPU has no AVX2 and FMA: only the plain loops exist here";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const auto [K, R] = GetParam();
  const int32_t kp = (K + 15) / 16 * 16;
  const std::vector<float> ep = randoms((size_t)K * R, rng), en = randoms((size_t)K * R, rng),
                           g = randoms(R, rng), u = randoms(K, rng);
  std::vector<float> en_t((size_t)R * kp, 0.0f), t((size_t)4 * R);
  for (int32_t j = 0; j < K; ++j)
    for (int32_t r = 0; r < R; ++r) en_t[(size_t)r * kp + j] = en[(size_t)j * R + r];
  std::vector<float> want((size_t)K * K);
  ref::score_lattice(ep.data(), K, g.data(), en.data(), u.data(), K, R, want.data());
  for (bool simd : {false, true}) {
    std::vector<float> s((size_t)K * K, -1.0f);
    lattice_rows(ep.data(), K, g.data(), en_t.data(), kp, u.data(), K, R, simd, t.data(), s.data());
    ASSERT_EQ(std::memcmp(s.data(), want.data(), s.size() * 4), 0) << "K=" << K << " R=" << R << " simd=" << simd;
  }
}
INSTANTIATE_TEST_SUITE_P(, CpuKernelsLattice, testing::Combine(testing::Values(1, 7, 16, 17, 64), testing::Values(1, 33, 256)),
                         [](const testing::TestParamInfo<std::tuple<int32_t, int32_t>>& info) {
                           return "K" + std::to_string(std::get<0>(info.param)) + "_R" +
                                  std::to_string(std::get<1>(info.param));
                         });

TEST(CpuKernels, TopKIsTheReferenceWithAndWithoutVectors) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
    for (int i = 0; i < 40; ++i) {
      const int64_t n = 1 + rng() % 3000;
      const int32_t k = (int32_t)std::min<int64_t>(n, 1 + rng() % 64);
      std::vector<uint8_t> row((size_t)n * elem_size(t));
      std::normal_distribution<float> d(0.0f, 1.0f);
      for (int64_t c = 0; c < n; ++c) {
        const uint64_t roll = rng() % 100;
        const float v = roll < 5 ? NAN : roll < 10 ? -INFINITY : roll < 15 ? 0.0f : roll < 20 ? -0.0f : roll < 30 ? 1.0f : d(rng);
        store_elem(row.data(), (size_t)c, t, c % 50 == 0 ? (float)c : v);  // rising values keep inserting
      }
      std::vector<CandRec> want(k);
      ref::shard_topk(make_matrix(row.data(), t, n, 1, row.size()), RowMap{1, 1, 0}, 1, k, 100, want.data());
      for (bool simd : {false, cpu_has_avx2_fma()}) {
        std::vector<CandRec> got(k);
        row_topk(row.data(), t, n, k, 100, simd, got.data());
        ASSERT_EQ(std::memcmp(got.data(), want.data(), (size_t)k * sizeof(CandRec)), 0)
            << dfsel_type_name(t) << " n=" << n << " k=" << k << " simd=" << simd;
      }
    }
}

}  // namespace
}  // namespace dfsel::test
