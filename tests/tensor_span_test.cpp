// Strides and counts no memory can hold: a tensor whose rows span more than a process can
// address (2^47 bytes), or whose last byte would lie past the end of the address space, is
// refused with its name and values before anything is read: every tensor of both plan kinds,
// weights at creation and inputs at every run. Before, a stride below 2^63 but far beyond any
// memory (2^50 on W1, 2^58 on the logits) was accepted and read.
#include <gtest/gtest.h>

#include <cinttypes>
#include <string>

#include "support/one_plan.h"

namespace dfsel::test {
namespace {

const size_t kStrides[] = {size_t(1) << 48, size_t(1) << 50, size_t(1) << 58, size_t(1) << 60};

// A pointer whose rows run past the end of the address space, aligned for every type; every span of
// these tests is longer than the 16 bytes left.
const void* near_the_end() { return reinterpret_cast<const void*>(UINTPTR_MAX & ~uintptr_t(15)); }

std::string nb1_text(size_t nb1) { return "nb[1] = " + std::to_string(nb1); }

void expect_named(const std::string& msg, const char* tensor, const std::string& value) {
  EXPECT_NE(msg.find(tensor), std::string::npos) << msg;
  EXPECT_NE(msg.find(value), std::string::npos) << msg;
}

TEST(TensorSpan, SelectorWeightsBeyondTheAddressSpaceAreRefused) {
  SelectorPlan s;
  s.describe(5);
  for (const char* name : {"e_prev", "e_next", "w_h"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_plan_desc desc = s.desc;
      dfsel_tensor* t = name[0] == 'w' ? &desc.w_h : name[2] == 'p' ? &desc.e_prev : &desc.e_next;
      t->nb[1] = nb1;
      if (name[0] == 'e') desc.e_prev.nb[1] = desc.e_next.nb[1] = nb1;
      dfsel_plan* plan = nullptr;
      char msg[512] = "";
      EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
      EXPECT_EQ(plan, nullptr);
      expect_named(msg, name[0] == 'e' ? "e_prev" : name, nb1_text(nb1));
    }
    SCOPED_TRACE(std::string(name) + " at the end of the address space");
    dfsel_plan_desc desc = s.desc;
    (name[0] == 'w' ? desc.w_h : name[2] == 'p' ? desc.e_prev : desc.e_next).data = near_the_end();
    dfsel_plan* plan = nullptr;
    char msg[512] = "";
    EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    expect_named(msg, name, "passes the end of the address space");
  }
}

TEST(TensorSpan, SelectorInputsBeyondTheAddressSpaceAreRefused) {
  SelectorPlan s;
  s.describe(6);
  ASSERT_EQ(s.create_plan(), DFSEL_SUCCESS) << s.create_message;
  s.place_outputs(0);
  for (const char* name : {"inputs.logits", "inputs.hidden"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_inputs in = s.in;
      (name[7] == 'l' ? in.logits : in.hidden).nb[1] = nb1;
      EXPECT_EQ(dfsel_plan_run(s.plan, &in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_named(dfsel_plan_last_error(s.plan), name, nb1_text(nb1));
    }
    dfsel_inputs in = s.in;
    (name[7] == 'l' ? in.logits : in.hidden).data = near_the_end();
    EXPECT_EQ(dfsel_plan_run(s.plan, &in, &s.out, nullptr), DFSEL_INVALID_ARGUMENT);
    expect_named(dfsel_plan_last_error(s.plan), name, "passes the end of the address space");
  }
  EXPECT_EQ(dfsel_plan_run(s.plan, &s.in, &s.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plan);
}

// A DSpark plan that has every tensor these tests bend: w1, w2, w2_scale, conf_w, logits, hidden.
struct DSparkBase : DSparkPlan {
  DSparkBase() {
    c = dspark_case_with_every_weight();
    describe(8);
  }
};

dfsel_tensor* dspark_weight(dfsel_dspark_plan_desc& d, const std::string& name) {
  if (name == "w1") return &d.w1;
  if (name == "w2") return &d.w2;
  if (name == "w2_scale") return &d.w2_scale;
  return &d.conf_w;
}

TEST(TensorSpan, DSparkWeightsBeyondTheAddressSpaceAreRefused) {
  const DSparkBase b;
  for (const char* name : {"w1", "w2", "w2_scale", "conf_w"}) {
    const bool one_row = std::string(name) == "w2_scale" || std::string(name) == "conf_w";
    if (!one_row) {  // a tensor of one row never steps by its stride
      for (size_t nb1 : kStrides) {
        SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
        dfsel_dspark_plan_desc desc = b.desc;
        dspark_weight(desc, name)->nb[1] = nb1;
        dfsel_dspark_plan* plan = nullptr;
        char msg[512] = "";
        EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
        EXPECT_EQ(plan, nullptr);
        expect_named(msg, name, nb1_text(nb1));
      }
    }
    SCOPED_TRACE(std::string(name) + " at the end of the address space");
    dfsel_dspark_plan_desc desc = b.desc;
    dspark_weight(desc, name)->data = near_the_end();
    dfsel_dspark_plan* plan = nullptr;
    char msg[512] = "";
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    expect_named(msg, name, "passes the end of the address space");
  }
}

TEST(TensorSpan, DSparkInputsBeyondTheAddressSpaceAreRefused) {
  DSparkBase b;
  ASSERT_EQ(b.create_plan(), DFSEL_SUCCESS) << b.create_message;
  b.place_outputs(0);
  for (const char* name : {"inputs.logits", "inputs.hidden"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_dspark_inputs in = b.in;
      (name[7] == 'l' ? in.logits : in.hidden).nb[1] = nb1;
      EXPECT_EQ(dfsel_dspark_plan_run(b.plan, &in, &b.out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_named(dfsel_dspark_plan_last_error(b.plan), name, nb1_text(nb1));
    }
    dfsel_dspark_inputs in = b.in;
    (name[7] == 'l' ? in.logits : in.hidden).data = near_the_end();
    EXPECT_EQ(dfsel_dspark_plan_run(b.plan, &in, &b.out, nullptr), DFSEL_INVALID_ARGUMENT);
    expect_named(dfsel_dspark_plan_last_error(b.plan), name, "passes the end of the address space");
  }
  EXPECT_EQ(dfsel_dspark_plan_run(b.plan, &b.in, &b.out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(b.plan);
}

}  // namespace
}  // namespace dfsel::test
