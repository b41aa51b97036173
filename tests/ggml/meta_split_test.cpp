// What ggml's meta backend (llama.cpp's split-mode tensor) lets an engine do with dfsel, seen
// on a meta device over two of ggml's CPU devices, the output projection split along the
// vocabulary as llama.cpp splits output.weight (docs/ggml.md, "Under split-mode tensor"):
// - each device's part of a graph runs in turn, on the thread that computes the graph, so a
//   per-device node that waited on the other devices inside a collective would never return;
// - a node that reads the vocabulary-split logits (GGML_OP_CUSTOM, or ggml's own top_k) is
//   refused by the meta backend's split rules, with an abort;
// - ggml does not export the per-device tensors, and hands a backend's communicators out only
//   as an opaque context.
#include <gtest/gtest.h>

#include <dlfcn.h>
#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <thread>
#include <type_traits>
#include <vector>

#include "ggml_support.h"

// The communicator procs a backend may offer the meta backend give an opaque context: no
// ncclComm_t of ggml-cuda's can be had through them.
static_assert(std::is_same_v<ggml_backend_comm_init_t, void* (*)(ggml_backend_t*, size_t)>,
              "ggml's comm context is no longer an opaque void*: revisit docs/ggml.md");

namespace dfsel::test {
namespace {

constexpr int64_t kVocab = 96, kEmbd = 8, kTokens = 4;
constexpr int64_t kRows0 = 40;  // device 0's rows of the output projection; device 1 has the rest

// The engine's split: output.weight's rows on each device, as llama.cpp splits it (split_output_weight).
constexpr int64_t kRows[2] = {kRows0, kVocab - kRows0};

using BackendPtr = std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)>;
using GallocPtr = std::unique_ptr<ggml_gallocr, void (*)(ggml_gallocr_t)>;

// The draft's last step on a meta device over two CPU devices: hidden {n_embd, T} (mirrored)
// times output.weight gives the logits {V, T}, split along the vocabulary. make_node adds the
// node under test to the graph (or nothing).
struct MetaDraft {
  BackendPtr backend{nullptr, ggml_backend_free};
  GgmlContext wctx{4 * ggml_tensor_overhead(), /*no_alloc=*/true};
  BufferPtr wbuf{nullptr, ggml_backend_buffer_free};
  GgmlContext gctx{64 * ggml_tensor_overhead() + ggml_graph_overhead(), /*no_alloc=*/true};
  GallocPtr galloc{nullptr, ggml_gallocr_free};
  ggml_tensor* w = nullptr;
  ggml_tensor* hidden = nullptr;
  ggml_tensor* logits = nullptr;
  ggml_tensor* node = nullptr;
  ggml_cgraph* graph = nullptr;
  std::vector<float> wf, hf;

  // Builds, allocates and fills everything; false (with a gtest failure) when ggml refused.
  bool build(const std::function<ggml_tensor*(ggml_context*, ggml_tensor* hidden, ggml_tensor* logits)>& make_node) {
    ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
    EXPECT_NE(nullptr, cpu);
    if (!cpu) return false;
    ggml_backend_dev_t devs[2] = {cpu, cpu};
    ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 2, split_output_weight, const_cast<int64_t*>(kRows));
    backend.reset(ggml_backend_dev_init(meta, nullptr));
    EXPECT_NE(nullptr, backend);
    if (!backend) return false;
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(meta);

    w = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, kEmbd, kVocab);
    ggml_set_name(w, "output.weight");
    wbuf.reset(ggml_backend_alloc_ctx_tensors_from_buft(wctx.get(), buft));
    EXPECT_NE(nullptr, wbuf);
    if (!wbuf) return false;
    std::mt19937_64 rng(7);
    wf = uniform(rng, size_t(kEmbd * kVocab), 1.0f);
    ggml_backend_tensor_set(w, wf.data(), 0, ggml_nbytes(w));

    hidden = ggml_new_tensor_2d(gctx.get(), GGML_TYPE_F32, kEmbd, kTokens);
    ggml_set_name(hidden, "result_norm");
    ggml_set_input(hidden);
    logits = ggml_mul_mat(gctx.get(), w, hidden);
    ggml_set_name(logits, "result_output");
    ggml_set_output(logits);
    graph = ggml_new_graph(gctx.get());
    ggml_build_forward_expand(graph, logits);
    node = make_node(gctx.get(), hidden, logits);
    if (node) ggml_build_forward_expand(graph, node);

    galloc.reset(ggml_gallocr_new(buft));
    const bool placed = ggml_gallocr_alloc_graph(galloc.get(), graph);
    EXPECT_TRUE(placed);
    if (!placed) return false;
    hf = uniform(rng, size_t(kEmbd * kTokens), 1.0f);
    ggml_backend_tensor_set(hidden, hf.data(), 0, ggml_nbytes(hidden));
    return true;
  }
};

// What a custom node saw of one call: which device's tensor, on which thread, and when.
struct Call {
  const ggml_tensor* dst;
  std::thread::id thread;
  int ith;
  int enter, leave;
};

struct CallLog {
  std::mutex mu;
  std::atomic<int> clock{0};
  std::vector<Call> calls;
};

// A node that copies its source and logs the call.
void logged_copy(ggml_tensor* dst, int ith, int nth, void* userdata) {
  auto* log = static_cast<CallLog*>(userdata);
  const int enter = log->clock.fetch_add(1);
  if (ith == 0) std::memcpy(dst->data, dst->src[0]->data, ggml_nbytes(dst));
  (void)nth;
  const int leave = log->clock.fetch_add(1);
  std::lock_guard<std::mutex> lock(log->mu);
  log->calls.push_back({dst, std::this_thread::get_id(), ith, enter, leave});
}

