// The ranks of a group of CUDA plans given different per-run inputs or weights that every rank
// holds whole. Selector plans (dfsel.h, dfsel_run_group): each rank's records carry what it was
// given (kernels/common/agree_record.cuh), and every rank's check fails naming the first
// difference; that block walks nothing, the other blocks are unchanged, and the plans run again
// once the inputs agree. Equal inputs in other buffers, at another row stride, run. DSpark plans
// (dspark.h, dfsel_dspark_run_group): the records' anchor and inputs word, the same way.
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/common/numeric.cuh"
#include "support/dspark_gpu.h"
#include "support/dspark_problem.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct Outcome {
  dfsel_status status;
  std::string error;
  std::vector<int32_t> cand_ids, path, n_emitted;
};

// One group on device 0: rank s owns [bounds[s], bounds[s + 1]) and reads its own device copy
// of every input and weight.
class CudaGroup {
 public:
  CudaGroup(const Case& c, const Data& d, const std::vector<int64_t>& bounds, dfsel_placement pl,
            float temperature = 0.0f)
      : c_(c), d_(d), bounds_(bounds), placement_(pl) {
    const int S = n_ranks_ = (int)bounds.size() - 1;
    nd_ = (size_t)c.blocks * (c.block - 1);
    for (int s = 0; s < S; ++s) {
      ranks_.emplace_back(new Rank);
      Rank& k = *ranks_.back();
      k.logits.resize(d.logits.size());
      k.logits.upload(d.logits);
      k.w_h.resize(d.w_h.size());
      k.w_h.upload(d.w_h);
      k.anchors.resize(d.anchors.size());
      k.anchors.upload(d.anchors);
      put_hidden(s, d.hidden, d.hidden_nb1);
      const size_t cb_row = row_bytes(c.cb_t, c.R);
      const bool sh = pl == DFSEL_CODEBOOKS_SHARDED;
      const int64_t first = sh ? bounds[s] : 0, rows = sh ? bounds[s + 1] - bounds[s] : c.V;
      k.e_prev.resize(rows * cb_row);
      k.e_prev.upload(d.e_prev.data() + first * cb_row, rows * cb_row);
      k.e_next.resize(rows * cb_row);
      k.e_next.upload(d.e_next.data() + first * cb_row, rows * cb_row);
      k.cand_ids.resize(nd_ * c.K);
      k.path.resize(nd_);
      k.n_emitted.resize(c.blocks);
      k.q.resize(nd_ * c.K);
      k.in.logits = make_matrix(k.logits.get() + bounds[s] * elem_size(c.logits_t), c.logits_t, bounds[s + 1] - bounds[s],
                                (int64_t)c.blocks * c.block, d.logits_nb1);
      k.in.anchors = k.anchors.get();
      k.in.n_blocks = c.blocks;
      k.in.temperature = temperature;
      k.out.cand_ids = k.cand_ids.get();
      k.out.path = k.path.get();
      k.out.n_emitted = k.n_emitted.get();
      k.out.q = temperature > 0.0f ? k.q.get() : nullptr;
      create(s);
    }
  }
  ~CudaGroup() {
    cudaDeviceSynchronize();
    for (auto& k : ranks_) dfsel_plan_destroy(k->plan);
  }

  // Rank s's hidden rows: `hidden`, rows nb1 bytes apart.
  void put_hidden(int s, const std::vector<uint8_t>& hidden, size_t nb1) {
    Rank& k = *ranks_[s];
    k.hidden.resize(hidden.size());
    k.hidden.upload(hidden);
    k.in.hidden = make_matrix(k.hidden.get(), c_.hidden_t, c_.E, (int64_t)c_.blocks * c_.block, nb1);
  }
  void put_anchors(int s, const std::vector<int32_t>& a) { ranks_[s]->anchors.upload(a); }
  dfsel_inputs& inputs(int s) { return ranks_[s]->in; }
  // Rank s's plan made again over its own copy of w_h.
  void remake(int s, const std::vector<uint8_t>& w_h) {
    dfsel_plan_destroy(ranks_[s]->plan);
    ranks_[s]->plan = nullptr;
    ranks_[s]->w_h.upload(w_h);
    create(s);
  }
  bool ok() const {
    for (const auto& k : ranks_)
      if (!k->plan) return false;
    return true;
  }

