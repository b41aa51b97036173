// A test fixture of one CPU plan whose buffers a test places by hand: the problem, the plan's
// description, the run's inputs and outputs, and the refusal of a run.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "support/problem.h"

namespace dfsel::test {

class OnePlan : public testing::Test {
 protected:
  // The problem c (set c first) on seeded data, its description and the inputs of a run.
  void describe(uint64_t seed) {
    d = make_data(c, seed);
    desc = cpu_desc(c, d, 0, 1, 0, c.V);
    in = cpu_inputs(c, d);
  }
  void create() {
    char msg[256];
    ASSERT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  }
  void TearDown() override { dfsel_plan_destroy(plan); }
  std::string refused() {
    EXPECT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    return dfsel_plan_last_error(plan);
  }

  Case c;
  Data d;
  dfsel_plan_desc desc{};
  dfsel_plan* plan = nullptr;
  dfsel_inputs in{};
  dfsel_outputs out{};
};

}  // namespace dfsel::test
