// Plans and threads (dfsel.h, Threads): one plan called from two threads at once refuses the
// call that finds it in use (DFSEL_BUSY) and never mixes the two runs; two plans on two threads
// both work. Before plans claimed their calls, the CPU worker pool deadlocked under two callers
// and, with one worker, 228 of 300 paths came back wrong with DFSEL_SUCCESS. This file is
// built into dfsel_thread_tests, which CI also runs under ThreadSanitizer.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "host/plan/plan.h"
#include "support/problem.h"
#include "support/two_threads.h"

namespace dfsel::test {
namespace {

// One problem, its plan description and the outputs of one caller.
struct Step {
  Case c;
  Data d;
  dfsel_inputs in{};
  std::vector<int32_t> path, n_emitted, cand_ids;
  dfsel_outputs out{};

  explicit Step(uint64_t seed) {
    c.V = 4000;
    c.blocks = 3;
    d = make_data(c, seed);
    in = cpu_inputs(c, d);
    path.resize((size_t)c.blocks * (c.block - 1));
    n_emitted.resize(c.blocks);
    cand_ids.resize(path.size() * c.K);
    out.path = path.data();
    out.n_emitted = n_emitted.data();
    out.cand_ids = cand_ids.data();
  }
  dfsel_plan* create(int32_t n_threads) const {
    dfsel_plan_desc desc = cpu_desc(c, d, 0, 1, 0, c.V);
    desc.n_threads = n_threads;
    dfsel_plan* plan = nullptr;
    char msg[256];
    EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
    return plan;
  }
  // This caller's own outputs, the inputs shared.
  dfsel_outputs outputs_of(std::vector<int32_t>* store) const {
    store->assign(path.size() + n_emitted.size() + cand_ids.size(), -7);
    dfsel_outputs o{};
    o.path = store->data();
    o.n_emitted = o.path + path.size();
    o.cand_ids = o.n_emitted + n_emitted.size();
    return o;
  }
  bool same_as_reference(const std::vector<int32_t>& store) const {
    return std::equal(path.begin(), path.end(), store.begin()) &&
           std::equal(n_emitted.begin(), n_emitted.end(), store.begin() + path.size()) &&
           std::equal(cand_ids.begin(), cand_ids.end(), store.begin() + path.size() + n_emitted.size());
  }
};

// Both threads run the same plan; every success must be the single-threaded result.
void hammer(int32_t n_threads) {
  Step s(31);
  dfsel_plan* plan = s.create(n_threads);
  ASSERT_NE(plan, nullptr);
  ASSERT_EQ(dfsel_plan_run(plan, &s.in, &s.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  std::vector<int32_t> store[2];
  const dfsel_outputs outs[2] = {s.outputs_of(&store[0]), s.outputs_of(&store[1])};
  hammer_one_plan([&](int thread, bool* same) {
    const dfsel_status st = dfsel_plan_run(plan, &s.in, &outs[thread], nullptr);
    if (st == DFSEL_SUCCESS) {
      *same = s.same_as_reference(store[thread]);
      store[thread].assign(store[thread].size(), -7);
    }
    return st;
  });
  EXPECT_EQ(dfsel_plan_destroy(plan), DFSEL_SUCCESS);
}

TEST(ThreadPlan, OnePlanFromTwoThreadsIsRefusedNotMixed) { hammer(0); }

TEST(ThreadPlan, OnePlanFromTwoThreadsWithOneWorker) { hammer(1); }

TEST(ThreadPlan, TwoPlansOnTwoThreadsBothWork) {
  Step s(32);
  dfsel_plan* plans[2] = {s.create(0), s.create(2)};
  ASSERT_EQ(dfsel_plan_run(plans[0], &s.in, &s.out, nullptr), DFSEL_SUCCESS);
  Tally t;
  on_two_threads(
      [&](int i) {
        std::vector<int32_t> store;
        const dfsel_outputs o = s.outputs_of(&store);
        for (int rep = 0; rep < 40; ++rep) {
          if (dfsel_plan_run(plans[i], &s.in, &o, nullptr) != DFSEL_SUCCESS) ++t.other;
          else if (!s.same_as_reference(store)) ++t.wrong;
          if (dfsel_plan_wait(plans[i], nullptr, 5) != DFSEL_SUCCESS) ++t.other;
        }
      },
      60);
  EXPECT_EQ(t.other.load(), 0);
  EXPECT_EQ(t.wrong.load(), 0);
  for (dfsel_plan* p : plans) EXPECT_EQ(dfsel_plan_destroy(p), DFSEL_SUCCESS);
}

// What each call does while another call holds the plan, made certain by holding its claim
// as a call would: refused at once, the holder's message left alone, nothing claimed after.
TEST(ThreadPlan, EveryCallOnAPlanInUseIsRefused) {
  Step s(33);
  dfsel_plan* held = s.create(1);
  dfsel_plan* other = s.create(1);
  ASSERT_EQ(dfsel_plan_run(held, &s.in, nullptr, nullptr), DFSEL_INVALID_ARGUMENT);
  const std::string before = dfsel_plan_last_error(held);
  ASSERT_TRUE(held->in_use.try_claim());
  EXPECT_EQ(dfsel_plan_run(held, &s.in, &s.out, nullptr), DFSEL_BUSY);
  EXPECT_EQ(dfsel_plan_check(held, nullptr), DFSEL_BUSY);
  EXPECT_EQ(dfsel_plan_wait(held, nullptr, 0), DFSEL_BUSY);
  EXPECT_EQ(dfsel_plan_destroy(held), DFSEL_BUSY) << "a plan in use was freed";
  dfsel_plan* both[2] = {other, held};
  dfsel_inputs ins[2] = {s.in, s.in};
  dfsel_outputs outs[2] = {s.out, s.out};
  EXPECT_EQ(dfsel_run_group(2, both, ins, outs, nullptr), DFSEL_BUSY);
  EXPECT_EQ(dfsel_plan_last_error(held), before);
  EXPECT_STRNE(dfsel_status_string(DFSEL_BUSY), "unknown status");
  EXPECT_EQ(dfsel_plan_run(other, &s.in, &s.out, nullptr), DFSEL_SUCCESS) << "the group left plans[0] claimed";
  held->in_use.release();
  EXPECT_EQ(dfsel_plan_run(held, &s.in, &s.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(held);
  EXPECT_EQ(dfsel_plan_destroy(held), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_destroy(other), DFSEL_SUCCESS);
}

}  // namespace
}  // namespace dfsel::test