  // Outputs poisoned, one step of every rank, then every rank's check and outputs.
  std::vector<Outcome> run() {
    const int S = (int)ranks_.size();
    std::vector<dfsel_plan*> plans;
    std::vector<dfsel_inputs> in;
    std::vector<dfsel_outputs> out;
    for (auto& k : ranks_) {
      k->cand_ids.poison();
      k->path.poison();
      k->n_emitted.poison();
      k->q.poison();
      plans.push_back(k->plan);
      in.push_back(k->in);
      out.push_back(k->out);
    }
    const dfsel_status st = dfsel_run_group(S, plans.data(), in.data(), out.data(), nullptr);
    std::vector<Outcome> res;
    for (int s = 0; s < S; ++s) {
      Outcome o;
      o.status = st != DFSEL_SUCCESS ? st : dfsel_plan_check(plans[s], nullptr);
      o.error = dfsel_plan_last_error(plans[s]);
      o.cand_ids = ranks_[s]->cand_ids.download();
      o.path = ranks_[s]->path.download();
      o.n_emitted = ranks_[s]->n_emitted.download();
      res.push_back(o);
    }
    return res;
  }

  std::string create_error;

 private:
  struct Rank {
    DeviceBuffer<uint8_t> logits, hidden, e_prev, e_next, w_h;
    DeviceBuffer<int32_t> anchors, cand_ids, path, n_emitted;
    DeviceBuffer<float> q;
    dfsel_inputs in{};
    dfsel_outputs out{};
    dfsel_plan* plan = nullptr;
  };

  void create(int s) {
    Rank& k = *ranks_[s];
    const int S = n_ranks_;
    const size_t cb_row = row_bytes(c_.cb_t, c_.R);
    const int64_t rows = placement_ == DFSEL_CODEBOOKS_SHARDED ? bounds_[s + 1] - bounds_[s] : c_.V;
    dfsel_plan_desc desc = cpu_desc(c_, d_, s, S, bounds_[s], bounds_[s + 1]);
    desc.backend = DFSEL_BACKEND_CUDA;
    desc.placement = placement_;
    desc.e_prev = make_matrix(k.e_prev.get(), c_.cb_t, c_.R, rows, cb_row);
    desc.e_next = make_matrix(k.e_next.get(), c_.cb_t, c_.R, rows, cb_row);
    desc.w_h.data = k.w_h.get();
    char msg[512] = "";
    if (dfsel_plan_create(&desc, &k.plan, msg, sizeof msg) != DFSEL_SUCCESS) {
      k.plan = nullptr;
      create_error = msg;
    }
  }

  Case c_;
  Data d_;
  std::vector<int64_t> bounds_;
  dfsel_placement placement_;
  int n_ranks_ = 0;
  size_t nd_ = 0;
  std::vector<std::unique_ptr<Rank>> ranks_;
};

Case group_case() {
  Case c;
  c.V = 3000;
  c.E = 264;
  c.R = 32;
  c.K = 8;
  c.block = 6;
  c.blocks = 3;
  return c;
}

// Every rank failed with a message holding each of `words`, the same on every rank; block b
// walked nothing; every other block walked as in `good`.
void expect_every_rank_fails(const std::vector<Outcome>& got, const Outcome& good, int b, int L,
                             const std::vector<std::string>& words) {
  for (size_t s = 0; s < got.size(); ++s) {
    SCOPED_TRACE("rank " + std::to_string(s));
    EXPECT_EQ(got[s].status, DFSEL_INVALID_ARGUMENT);
    EXPECT_EQ(got[s].error, got[0].error);
    for (const std::string& w : words) EXPECT_NE(got[s].error.find(w), std::string::npos) << got[s].error << " lacks " << w;
    for (size_t x = 0; x < got[s].n_emitted.size(); ++x) {
      if ((int)x == b) {
        EXPECT_EQ(got[s].n_emitted[x], 0);
        for (int p = 0; p < L; ++p) EXPECT_EQ(got[s].path[(size_t)x * L + p], -1) << "block " << b << " position " << p;
      } else {
        EXPECT_EQ(got[s].n_emitted[x], good.n_emitted[x]) << "block " << x;
        for (int p = 0; p < L; ++p)
          EXPECT_EQ(got[s].path[(size_t)x * L + p], good.path[(size_t)x * L + p]) << "block " << x << " position " << p;
      }
    }
  }
}

