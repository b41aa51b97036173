// Strides and counts no memory can hold: a tensor whose rows span more than a process can
// address (2^47 bytes), or whose last byte would lie past the end of the address space, is
// refused with its name and values before anything is read: every tensor of both plan kinds,
// weights at creation and inputs at every run. Before, a stride below 2^63 but far beyond any
// memory (2^50 on W1, 2^58 on the logits) was accepted and read.
#include <gtest/gtest.h>

#include <cinttypes>
#include <string>
#include <vector>

#include "support/dspark_problem.h"

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
  Case c;
  const Data d = make_data(c, 5);
  for (const char* name : {"e_prev", "e_next", "w_h"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_plan_desc desc = cpu_desc(c, d, 0, 1, 0, c.V);
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
    dfsel_plan_desc desc = cpu_desc(c, d, 0, 1, 0, c.V);
    (name[0] == 'w' ? desc.w_h : name[2] == 'p' ? desc.e_prev : desc.e_next).data = near_the_end();
    dfsel_plan* plan = nullptr;
    char msg[512] = "";
    EXPECT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    expect_named(msg, name, "passes the end of the address space");
  }
}

TEST(TensorSpan, SelectorInputsBeyondTheAddressSpaceAreRefused) {
  Case c;
  const Data d = make_data(c, 6);
  const dfsel_plan_desc desc = cpu_desc(c, d, 0, 1, 0, c.V);
  dfsel_plan* plan = nullptr;
  char msg[512] = "";
  ASSERT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  std::vector<int32_t> path((size_t)c.blocks * (c.block - 1)), n_emitted(c.blocks);
  dfsel_outputs out{};
  out.path = path.data();
  out.n_emitted = n_emitted.data();
  for (const char* name : {"inputs.logits", "inputs.hidden"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_inputs in = cpu_inputs(c, d);
      (name[7] == 'l' ? in.logits : in.hidden).nb[1] = nb1;
      EXPECT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_named(dfsel_plan_last_error(plan), name, nb1_text(nb1));
    }
    dfsel_inputs in = cpu_inputs(c, d);
    (name[7] == 'l' ? in.logits : in.hidden).data = near_the_end();
    EXPECT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    expect_named(dfsel_plan_last_error(plan), name, "passes the end of the address space");
  }
  const dfsel_inputs in = cpu_inputs(c, d);
  EXPECT_EQ(dfsel_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  dfsel_plan_destroy(plan);
}

struct DSparkBase {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  DSparkBase() {
    c.E = 16;          // a confidence head: conf_w and the hidden rows
    c.scale_rows = 2;  // w2_scale, one per row
    d = make_dspark_data(c, 8);
  }
  dfsel_dspark_plan_desc desc() const { return dspark_desc(c, d, r, 0); }
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
        dfsel_dspark_plan_desc desc = b.desc();
        dspark_weight(desc, name)->nb[1] = nb1;
        dfsel_dspark_plan* plan = nullptr;
        char msg[512] = "";
        EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
        EXPECT_EQ(plan, nullptr);
        expect_named(msg, name, nb1_text(nb1));
      }
    }
    SCOPED_TRACE(std::string(name) + " at the end of the address space");
    dfsel_dspark_plan_desc desc = b.desc();
    dspark_weight(desc, name)->data = near_the_end();
    dfsel_dspark_plan* plan = nullptr;
    char msg[512] = "";
    EXPECT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    expect_named(msg, name, "passes the end of the address space");
  }
}

TEST(TensorSpan, DSparkInputsBeyondTheAddressSpaceAreRefused) {
  const DSparkBase b;
  const dfsel_dspark_plan_desc desc = b.desc();
  dfsel_dspark_plan* plan = nullptr;
  char msg[512] = "";
  ASSERT_EQ(dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  std::vector<int32_t> store[7];
  const dfsel_dspark_outputs out = dspark_outputs_over(store, b.c.blocks, (size_t)b.c.blocks * b.c.N, 0, 0);
  for (const char* name : {"inputs.logits", "inputs.hidden"}) {
    for (size_t nb1 : kStrides) {
      SCOPED_TRACE(std::string(name) + " " + nb1_text(nb1));
      dfsel_dspark_inputs in = dspark_inputs(b.c, b.d, b.r, 0);
      (name[7] == 'l' ? in.logits : in.hidden).nb[1] = nb1;
      EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
      expect_named(dfsel_dspark_plan_last_error(plan), name, nb1_text(nb1));
    }
    dfsel_dspark_inputs in = dspark_inputs(b.c, b.d, b.r, 0);
    (name[7] == 'l' ? in.logits : in.hidden).data = near_the_end();
    EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    expect_named(dfsel_dspark_plan_last_error(plan), name, "passes the end of the address space");
  }
  const dfsel_dspark_inputs in = dspark_inputs(b.c, b.d, b.r, 0);
  EXPECT_EQ(dfsel_dspark_plan_run(plan, &in, &out, nullptr), DFSEL_SUCCESS) << dfsel_dspark_plan_last_error(plan);
  dfsel_dspark_plan_destroy(plan);
}

}  // namespace
}  // namespace dfsel::test
