// Handles that are not live plans of the kind a call expects: a plan already destroyed, or a
// DSpark plan given where a DFlash2 plan is expected (and the reverse). Every call refuses
// them (DFSEL_INVALID_ARGUMENT) without reading them, and the live plans go on working.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/one_plan.h"

namespace dfsel::test {
namespace {

// A created plan of each kind, with inputs and outputs. A test that destroys one takes it
// (take()) so that it is destroyed once.
struct Selector : SelectorPlan {
  Selector() {
    describe(3);
    EXPECT_EQ(create_plan(), DFSEL_SUCCESS) << create_message;
    place_outputs(0);
  }
};

struct DSpark : DSparkPlan {
  DSpark() {
    c.E = 16;  // a confidence head, so that every output is written
    describe(4);
    EXPECT_EQ(create_plan(), DFSEL_SUCCESS) << create_message;
    place_outputs(0);
  }
};

TEST(PlanHandle, ACallOnADestroyedSelectorPlanIsRefused) {
  Selector s;
  ASSERT_EQ(dfsel_plan_run(s.plan, &s.in, &s.out, nullptr), DFSEL_SUCCESS);
  dfsel_plan* const gone = s.take();
  ASSERT_EQ(dfsel_plan_destroy(gone), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_run(gone, &s.in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_run_group(1, &gone, &s.in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_wait(gone, nullptr, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_check(gone, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_backend(gone), DFSEL_BACKEND_AUTO);
  dfsel_config c{};
  EXPECT_EQ(dfsel_plan_config(gone, &c), DFSEL_INVALID_ARGUMENT);
  char msg[256] = "";
  EXPECT_EQ(dfsel_plan_check_memory(gone, &c, "x", msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("not a live plan"), std::string::npos) << msg;
  EXPECT_NE(std::string(dfsel_plan_last_error(gone)).find("not a live plan"), std::string::npos)
      << dfsel_plan_last_error(gone);
  EXPECT_EQ(dfsel_plan_destroy(gone), DFSEL_INVALID_ARGUMENT) << "a second destroy";
}

TEST(PlanHandle, ACallOnADestroyedDSparkPlanIsRefused) {
  DSpark p;
  ASSERT_EQ(dfsel_dspark_plan_run(p.plan, &p.in, &p.out, nullptr), DFSEL_SUCCESS);
  dfsel_dspark_plan* const gone = p.take();
  ASSERT_EQ(dfsel_dspark_plan_destroy(gone), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_dspark_plan_run(gone, &p.in, &p.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_dspark_run_group(1, &gone, &p.in, &p.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_dspark_plan_wait(gone, nullptr, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_dspark_plan_backend(gone), DFSEL_BACKEND_AUTO);
  EXPECT_NE(std::string(dfsel_dspark_plan_last_error(gone)).find("not a live plan"), std::string::npos);
  EXPECT_EQ(dfsel_dspark_plan_destroy(gone), DFSEL_INVALID_ARGUMENT) << "a second destroy";
}

// Each kind's calls given the other kind's plan: refused, and both plans still run.
TEST(PlanHandle, APlanOfTheOtherKindIsRefused) {
  Selector s;
  DSpark p;
  auto* dspark_as_selector = reinterpret_cast<dfsel_plan*>(p.plan);
  auto* selector_as_dspark = reinterpret_cast<dfsel_dspark_plan*>(s.plan);
  EXPECT_EQ(dfsel_plan_run(dspark_as_selector, &s.in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
  dfsel_plan* group[2] = {s.plan, dspark_as_selector};
  dfsel_inputs ins[2] = {s.in, s.in};
  dfsel_outputs outs[2] = {s.out, s.out};
  EXPECT_EQ(dfsel_run_group(2, group, ins, outs, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_wait(dspark_as_selector, nullptr, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_backend(dspark_as_selector), DFSEL_BACKEND_AUTO);
  EXPECT_NE(std::string(dfsel_plan_last_error(dspark_as_selector)).find("a DSpark plan"), std::string::npos)
      << dfsel_plan_last_error(dspark_as_selector);
  EXPECT_EQ(dfsel_plan_destroy(dspark_as_selector), DFSEL_INVALID_ARGUMENT);

  EXPECT_EQ(dfsel_dspark_plan_run(selector_as_dspark, &p.in, &p.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_dspark_plan_wait(selector_as_dspark, nullptr, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_dspark_plan_last_error(selector_as_dspark)).find("a DFlash2 plan"), std::string::npos);
  EXPECT_EQ(dfsel_dspark_plan_destroy(selector_as_dspark), DFSEL_INVALID_ARGUMENT);

  EXPECT_EQ(dfsel_plan_run(s.plan, &s.in, &s.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plan);
  EXPECT_EQ(dfsel_dspark_plan_run(p.plan, &p.in, &p.out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(p.plan);
  EXPECT_EQ(dfsel_plan_destroy(s.take()), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_dspark_plan_destroy(p.take()), DFSEL_SUCCESS);
}

// An address that was never a plan is refused too (it is not read: a pointer into a buffer).
TEST(PlanHandle, AnAddressThatIsNoPlanIsRefused) {
  std::vector<uint8_t> junk(4096, 0xab);
  auto* fake = reinterpret_cast<dfsel_plan*>(junk.data());
  EXPECT_EQ(dfsel_plan_destroy(fake), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_wait(fake, nullptr, 0), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(std::vector<uint8_t>(4096, 0xab), junk);
}

}  // namespace
}  // namespace dfsel::test