void expect_every_rank_runs(const std::vector<Outcome>& got, const Outcome& good) {
  for (size_t s = 0; s < got.size(); ++s) {
    ASSERT_EQ(got[s].status, DFSEL_SUCCESS) << "rank " << s << ": " << got[s].error;
    EXPECT_EQ(first_diff(got[s].path, good.path), -1) << "rank " << s;
    EXPECT_EQ(first_diff(got[s].n_emitted, good.n_emitted), -1) << "rank " << s;
    EXPECT_EQ(first_diff(got[s].cand_ids, good.cand_ids), -1) << "rank " << s;
  }
}

struct GroupShape {
  int S;
  dfsel_placement placement;
};

class GpuGroupInputs : public testing::TestWithParam<GroupShape> {
 protected:
  void SetUp() override {
    DFSEL_REQUIRE_GPUS(1);
    seed = fresh_seed();
    std::mt19937_64 rng(seed);
    c = group_case();
    d = make_data(c, rng());
    bounds = random_bounds(c.V, GetParam().S, 200, rng);
    group.reset(new CudaGroup(c, d, bounds, GetParam().placement));
    ASSERT_TRUE(group->ok()) << group->create_error;
    const std::vector<Outcome> first = group->run();
    expect_every_rank_runs(first, first[0]);
    good = first[0];
  }
  std::string seed_trace() const { return "seed=" + std::to_string(seed); }
  int last() const { return GetParam().S - 1; }
  int L() const { return c.block - 1; }

  uint64_t seed = 0;
  Case c;
  Data d;
  std::vector<int64_t> bounds;
  std::unique_ptr<CudaGroup> group;
  Outcome good;
};

TEST_P(GpuGroupInputs, EqualInputsAtAnotherStrideRun) {
  SCOPED_TRACE(seed_trace());
  // The last rank's hidden rows 48 bytes further apart, the same values.
  const size_t nb1 = d.hidden_nb1 + 48, n_tokens = (size_t)c.blocks * c.block;
  std::vector<uint8_t> h(nb1 * n_tokens, 0xab);
  for (size_t t = 0; t < n_tokens; ++t) std::memcpy(&h[t * nb1], &d.hidden[t * d.hidden_nb1], d.hidden_nb1);
  group->put_hidden(last(), h, nb1);
  expect_every_rank_runs(group->run(), good);
}

TEST_P(GpuGroupInputs, DifferentAnchorsFailEveryRank) {
  SCOPED_TRACE(seed_trace());
  std::vector<int32_t> a = d.anchors;
  a[1] = (a[1] + 7) % (int32_t)c.V;
  group->put_anchors(last(), a);
  expect_every_rank_fails(group->run(), good, 1, L(),
                          {"different inputs", "inputs.anchors[1] is " + std::to_string(d.anchors[1]) + " on rank 0 and " +
                                                   std::to_string(a[1]) + " on rank " + std::to_string(last())});
  // The flags were cleared by the checks: the same plans run once the anchors agree.
  group->put_anchors(last(), d.anchors);
  expect_every_rank_runs(group->run(), good);
}

TEST_P(GpuGroupInputs, DifferentHiddenRowsFailEveryRank) {
  SCOPED_TRACE(seed_trace());
  // One bit of block 2's position 3, a row the gate reads.
  std::vector<uint8_t> h = d.hidden;
  h[(size_t)(2 * c.block + 3) * d.hidden_nb1 + 5] ^= 0x04;
  group->put_hidden(last(), h, d.hidden_nb1);
  expect_every_rank_fails(group->run(), good, 2, L(),
                          {"for block 2: rank " + std::to_string(last()) + "'s inputs.hidden rows"});
  // An anchor position's row is never read, so never compared.
  h = d.hidden;
  h[(size_t)(1 * c.block) * d.hidden_nb1 + 5] ^= 0x04;
  group->put_hidden(last(), h, d.hidden_nb1);
  expect_every_rank_runs(group->run(), good);
}

TEST_P(GpuGroupInputs, DifferentScalarsFailEveryRank) {
  SCOPED_TRACE(seed_trace());
  const std::string words = "rank " + std::to_string(last()) + "'s temperature, p_min, seed or n_blocks differ";
  dfsel_inputs& in = group->inputs(last());
  in.temperature = -0.0f;  // greedy too, but not what rank 0 was given
  std::vector<Outcome> got = group->run();
  for (const Outcome& o : got) {
    EXPECT_EQ(o.status, DFSEL_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find(words), std::string::npos) << o.error;
    for (int32_t n : o.n_emitted) EXPECT_EQ(n, 0);  // the scalars differ for every block
  }
  in.temperature = 0.0f;
  in.seed = 12345;
  got = group->run();
  for (const Outcome& o : got) EXPECT_NE(o.error.find(words), std::string::npos) << o.error;
  in.seed = 0;
  expect_every_rank_runs(group->run(), good);
}

