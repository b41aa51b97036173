// Inputs the fuzzers of fuzz/ found to break the library, kept as tests after the fix. Each
// names the defect; the sanitizer build (DFSEL_SANITIZE) is the one that would catch a relapse.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace {

dfsel_tensor f32(const void* p, int64_t ne0, int64_t ne1) {
  return dfsel_tensor_2d(p, DFSEL_TYPE_F32, ne0, ne1, size_t(ne0) * 4);
}

struct Problem {
  int64_t V = 64, E = 32;
  int32_t R = 8, K = 4, block = 4;
  std::vector<float> e_prev, e_next, w_h, logits, hidden;
  std::vector<int32_t> anchors{3}, path, n_emitted;
  dfsel_plan_desc desc{};
  dfsel_inputs in{};
  dfsel_outputs out{};

  Problem() {
    e_prev.assign(size_t(V * R), 0.01f);
    e_next.assign(size_t(V * R), 0.02f);
    w_h.assign(size_t(R * E), 0.03f);
    logits.resize(size_t(V * block));
    for (size_t i = 0; i < logits.size(); ++i) logits[i] = float((i * 2654435761u) % 1000) / 100.0f;
    hidden.assign(size_t(E * block), 0.5f);
    desc.config = dfsel_config{V, E, R, K, block, 1.0f, 0.0f, 1};
    desc.shard = dfsel_shard{0, 1, 0, V};
    desc.backend = DFSEL_BACKEND_CPU;
    desc.e_prev = f32(e_prev.data(), R, V);
    desc.e_next = f32(e_next.data(), R, V);
    desc.w_h = f32(w_h.data(), E, R);
    in.logits = f32(logits.data(), V, block);
    in.hidden = f32(hidden.data(), E, block);
    in.anchors = anchors.data();
    in.n_blocks = 1;
    path.resize(size_t(block - 1));
    n_emitted.resize(1);
    out.path = path.data();
    out.n_emitted = n_emitted.data();
  }
};

// A 256-byte aligned buffer of n bytes.
struct Aligned {
  explicit Aligned(size_t n) {
    if (posix_memalign(&p, 256, n + 256) != 0) p = nullptr;
  }
  ~Aligned() { std::free(p); }
  uint8_t* bytes() { return static_cast<uint8_t*>(p); }
  void* p = nullptr;
};

