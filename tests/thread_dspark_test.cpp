// DSpark plans and threads (dspark.h, as dfsel.h: Threads): one plan called from two threads at
// once refuses the call that finds it in use with DFSEL_BUSY and never mixes the two chains,
// with every core and with one worker; two plans on two threads both work. The CPU DSpark
// backend shares a worker pool per plan as the DFlash2 one does, so two callers of one plan
// would deadlock or mix their chains without the claim. Built into dfsel_thread_tests.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "support/dspark_problem.h"
#include "support/two_threads.h"

namespace dfsel::test {
namespace {

// One chain, its plan and each thread's own outputs, against the single-threaded result.
struct Chain {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  dfsel_dspark_inputs in{};
  std::vector<int32_t> tokens[2], n_emitted[2], reference;

  explicit Chain(uint64_t seed) {
    c.V = c.V_target = 3000;
    c.R = 32;
    c.N = 5;
    c.blocks = 3;
    d = make_dspark_data(c, seed);
    in = dspark_inputs(c, d, r, 0);
  }
  dfsel_dspark_plan* create(int32_t n_threads) const {
    dfsel_dspark_plan_desc desc = dspark_desc(c, d, r, 0);
    desc.n_threads = n_threads;
    dfsel_dspark_plan* plan = nullptr;
    char msg[256];
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
    return plan;
  }
  dfsel_dspark_outputs outputs(int thread) {
    tokens[thread].assign((size_t)c.blocks * c.N, -7);
    n_emitted[thread].assign(c.blocks, -7);
    return dfsel_dspark_outputs{c.blocks, tokens[thread].data(), n_emitted[thread].data(), nullptr, nullptr, nullptr,
                                nullptr, nullptr};
  }
  // tokens then n_emitted of a thread, as one vector.
  std::vector<int32_t> result(int thread) const {
    std::vector<int32_t> all = tokens[thread];
    all.insert(all.end(), n_emitted[thread].begin(), n_emitted[thread].end());
    return all;
  }
};

void hammer(int32_t n_threads) {
  Chain ch(41);
  dfsel_dspark_plan* plan = ch.create(n_threads);
  ASSERT_NE(plan, nullptr);
  const dfsel_dspark_outputs outs[2] = {ch.outputs(0), ch.outputs(1)};
  ASSERT_EQ(dfsel_dspark_plan_run(plan, &ch.in, &outs[0], nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plan);
  ch.reference = ch.result(0);
  hammer_one_plan([&](int thread, bool* same) {
    const dfsel_status st = dfsel_dspark_plan_run(plan, &ch.in, &outs[thread], nullptr);
    if (st == DFSEL_SUCCESS) {
      *same = ch.result(thread) == ch.reference;
      std::memset(ch.tokens[thread].data(), 0xff, ch.tokens[thread].size() * 4);
      std::memset(ch.n_emitted[thread].data(), 0xff, ch.n_emitted[thread].size() * 4);
    }
    return st;
  });
  EXPECT_EQ(dfsel_dspark_plan_destroy(plan), DFSEL_SUCCESS);
}

TEST(ThreadDSpark, OnePlanFromTwoThreadsIsRefusedNotMixed) { hammer(0); }

TEST(ThreadDSpark, OnePlanFromTwoThreadsWithOneWorker) { hammer(1); }

TEST(ThreadDSpark, TwoPlansOnTwoThreadsBothWork) {
  Chain ch(42);
  dfsel_dspark_plan* plans[2] = {ch.create(0), ch.create(2)};
  const dfsel_dspark_outputs outs[2] = {ch.outputs(0), ch.outputs(1)};
  ASSERT_EQ(dfsel_dspark_plan_run(plans[0], &ch.in, &outs[0], nullptr), DFSEL_SUCCESS);
  ch.reference = ch.result(0);
  Tally t;
  on_two_threads(
      [&](int i) {
        for (int rep = 0; rep < 40; ++rep) {
          if (dfsel_dspark_plan_run(plans[i], &ch.in, &outs[i], nullptr) != DFSEL_SUCCESS) ++t.other;
          else if (ch.result(i) != ch.reference) ++t.wrong;
          if (dfsel_dspark_plan_wait(plans[i], nullptr, 5) != DFSEL_SUCCESS) ++t.other;
        }
      },
      60);
  EXPECT_EQ(t.other.load(), 0);
  EXPECT_EQ(t.wrong.load(), 0);
  for (dfsel_dspark_plan* p : plans) EXPECT_EQ(dfsel_dspark_plan_destroy(p), DFSEL_SUCCESS);
}

}  // namespace
}  // namespace dfsel::test