TEST_P(GpuGroupInputs, AnotherWhFailsEveryRank) {
  SCOPED_TRACE(seed_trace());
  std::vector<uint8_t> w = d.w_h;
  w[w.size() / 2] ^= 1;
  group->remake(last(), w);
  ASSERT_TRUE(group->ok()) << group->create_error;
  const std::vector<Outcome> got = group->run();
  for (const Outcome& o : got) {
    EXPECT_EQ(o.status, DFSEL_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find("rank " + std::to_string(last()) + "'s plan holds a w_h with other values"), std::string::npos)
        << o.error;
  }
  group->remake(last(), d.w_h);  // an equal copy
  ASSERT_TRUE(group->ok()) << group->create_error;
  expect_every_rank_runs(group->run(), good);
}

constexpr GroupShape kShapes[] = {
    {2, DFSEL_CODEBOOKS_REPLICATED}, {2, DFSEL_CODEBOOKS_SHARDED}, {3, DFSEL_CODEBOOKS_SHARDED}};
INSTANTIATE_TEST_SUITE_P(, GpuGroupInputs, testing::ValuesIn(kShapes), [](const testing::TestParamInfo<GroupShape>& i) {
  return std::to_string(i.param.S) + "Ranks" + (i.param.placement == DFSEL_CODEBOOKS_SHARDED ? "Sharded" : "Replicated");
});

// Sampling: a rank given another seed draws other tokens, and is stopped the same way.
TEST(GpuGroupInputsSampling, AnotherSeedFailsEveryRank) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Case c = group_case();
  const Data d = make_data(c, rng());
  CudaGroup g(c, d, random_bounds(c.V, 2, 200, rng), DFSEL_CODEBOOKS_REPLICATED, 0.8f);
  ASSERT_TRUE(g.ok()) << g.create_error;
  for (int s = 0; s < 2; ++s) g.inputs(s).seed = 77;
  const std::vector<Outcome> good = g.run();
  expect_every_rank_runs(good, good[0]);
  g.inputs(1).seed = 78;
  for (const Outcome& o : g.run()) {
    EXPECT_EQ(o.status, DFSEL_INVALID_ARGUMENT);
    EXPECT_NE(o.error.find("rank 1's temperature, p_min, seed or n_blocks differ"), std::string::npos) << o.error;
  }
}

// ---- DSpark ----

struct DSparkRanks {
  std::vector<dfsel_status> status;
  std::vector<std::string> error;
  DSparkResult result;  // every rank's outputs, the same on every rank
};

// One chain of two ranks, rank 1 given `other` (or d) for its inputs and conf_w.
DSparkRanks run_two(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkData* other) {
  DSparkCudaOpts o;
  o.other_rank = other ? 1 : -1;
  o.other_data = other;
  DSparkCudaSession session(c, d, r, o);
  DSparkRanks x;
  x.result.status = session.status;
  x.result.error = session.error;
  if (!session.ok()) return x;
  session.poison_outputs();
  if (session.enqueue() != DFSEL_SUCCESS) {
    x.result = session.download();
    return x;
  }
  for (int s = 0; s < session.ranks(); ++s) {
    x.status.push_back(dfsel_dspark_plan_wait(session.plans[s], session.streams[s], -1));
    x.error.push_back(dfsel_dspark_plan_last_error(session.plans[s]));
  }
  x.result = session.download();
  return x;
}

