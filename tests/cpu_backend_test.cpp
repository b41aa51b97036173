// The fast CPU backend (host/backend/cpu_*) against the reference steps composed in their
// plainest form (host/reference): candidates, unary values, scores and paths bitwise equal,
// for every type, special value, K, R not a multiple of the vector width, rows shorter than
// a filter block, and for every worker count.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"
#include "kernels/common/row_map.cuh"
#include "kernels/common/row_source.cuh"
#include "kernels/common/selector_math.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

// One shard, replicated codebooks, the selector step by step with host/reference alone.
Result reference_step(const Case& c, const Data& d, const RunOpts& r) {
  const int32_t L = c.block - 1, K = c.K, R = c.R;
  const int32_t n = c.blocks * L;
  const int64_t n_tokens = (int64_t)c.blocks * c.block;
  const dfsel_tensor logits = make_matrix(d.logits.data(), c.logits_t, c.V, n_tokens, d.logits_nb1);
  const dfsel_tensor hidden = make_matrix(d.hidden.data(), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
  const dfsel_tensor w_h = make_matrix(d.w_h.data(), c.wh_t, c.E, R, row_bytes(c.wh_t, c.E));
  const size_t cb_row = row_bytes(c.cb_t, R);
  std::vector<CandRec> cands((size_t)n * K);
  std::vector<float> g((size_t)n * R), lattice((size_t)n * K * K), prev((size_t)K * R), next((size_t)K * R), u(K);
  ref::shard_topk(logits, drafted_rows(c.block), n, K, 0, cands.data());
  ref::gate(w_h, hidden, drafted_rows(c.block), n, g.data());
  const Transform tr = make_transform(c.scale, c.softcap);
  Result res;
  res.cand_ids.resize((size_t)n * K);
  res.unary.resize((size_t)n * K);
  res.path.resize(n);
  res.n_emitted.resize(c.blocks);
  for (int32_t b = 0; b < c.blocks; ++b) {
    for (int32_t p = 1; p <= L; ++p) {
      const int32_t dr = b * L + p - 1;
      for (int32_t j = 0; j < K; ++j) {
        const CandRec cj = cands[(size_t)dr * K + j];
        u[j] = transform_logit(tr, cj.z);
        res.cand_ids[(size_t)dr * K + j] = cj.id;
        res.unary[(size_t)dr * K + j] = u[j];
        ref::load_row(d.e_next.data() + (size_t)cj.id * cb_row, c.cb_t, R, &next[(size_t)j * R]);
      }
      const int32_t n_prev = p == 1 ? 1 : K;
      for (int32_t i = 0; i < n_prev; ++i) {
        const int32_t id = p == 1 ? d.anchors[b] : cands[(size_t)(dr - 1) * K + i].id;
        ref::load_row(d.e_prev.data() + (size_t)id * cb_row, c.cb_t, R, &prev[(size_t)i * R]);
      }
      float* s = &lattice[(size_t)dr * K * K];
      ref::score_lattice(prev.data(), n_prev, &g[(size_t)dr * R], next.data(), u.data(), K, R, s);
      for (int32_t i = n_prev; i < K; ++i) std::memcpy(s + (size_t)i * K, s, K * sizeof(float));
    }
    ref::walk_block(&lattice[(size_t)b * L * K * K], &cands[(size_t)b * L * K], L, K,
                    WalkParams{r.temperature, r.p_min, r.seed}, (uint32_t)b, &res.path[(size_t)b * L],
                    &res.n_emitted[b], nullptr);
  }
  res.scores = lattice;
  return res;
}

// The backend's run of d against the reference steps, bitwise (q and packed rows aside).
void expect_data_bitwise(const Case& c, const Data& d, const RunOpts& r) {
  Result got = run_case(c, d, r);
  ASSERT_EQ(got.status, DFSEL_SUCCESS) << got.error;
  const Result want = reference_step(c, d, r);
  got.q.clear();
  got.packed.clear();
  EXPECT_EQ(bitwise_diff(got, want), "");
}

void expect_bitwise(const Case& c, uint64_t seed, const RunOpts& r) {
  SCOPED_TRACE(c.str() + " seed=" + std::to_string(seed));
  expect_data_bitwise(c, make_data(c, seed), r);
}

template <int N>
void threads(int, dfsel_plan_desc* desc) { desc->n_threads = N; }

const std::vector<void (*)(int, dfsel_plan_desc*)> kThreadCounts = {threads<1>, threads<2>, threads<3>, threads<0>};

TEST(CpuBackend, BitwiseTheReferenceOnRandomShapesAndTypes) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const dfsel_type floats[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
  const dfsel_type weights[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
  for (int i = 0; i < 32; ++i) {
    Case c;
    c.V = 8 + rng() % 5000;
    c.K = (int)std::min<int64_t>(c.V, 1 + rng() % 64);
    c.R = rng() % 2 ? 32 * (1 + rng() % 9) : 1 + (int)(rng() % 300);
    c.E = 32 * (1 + rng() % 12);
    c.block = 2 + rng() % 8;
    c.blocks = 1 + rng() % 3;
    c.logits_t = floats[rng() % 3];
    c.hidden_t = floats[rng() % 3];
    c.cb_t = c.R % 32 == 0 ? weights[rng() % 4] : floats[rng() % 3];
    c.wh_t = weights[rng() % 4];
    c.logits_pad = rng() % 3 == 0 ? rng() % 9 : 0;
    c.softcap = rng() % 2 ? 0.0f : 5.0f + rng() % 20;
    RunOpts r;
    r.edit_desc = kThreadCounts[rng() % kThreadCounts.size()];
    r.p_min = rng() % 3 == 0 ? 0.2f : 0.0f;
    expect_bitwise(c, rng(), r);
  }
}

TEST(CpuBackend, BitwiseTheReferenceOnSpecialValues) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Special s : {Special::kTies, Special::kNaN, Special::kNegInf, Special::kShortRows, Special::kAllEqual,
                    Special::kMixed})
    for (dfsel_type t : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
      for (int K : {1, 16, 64}) {
        Case c;
        c.V = 64 + rng() % 700;
        c.K = K;
        c.special = s;
        c.logits_t = t;
        RunOpts r;
        r.edit_desc = kThreadCounts[rng() % kThreadCounts.size()];
        expect_bitwise(c, rng(), r);
      }
}

// Rows sorted ascending make every element a new candidate; descending, none after the first K;
// each at row lengths below, at and past a filter block.
class CpuBackendSortedRows : public testing::TestWithParam<int64_t> {};
TEST_P(CpuBackendSortedRows, AndRowsShorterThanAFilterBlock) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t V = GetParam();
  for (int order = -1; order <= 1; ++order) {
    Case c;
    c.V = V;
    c.K = (int)std::min<int64_t>(V, 16);
    const uint64_t data_seed = rng();
    Data d = make_data(c, data_seed);
    const int64_t n_tokens = (int64_t)c.blocks * c.block;
    for (int64_t t = 0; t < n_tokens && order != 0; ++t)
      for (int64_t v = 0; v < V; ++v)
        store_elem(d.logits.data() + t * d.logits_nb1, (size_t)v, c.logits_t, (float)(order * v) * 0.25f);
    SCOPED_TRACE(c.str() + " order=" + std::to_string(order));
    RunOpts r;
    r.edit_desc = threads<2>;
    expect_data_bitwise(c, d, r);
  }
}
INSTANTIATE_TEST_SUITE_P(, CpuBackendSortedRows, testing::Values(1, 5, 31, 32, 33, 64, 65, 1000),
                         [](const testing::TestParamInfo<int64_t>& info) { return "V" + std::to_string(info.param); });

