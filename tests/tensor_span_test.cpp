// Strides and counts no memory can hold: a tensor whose rows span more than a process can
// address (2^47 bytes), or whose last byte would lie past the end of the address space, is
// refused with its name and values before anything is read: every tensor of both plan kinds,
// weights at creation and inputs at every run. Before, a stride below 2^63 but far beyond any
// memory (2^50 on W1, 2^58 on the logits) was accepted and read. The same rule holds for every
// other stride or size that reaches address arithmetic: outputs.packed_row_stride (the only
// output stride of either plan kind) and workspace_bytes (both kinds).
#include <gtest/gtest.h>

#include <cinttypes>
#include <string>
#include <utility>
#include <vector>

#include "support/one_plan.h"

namespace dfsel::test {
namespace {

// Beyond memory, and strides that wrap: rows in reverse order ((size_t)-4096 as an unsigned
// stride), and one just below 2^64.
const size_t kStrides[] = {size_t(1) << 48, size_t(1) << 50, size_t(1) << 58, size_t(1) << 60,
                           size_t(0) - 4096,  SIZE_MAX - 3};

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

// A stride that wraps the packed rows' range (SIZE_MAX - 3; -(n_embd * 4), rows in reverse
// order) was taken: the run wrote rows before outputs.packed (a heap overflow), while 2^62 was
// refused as an overlap of outputs.path. Each is refused naming the stride, and nothing is
// written; the rows before outputs.packed are the caller's, here poisoned to show a write.
TEST(TensorSpan, PackedRowStridesBeyondTheAddressSpaceAreRefused) {
  SelectorPlan s;
  s.c.E = 96;  // K + K*K = 72 fits: the packed rows are written
  s.describe(7);
  ASSERT_EQ(s.create_plan(), DFSEL_SUCCESS) << s.create_message;
  const size_t n_tokens = (size_t)s.c.blocks * s.c.block, row = (size_t)s.c.E * 4;
  const float poison = 1234.5f;
  std::vector<float> room;  // n_tokens rows each side of the rows
  float* packed = nullptr;
  // 2^48 last: it spans far past any memory without wrapping.
  for (size_t stride : {SIZE_MAX - 3, size_t(0) - row, size_t(1) << 62, size_t(1) << 48}) {
    SCOPED_TRACE("packed_row_stride " + std::to_string(stride));
    s.place_outputs(-7);
    room.assign(3 * n_tokens * s.c.E, poison);
    packed = room.data() + n_tokens * s.c.E;
    dfsel_outputs out = s.out;
    out.packed = packed;
    out.packed_row_stride = stride;
    EXPECT_EQ(dfsel_plan_run(s.plan, &s.in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
    expect_named(dfsel_plan_last_error(s.plan), "outputs.packed_row_stride", std::to_string(stride));
    size_t written = 0;
    for (float v : room) written += v != poison;
    EXPECT_EQ(written, 0u);
    for (int32_t v : s.path) EXPECT_EQ(v, -7);
    for (int32_t v : s.n_emitted) EXPECT_EQ(v, -7);
  }
  dfsel_outputs out = s.out;
  out.packed = static_cast<float*>(const_cast<void*>(near_the_end()));
  EXPECT_EQ(dfsel_plan_run(s.plan, &s.in, &out, nullptr), DFSEL_INVALID_ARGUMENT);
  expect_named(dfsel_plan_last_error(s.plan), "outputs.packed", "passes the end of the address space");
  out.packed = packed;
  out.packed_row_stride = row + 4;  // a padded stride that fits: the rows are written
  ASSERT_EQ(dfsel_plan_run(s.plan, &s.in, &out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plan);
  EXPECT_NE(packed[row / 4 + 1], poison);  // row 1, the first drafted row, starts a padded stride on
}

// workspace_bytes by the same rule, for both plan kinds: a workspace claimed beyond what a
// process can address, or past the end of the address space, is refused naming the size.
// Before, the claim was clamped to the end of memory and blamed on an overlap with a weight
// above it, or taken.
template <class Desc, class Plan>
void expect_workspaces_refused(const Desc& base, dfsel_status (*create)(const Desc*, Plan**, char*, size_t),
                               dfsel_status (*destroy)(Plan*)) {
  std::vector<uint64_t> ws(512);
  // Past the end of the address space last: taken, it would be written.
  const std::pair<void*, size_t> claims[] = {{ws.data(), SIZE_MAX}, {ws.data(), size_t(1) << 48},
                                             {const_cast<void*>(near_the_end()), size_t(1) << 20}};
  for (const auto& claim : claims) {
    SCOPED_TRACE("workspace_bytes " + std::to_string(claim.second));
    Desc desc = base;
    desc.workspace = claim.first;
    desc.workspace_bytes = claim.second;
    Plan* plan = nullptr;
    char msg[512] = "";
    EXPECT_EQ(create(&desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
    destroy(plan);
    expect_named(msg, "workspace_bytes", std::to_string(claim.second));
    if (claim.first != ws.data()) expect_named(msg, "workspace", "passes the end of the address space");
  }
}

TEST(TensorSpan, WorkspacesBeyondTheAddressSpaceAreRefused) {
  SelectorPlan s;
  s.describe(9);
  expect_workspaces_refused(s.desc, dfsel_plan_create, dfsel_plan_destroy);
  const DSparkBase b;
  expect_workspaces_refused(b.desc, dfsel_dspark_plan_create, dfsel_dspark_plan_destroy);
}

}  // namespace
}  // namespace dfsel::test
