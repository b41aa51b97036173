// One CPU plan of either kind whose buffers a test places by hand: the problem, the plan's
// description, the run's inputs and outputs, and the plan. The plan is destroyed with the
// object that holds it; a test that destroys it itself, as the call under test, takes it first.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "support/dspark_problem.h"

namespace dfsel::test {

// A plan of desc, created on request and owned here.
template <class Desc, class Plan, dfsel_status (*Create)(const Desc*, Plan**, char*, size_t),
          dfsel_status (*Destroy)(Plan*)>
struct OwnedPlan {
  OwnedPlan() = default;
  OwnedPlan(const OwnedPlan&) = delete;  // one owner, one destruction
  OwnedPlan& operator=(const OwnedPlan&) = delete;
  ~OwnedPlan() { Destroy(plan); }

  // The plan of desc: creation's status, and its message in create_message.
  dfsel_status create_plan() {
    char msg[512] = "";
    const dfsel_status st = Create(&desc, &plan, msg, sizeof msg);
    create_message = msg;
    return st;
  }
  // The plan, no longer destroyed here.
  Plan* take() {
    Plan* const p = plan;
    plan = nullptr;
    return p;
  }

  Desc desc{};
  Plan* plan = nullptr;
  std::string create_message;
};

// A DFlash2 selector plan of problem c, one rank over the whole vocabulary.
struct SelectorPlan : OwnedPlan<dfsel_plan_desc, dfsel_plan, dfsel_plan_create, dfsel_plan_destroy> {
  // The problem c (set c first) on seeded data, its description and the inputs of a run.
  void describe(uint64_t seed) {
    d = make_data(c, seed);
    desc = cpu_desc(c, d, 0, 1, 0, c.V);
    in = cpu_inputs(c, d);
  }
  // The path and n_emitted of every block as out, each element set to fill.
  void place_outputs(int32_t fill) {
    path.assign((size_t)c.blocks * (c.block - 1), fill);
    n_emitted.assign(c.blocks, fill);
    out.path = path.data();
    out.n_emitted = n_emitted.data();
  }

  Case c;
  Data d;
  dfsel_inputs in{};
  dfsel_outputs out{};
  std::vector<int32_t> path, n_emitted;
};

// A DSpark plan of draft c with run options r, rank 0 of r's ranks.
struct DSparkPlan
    : OwnedPlan<dfsel_dspark_plan_desc, dfsel_dspark_plan, dfsel_dspark_plan_create, dfsel_dspark_plan_destroy> {
  // The draft c (set c and r first) on seeded data, its description and the inputs of a run.
  void describe(uint64_t seed) {
    d = make_dspark_data(c, seed);
    desc = dspark_desc(c, d, r, 0);
    in = dspark_inputs(c, d, r, 0);
  }
  // Every output of every block as out, over store (dspark_outputs_over).
  void place_outputs(int32_t fill, size_t slack = 0) {
    out = dspark_outputs_over(store, c.blocks, (size_t)c.blocks * c.N, slack, fill);
  }

  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  dfsel_dspark_inputs in{};
  dfsel_dspark_outputs out{};
  std::vector<int32_t> store[7];
};

// A draft with every weight whose values a plan checks: a confidence head (conf_w, and the
// hidden rows it reads) and w2_scale, one per row.
inline DSparkCase dspark_case_with_every_weight() {
  DSparkCase c;
  c.E = 16;
  c.scale_rows = 2;
  return c;
}

// The gtest fixture of one selector plan: a creation that must succeed, and a run's refusal.
class OnePlan : public testing::Test, public SelectorPlan {
 protected:
  void create() { ASSERT_EQ(create_plan(), DFSEL_SUCCESS) << create_message; }
  std::string refused() {
    EXPECT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    return dfsel_plan_last_error(plan);
  }
};

}  // namespace dfsel::test