TEST(CpuBackend, EveryWorkerCountGivesBitwiseTheSameResult) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  Case c = model_case(20000, 512, 3);
  const Data d = make_data(c, rng());
  RunOpts one;
  one.edit_desc = threads<1>;
  const Result base = run_case(c, d, one);
  ASSERT_EQ(base.status, DFSEL_SUCCESS) << base.error;
  for (auto edit : {threads<2>, threads<3>, threads<7>, threads<0>}) {
    RunOpts r;
    r.edit_desc = edit;
    const Result x = run_case(c, d, r);
    ASSERT_EQ(x.status, DFSEL_SUCCESS) << x.error;
    EXPECT_EQ(bitwise_diff(x, base), "");
  }
}

TEST(CpuBackend, RefusesAbsurdThreadCounts) {
  Case c;
  const Data d = make_data(c, 1);
  RunOpts r;
  r.edit_desc = [](int, dfsel_plan_desc* desc) { desc->n_threads = 100000; };
  const Result x = run_case(c, d, r);
  EXPECT_EQ(x.status, DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(x.error.find("n_threads = 100000"), std::string::npos) << x.error;
}

// The workspace of the largest description validation accepts does not fit in 64 bits (hidden
// rows alone: about 2^64 - 2^34 bytes, then the lattices): the size query saturates and plan
// creation says so, instead of carving a workspace whose size wrapped around. The weights are
// stand-ins that nothing reads.
TEST(CpuBackend, AWorkspaceLargerThanTheAddressSpaceIsRefused) {
  alignas(64) static const float stand_in[64] = {};
  dfsel_plan_desc desc{};
  const int64_t E = INT32_MAX;
  desc.config = dfsel_config{64, E, 1, 64, 1024, 1.0f, 0.0f, INT32_MAX / 1023};
  desc.shard = dfsel_shard{0, 1, 0, 64};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.e_prev = make_matrix(stand_in, DFSEL_TYPE_F32, 1, 64, 4);
  desc.e_next = make_matrix(stand_in, DFSEL_TYPE_F32, 1, 64, 4);
  desc.w_h = make_matrix(stand_in, DFSEL_TYPE_F32, E, 1, (size_t)E * 4);
  size_t bytes = 0;
  char msg[256] = "";
  ASSERT_EQ(dfsel_workspace_size(&desc, &bytes, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(bytes, SIZE_MAX);
  dfsel_plan* plan = nullptr;
  EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_OUT_OF_MEMORY);
  EXPECT_NE(std::string(msg).find("does not fit in the address space"), std::string::npos) << msg;
  EXPECT_EQ(plan, nullptr);
}

}  // namespace
}  // namespace dfsel::test