class GpuDSparkGroupInputs : public testing::TestWithParam<std::tuple<dfsel_placement, float>> {
 protected:
  void SetUp() override {
    DFSEL_REQUIRE_GPUS(1);
    seed = fresh_seed();
    std::mt19937_64 rng(seed);
    c.V = c.V_target = 3000;
    c.R = 32;
    c.E = 72;
    c.N = 5;
    c.blocks = 4;
    r.bounds = random_bounds(c.V, 2, 300, rng);
    r.placement = std::get<0>(GetParam());
    r.temperature = std::get<1>(GetParam());
    r.seed = rng();
    d = make_dspark_data(c, rng());
    const DSparkRanks first = run_two(c, d, r, nullptr);
    ASSERT_EQ(first.result.status, DFSEL_SUCCESS) << first.result.error;
    for (size_t s = 0; s < first.status.size(); ++s) ASSERT_EQ(first.status[s], DFSEL_SUCCESS) << first.error[s];
    good = first.result;
  }
  // Every rank failed with each of `words` in its message (the same on every rank); block b
  // emitted nothing (b < 0: no block did); the other blocks are as in the run with equal inputs.
  void expect_every_rank_fails(const DSparkRanks& x, int b, const std::vector<std::string>& words) {
    ASSERT_EQ(x.result.status, DFSEL_SUCCESS) << x.result.error;
    ASSERT_EQ(x.status.size(), 2u);
    for (size_t s = 0; s < 2; ++s) {
      EXPECT_EQ(x.status[s], DFSEL_INVALID_ARGUMENT) << "rank " << s;
      EXPECT_EQ(x.error[s], x.error[0]);
      for (const std::string& w : words) EXPECT_NE(x.error[s].find(w), std::string::npos) << x.error[s] << " lacks " << w;
    }
    for (int k = 0; k < c.blocks; ++k) {
      const bool stopped = b < 0 || k == b;
      EXPECT_EQ(x.result.n_emitted[k], stopped ? 0 : good.n_emitted[k]) << "block " << k;
      for (int i = 0; i < c.N; ++i) {
        const size_t at = (size_t)k * c.N + i;
        EXPECT_EQ(x.result.tokens[at], stopped ? -1 : good.tokens[at]) << "block " << k << " step " << i + 1;
      }
    }
  }
  std::string trace() const { return "seed=" + std::to_string(seed); }

  uint64_t seed = 0;
  DSparkCase c;
  DSparkRunOpts r;
  DSparkData d;
  DSparkResult good;
};

TEST_P(GpuDSparkGroupInputs, EqualCopiesRun) {
  SCOPED_TRACE(trace());
  const DSparkData copy = d;
  const DSparkRanks x = run_two(c, d, r, &copy);
  for (size_t s = 0; s < x.status.size(); ++s) EXPECT_EQ(x.status[s], DFSEL_SUCCESS) << x.error[s];
  EXPECT_EQ(dspark_bitwise_diff(x.result, good), "");
}

TEST_P(GpuDSparkGroupInputs, DifferentAnchorsFailEveryRank) {
  SCOPED_TRACE(trace());
  DSparkData other = d;
  other.anchors[1] = (other.anchors[1] + 5) % (int32_t)c.V_target;
  expect_every_rank_fails(run_two(c, d, r, &other), 1,
                          {"different inputs", "inputs.anchors[1] is " + std::to_string(d.anchors[1]) + " on rank 0 and " +
                                                   std::to_string(other.anchors[1]) + " on rank 1"});
}

TEST_P(GpuDSparkGroupInputs, DifferentHiddenRowsFailEveryRank) {
  SCOPED_TRACE(trace());
  DSparkData other = d;
  other.hidden[other.hidden.size() - 3 * other.hidden_nb1 / 4] ^= 0x10;  // block 3's last row
  expect_every_rank_fails(run_two(c, d, r, &other), 3, {"different inputs for block 3", "rank 1's inputs.hidden"});
}

TEST_P(GpuDSparkGroupInputs, AnotherConfWFailsEveryRank) {
  SCOPED_TRACE(trace());
  DSparkData other = d;
  other.conf_w[other.conf_w.size() / 2] ^= 0x01;
  expect_every_rank_fails(run_two(c, d, r, &other), -1, {"different inputs for block 0", "conf_w"});
}

INSTANTIATE_TEST_SUITE_P(, GpuDSparkGroupInputs,
                         testing::Combine(testing::Values(DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_SHARDED),
                                          testing::Values(0.0f, 0.7f)),
                         [](const testing::TestParamInfo<std::tuple<dfsel_placement, float>>& i) {
                           return std::string(std::get<0>(i.param) == DFSEL_CODEBOOKS_SHARDED ? "ShardedW1" : "ReplicatedW1") +
                                  (std::get<1>(i.param) > 0.0f ? "Sampling" : "Greedy");
                         });

}  // namespace
}  // namespace dfsel::test