// fuzz_api: a caller's workspace one byte off alignment was carved into floats on the CPU
// backend (a misaligned store in the gate). CPU plans now refuse a workspace that is not
// 16-byte aligned (CUDA plans ask 256).
TEST(FuzzRegression, CpuWorkspaceMustBeAligned) {
  Problem p;
  size_t need = 0;
  char msg[256] = "";
  ASSERT_EQ(dfsel_workspace_size(&p.desc, &need, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  Aligned buf(need + 256);
  ASSERT_NE(buf.p, nullptr);
  for (size_t shift : {size_t(1), size_t(4), size_t(8), size_t(12)}) {
    p.desc.workspace = buf.bytes() + shift;
    p.desc.workspace_bytes = need;
    dfsel_plan* plan = nullptr;
    EXPECT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT) << shift;
    EXPECT_EQ(plan, nullptr);
    EXPECT_NE(std::string(msg).find("workspace"), std::string::npos) << msg;
    EXPECT_NE(std::string(msg).find("aligned to 16 bytes"), std::string::npos) << msg;
  }
  p.desc.workspace = buf.bytes() + 16;
  dfsel_plan* plan = nullptr;
  ASSERT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_run(plan, &p.in, &p.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  EXPECT_GE(p.n_emitted[0], 0);
  dfsel_plan_destroy(plan);
}

// fuzz_api: logits claiming ne[1] = 2^63 - 1 rows were accepted (only ne[1] >= n_tokens was
// checked), so a description whose rows wrap the address space reached the reads. Tensors that
// span more than the address space (2^47 bytes) are refused, inputs at run and weights at
// creation (tensor_span_test.cpp: every tensor of both plan kinds).
TEST(FuzzRegression, TensorSpanningTheAddressSpaceIsRefused) {
  Problem p;
  char msg[256] = "";
  dfsel_plan* plan = nullptr;
  ASSERT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  dfsel_inputs in = p.in;
  in.logits.ne[1] = INT64_MAX;
  EXPECT_EQ(dfsel_plan_run(plan, &in, &p.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(plan)).find("inputs.logits spans more than 2^47 bytes"),
            std::string::npos)
      << dfsel_plan_last_error(plan);
  in = p.in;
  in.hidden.nb[1] = (SIZE_MAX / 2) & ~size_t(3);
  EXPECT_EQ(dfsel_plan_run(plan, &in, &p.out, nullptr), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(plan)).find("inputs.hidden spans"), std::string::npos)
      << dfsel_plan_last_error(plan);
  EXPECT_EQ(dfsel_plan_run(plan, &p.in, &p.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  dfsel_plan_destroy(plan);

  Problem q;
  q.desc.e_next.nb[1] = q.desc.e_prev.nb[1] = (SIZE_MAX / 4) & ~size_t(3);
  EXPECT_EQ(dfsel_plan_create(&q.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("e_prev spans"), std::string::npos) << msg;
}

// Sizes whose products overflow: n_embd near 2^62 made the row size of W_h wrap to a few bytes,
// and max_blocks * (block_size - 1) drafted rows overflowed the 32-bit count of the exchange
// layout. Both are refused before anything is sized from them.
TEST(FuzzRegression, SizesThatOverflowAreRefused) {
  char msg[256] = "";
  size_t bytes = 0;
  dfsel_plan* plan = nullptr;
  Problem p;
  p.desc.config.n_embd = int64_t(1) << 62;
  p.desc.w_h.ne[0] = p.desc.config.n_embd;
  p.desc.w_h.nb[1] = 0;
  EXPECT_EQ(dfsel_workspace_size(&p.desc, &bytes, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("config.n_embd"), std::string::npos) << msg;

  Problem q;
  q.desc.config.block_size = 16;
  q.desc.config.max_blocks = INT32_MAX;
  EXPECT_EQ(dfsel_workspace_size(&q.desc, &bytes, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("config.max_blocks"), std::string::npos) << msg;
  EXPECT_EQ(dfsel_plan_create(&q.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  q.desc.config.max_blocks = INT32_MAX / 15;  // the most that fits
  EXPECT_EQ(dfsel_workspace_size(&q.desc, &bytes, msg, sizeof msg), DFSEL_SUCCESS) << msg;
}

// Q8_0 rows at an odd stride put each block's f16 scale at an odd address: a misaligned load on
// the host and a misaligned-address fault in a kernel. The stride of Q8_0 rows must be even, as
// the data pointer already had to be.
TEST(FuzzRegression, Q8RowsMustStayAligned) {
  Problem p;
  p.R = 32;
  const size_t row = 34, stride = 35;  // one Q8_0 block per row, one byte of padding
  std::vector<uint8_t> cb(size_t(p.V) * stride + 2, 0);
  for (int64_t v = 0; v < p.V; ++v) cb[size_t(v) * stride + 1] = 0x3c;  // d = 1.0 (f16 0x3c00)
  std::vector<float> w_h(size_t(p.E) * 32, 0.03f);
  for (dfsel_tensor* t : {&p.desc.e_prev, &p.desc.e_next}) {
    t->data = cb.data();
    t->type = DFSEL_TYPE_Q8_0;
    t->ne[0] = 32;
    t->nb[0] = row;
    t->nb[1] = stride;
  }
  p.desc.config.codebook_rank = 32;
  p.desc.w_h = f32(w_h.data(), p.E, 32);
  char msg[256] = "";
  dfsel_plan* plan = nullptr;
  EXPECT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
  EXPECT_NE(std::string(msg).find("e_prev.nb[1] = 35"), std::string::npos) << msg;
  for (dfsel_tensor* t : {&p.desc.e_prev, &p.desc.e_next}) t->nb[1] = 36;
  ASSERT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  EXPECT_EQ(dfsel_plan_run(plan, &p.in, &p.out, nullptr), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  dfsel_plan_destroy(plan);
}

// A C caller may store any int in the enums of a description, but C++ may not load an enum
// outside its enumerators' range; under UBSan the checks of backend, placement and tensor types
// were themselves the fault. They now read the stored int.
TEST(FuzzRegression, EnumsOutsideTheirRangeAreRefused) {
  char msg[256] = "";
  dfsel_plan* plan = nullptr;
  const int bad = -1;
  Problem p;
  std::memcpy(&p.desc.backend, &bad, sizeof bad);
  EXPECT_EQ(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("backend = -1"), std::string::npos) << msg;

  Problem q;
  std::memcpy(&q.desc.placement, &bad, sizeof bad);
  EXPECT_EQ(dfsel_plan_create(&q.desc, &plan, msg, sizeof msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(msg).find("placement = -1"), std::string::npos) << msg;

  Problem r;
  std::memcpy(&r.desc.w_h.type, &bad, sizeof bad);
  EXPECT_EQ(dfsel_plan_create(&r.desc, &plan, msg, sizeof msg), DFSEL_UNSUPPORTED);
  EXPECT_NE(std::string(msg).find("w_h.type = -1 (not a dfsel_type)"), std::string::npos) << msg;

  Problem t;
  ASSERT_EQ(dfsel_plan_create(&t.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  dfsel_inputs in = t.in;
  const int big = 1 << 20;
  std::memcpy(&in.logits.type, &big, sizeof big);
  EXPECT_EQ(dfsel_plan_run(plan, &in, &t.out, nullptr), DFSEL_UNSUPPORTED);
  EXPECT_NE(std::string(dfsel_plan_last_error(plan)).find("inputs.logits.type = 1048576"), std::string::npos)
      << dfsel_plan_last_error(plan);
  dfsel_plan_destroy(plan);
}

#if !defined(DFSEL_WITH_NCCL)  // a stand-in communicator: only a build without NCCL never reads it
// fuzz_api, after plan creation became one template for both plan kinds: a rank of a
// communicator is summarized for the set-up exchange even when its own checks failed, and the
// summary loaded an out-of-range placement as the enum. Summaries now read the stored int.
TEST(FuzzRegression, ASummaryOfABadDescriptionReadsItsEnumsAsInts) {
  char msg[256] = "";
  dfsel_plan* plan = nullptr;
  const int bad = 7;
  Problem p;
  p.desc.backend = DFSEL_BACKEND_AUTO;
  p.desc.nccl_comm = &p;
  std::memcpy(&p.desc.placement, &bad, sizeof bad);
  std::memcpy(&p.desc.e_prev.type, &bad, sizeof bad);
  EXPECT_NE(dfsel_plan_create(&p.desc, &plan, msg, sizeof msg), DFSEL_SUCCESS);
  EXPECT_EQ(plan, nullptr);
}
#endif

}  // namespace