TEST(GgmlMetaSplit, TheOutputProjectionSplitAlongTheVocabularyGivesTheWholeLogits) {
  MetaDraft d;
  ASSERT_TRUE(d.build([](ggml_context*, ggml_tensor*, ggml_tensor*) { return nullptr; }));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(d.backend.get(), d.graph));
  std::vector<float> z(size_t(kVocab * kTokens));
  ggml_backend_tensor_get(d.logits, z.data(), 0, ggml_nbytes(d.logits));  // gathers the slices
  for (int64_t t = 0; t < kTokens; ++t) {
    for (int64_t v = 0; v < kVocab; ++v) {
      double ref = 0;
      for (int64_t e = 0; e < kEmbd; ++e) ref += double(d.wf[size_t(v * kEmbd + e)]) * d.hf[size_t(t * kEmbd + e)];
      ASSERT_NEAR(ref, z[size_t(t * kVocab + v)], 1e-4) << "token " << t << ", vocabulary row " << v;
    }
  }
}

// A node over a mirrored tensor is accepted and runs once per device, each device's tensor its
// own (not the graph's), every device's part after the previous one returned, and thread 0 of
// each on the thread that called ggml_backend_graph_compute.
TEST(GgmlMetaSplit, EachDevicesPartRunsInTurnOnTheComputingThread) {
  CallLog log;
  MetaDraft d;
  ASSERT_TRUE(d.build([&log](ggml_context* ctx, ggml_tensor* hidden, ggml_tensor*) {
    ggml_tensor* args[1] = {hidden};
    return ggml_custom_4d(ctx, GGML_TYPE_F32, kEmbd, kTokens, 1, 1, args, 1, logged_copy, GGML_N_TASKS_MAX, &log);
  }));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(d.backend.get(), d.graph));

  std::vector<const ggml_tensor*> devices;  // in the order they ran
  int thread_zero_calls = 0;
  for (const Call& c : log.calls) {
    thread_zero_calls += c.ith == 0;
    EXPECT_NE(d.node, c.dst) << "a device computed the graph's own tensor, not its own copy";
    bool seen = false;
    for (const ggml_tensor* t : devices) seen = seen || t == c.dst;
    if (!seen) devices.push_back(c.dst);
    if (c.ith == 0) EXPECT_EQ(std::this_thread::get_id(), c.thread) << "thread 0 of a device's part";
  }
  ASSERT_EQ(2u, devices.size());
  EXPECT_EQ(2, thread_zero_calls) << "one call of thread 0 per device";
  int last_leave_of_first = -1, first_enter_of_second = 1 << 30;
  for (const Call& c : log.calls) {
    if (c.dst == devices[0]) last_leave_of_first = std::max(last_leave_of_first, c.leave);
    if (c.dst == devices[1]) first_enter_of_second = std::min(first_enter_of_second, c.enter);
  }
  EXPECT_LT(last_leave_of_first, first_enter_of_second) << "the two devices' parts overlapped";

  std::vector<float> out(d.hf.size());
  ggml_backend_tensor_get(d.node, out.data(), 0, ggml_nbytes(d.node));
  EXPECT_EQ(-1, first_bit_diff(d.hf.data(), out.data(), out.size()));
}

// ggml aborts the process on a refusal: the message goes to stderr, without the backtrace that
// ggml would otherwise try to print through a debugger.
void print_abort(const char* message) { std::fprintf(stderr, "%s\n", message); }

void build_refused(const std::function<ggml_tensor*(ggml_context*, ggml_tensor*, ggml_tensor*)>& make_node) {
  ggml_set_abort_callback(print_abort);
  MetaDraft d;
  if (d.build(make_node)) ggml_backend_graph_compute(d.backend.get(), d.graph);
}

// A selector node over the vocabulary-split logits: the meta backend's split rule for custom
// ops (as for most ops) takes split inputs for element-wise work only, and refuses the rest.
TEST(GgmlMetaSplitDeathTest, ANodeOverTheVocabularySplitLogitsIsRefused) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  CallLog log;
  EXPECT_DEATH(build_refused([&log](ggml_context* ctx, ggml_tensor*, ggml_tensor* logits) {
                 ggml_tensor* args[1] = {logits};
                 return ggml_custom_4d(ctx, GGML_TYPE_F32, kVocab, kTokens, 1, 1, args, 1, logged_copy, 1, &log);
               }),
               "GGML_ASSERT\\(ret.axis != GGML_BACKEND_SPLIT_AXIS_UNKNOWN\\) failed");
  // ggml's own row-wise selection is refused the same way: no top-k over the split rows.
  EXPECT_DEATH(build_refused([](ggml_context* ctx, ggml_tensor*, ggml_tensor* logits) {
                 return ggml_top_k(ctx, logits, 16);
               }),
               "GGML_ASSERT\\(src_ss\\[0\\].axis != GGML_BACKEND_SPLIT_AXIS_0\\) failed");
}

// The meta backend's per-device tensors are reached through a static function of ggml: a
// shared ggml exports the meta device and backend accessors, not that one.
TEST(GgmlMetaSplit, ThePerDeviceTensorsAreNotExported) {
  if (!dlsym(RTLD_DEFAULT, "ggml_backend_meta_device")) {
    GTEST_SKIP() << "ggml's symbols are not visible to dlsym (a static ggml)";
  }
  EXPECT_NE(nullptr, dlsym(RTLD_DEFAULT, "ggml_backend_meta_simple_backend"));
  EXPECT_EQ(nullptr, dlsym(RTLD_DEFAULT, "ggml_backend_meta_buffer_simple_tensor"));
  EXPECT_EQ(nullptr, dlsym(RTLD_DEFAULT, "ggml_backend_meta_get_split_state"));
}

}  // namespace
}  // namespace dfsel::test
