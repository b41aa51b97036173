// dfsel under ggml's meta backend itself (split-mode tensor), with ggml patched to export a meta
// tensor's per-device tensor (integrations/ggml/: ggml_backend_meta_simple_tensor). The draft's
// last graph runs on a meta device over two simple devices, output.weight split along the
// vocabulary and the selector weights mirrored, as llama.cpp loads them; then one
// dfsel_ggml_run_group reads each device's slice of the logits, its copy of t_embd and of the
// weights in place, with no gather. Checked: every device receives the same packed rows, bitwise
// one plan's over the gathered logits, and equal to llama.cpp's in-graph selector over a
// mirrored head (packed_compare.h's rules); each device holds half of the lm_head.
// The simple devices: two of ggml's CPU devices (CPU plans), and, in a CUDA build with two ggml
// GPU devices (GGML_CUDA_DEVICES=2 on one GPU), two ggml-cuda devices (CUDA plans, exchanging in
// process: NCCL cannot put two ranks on one GPU).
#include <gtest/gtest.h>

#include <ggml-alloc.h>
#include <ggml-backend.h>

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#if defined(DFSEL_META_TEST_CUDA)
#include <cuda_runtime.h>
#endif

#include "dfsel/ggml.h"
#include "ggml/ggml_support.h"
#include "ggml/llama_selector.h"
#include "ggml/packed_compare.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr int kR = 256, kK = 16, kB = 16, kBlocks = 3;
constexpr int64_t kV = 20011, kE = 512, kT = (int64_t)kB * kBlocks, kSplit = kV / 2;

constexpr int64_t kRows[2] = {kSplit, kV - kSplit};  // output.weight's rows a device

using ContextPtr = std::unique_ptr<ggml_context, void (*)(ggml_context*)>;
using BufferPtr = std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)>;
using BackendPtr = std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)>;

ContextPtr no_alloc_context(size_t n_tensors, bool graph = false) {
  ggml_init_params p{n_tensors * ggml_tensor_overhead() + (graph ? ggml_graph_overhead_custom(8192, false) : 0), nullptr,
                     true};
  return ContextPtr(ggml_init(p), ggml_free);
}

ggml_tensor* named(ggml_tensor* t, const char* name) {
  ggml_set_name(t, name);
  return t;
}

// The draft's weights and inputs, drawn once, set into whatever buffers hold them.
struct Values {
  std::vector<float> lm_head, e_prev, e_next, w_h, x;
  std::vector<int32_t> tokens, anchors;
  explicit Values(uint64_t seed) {
    std::mt19937_64 rng(seed);
    lm_head = uniform(rng, (size_t)(kE * kV), 0.17f);
    e_prev = uniform(rng, (size_t)(kR * kV), 0.2f);
    e_next = uniform(rng, (size_t)(kR * kV), 0.2f);
    w_h = uniform(rng, (size_t)(kE * kR), 0.05f);
    x = uniform(rng, (size_t)(kE * kT), 1.0f);
    for (int64_t t = 0; t < kT; ++t) tokens.push_back((int32_t)(rng() % kV));
    for (int b = 0; b < kBlocks; ++b) anchors.push_back(tokens[(size_t)b * kB]);
  }
};

// The weights (F32 lm_head and selector) in a context allocated on buft, and the draft's last
// graph over them: t_embd = rms_norm(x), t_logits = 0.5 * lm_head . t_embd, and, when asked,
// llama.cpp's in-graph selector.
struct Draft {
  ContextPtr wctx = no_alloc_context(8);
  BufferPtr wbuf{nullptr, ggml_backend_buffer_free};
  ContextPtr gctx = no_alloc_context(4096, true);
  std::unique_ptr<ggml_gallocr, void (*)(ggml_gallocr_t)> galloc{nullptr, ggml_gallocr_free};
  ggml_tensor *lm_head, *e_prev, *e_next, *w_h, *x, *tokens, *embd, *logits, *peer = nullptr;
  ggml_cgraph* graph = nullptr;

  std::string make(ggml_backend_buffer_type_t buft, const Values& v, bool with_peer) {
    lm_head = named(ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, kE, kV), "output.weight");
    e_prev = named(ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, kR, kV), "selector_predecessor.weight");
    e_next = named(ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, kR, kV), "selector_successor.weight");
    w_h = named(ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F32, kE, kR), "selector_hidden.weight");
    wbuf.reset(ggml_backend_alloc_ctx_tensors_from_buft(wctx.get(), buft));
    if (!wbuf) return "allocating the weights";
    ggml_backend_tensor_set(lm_head, v.lm_head.data(), 0, ggml_nbytes(lm_head));
    ggml_backend_tensor_set(e_prev, v.e_prev.data(), 0, ggml_nbytes(e_prev));
    ggml_backend_tensor_set(e_next, v.e_next.data(), 0, ggml_nbytes(e_next));
    ggml_backend_tensor_set(w_h, v.w_h.data(), 0, ggml_nbytes(w_h));
    ggml_context* g = gctx.get();
    x = named(ggml_new_tensor_2d(g, GGML_TYPE_F32, kE, kT), "x");
    ggml_set_input(x);
    tokens = named(ggml_new_tensor_1d(g, GGML_TYPE_I32, kT), "inp_tokens");
    ggml_set_input(tokens);
    embd = named(ggml_rms_norm(g, x, 1e-6f), "result_norm");
    logits = named(ggml_scale(g, ggml_mul_mat(g, lm_head, embd), 0.5f), "result_output");
    ggml_set_output(embd);
    ggml_set_output(logits);
    graph = ggml_new_graph_custom(g, 8192, false);
    ggml_build_forward_expand(graph, logits);
    if (with_peer) {
      peer = build_llama_selector(g, LlamaSelectorInputs{logits, embd, tokens, e_prev, e_next, w_h}, kK, kB, kBlocks);
      ggml_set_output(peer);
      ggml_build_forward_expand(graph, peer);
    }
    galloc.reset(ggml_gallocr_new(buft));
    if (!ggml_gallocr_alloc_graph(galloc.get(), graph)) return "allocating the graph";
    ggml_backend_tensor_set(x, v.x.data(), 0, ggml_nbytes(x));
    if (with_peer) ggml_backend_tensor_set(tokens, v.tokens.data(), 0, ggml_nbytes(tokens));  // in no graph else
    return "";
  }
};

// dfsel's tensors on one simple device: the anchors it reads and what it writes.
struct Outputs {
  ContextPtr ctx = no_alloc_context(8);
  BufferPtr buf{nullptr, ggml_backend_buffer_free};
  ggml_tensor *anchors, *packed, *path, *n_emitted;
  std::string make(ggml_backend_buffer_type_t buft, const std::vector<int32_t>& a) {
    anchors = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, kBlocks);
    packed = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_F32, kE, kT);
    path = ggml_new_tensor_2d(ctx.get(), GGML_TYPE_I32, kB - 1, kBlocks);
    n_emitted = ggml_new_tensor_1d(ctx.get(), GGML_TYPE_I32, kBlocks);
    buf.reset(ggml_backend_alloc_ctx_tensors_from_buft(ctx.get(), buft));
    if (!buf) return "allocating dfsel's outputs";
    ggml_backend_tensor_set(anchors, a.data(), 0, ggml_nbytes(anchors));
    for (ggml_tensor* t : {packed, path, n_emitted}) ggml_backend_tensor_memset(t, 0xff, 0, ggml_nbytes(t));
    return "";
  }
  dfsel_ggml_step step(const ggml_tensor* logits, const ggml_tensor* hidden) const {
    dfsel_ggml_step s{};
    s.logits = logits;
    s.hidden = hidden;
    s.anchors = anchors;
    s.packed = packed;
    s.path = path;
    s.n_emitted = n_emitted;
    return s;
  }
  std::vector<float> rows() const {
    std::vector<float> v((size_t)(kE * kT));
    ggml_backend_tensor_get(packed, v.data(), 0, ggml_nbytes(packed));
    return v;
  }
};

// A plan of shard {rank, n, vb, ve} on the weights of one simple device.
dfsel_status make_plan(const Draft& d, ggml_backend_dev_t dev, int rank, int n, int64_t vb, int64_t ve, size_t index,
                       bool meta, int device, dfsel_plan** plan, std::string* err) {
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{kV, kE, kR, kK, kB, 1.0f, 0.0f, kBlocks};
  desc.shard = dfsel_shard{rank, n, vb, ve};
  desc.backend = ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU ? DFSEL_BACKEND_CUDA : DFSEL_BACKEND_CPU;
  desc.device = device;
  desc.n_threads = 1;
  auto part = [&](ggml_tensor* t) { return meta ? ggml_backend_meta_simple_tensor(t, index) : t; };
  char msg[512] = "";
  dfsel_status s = dfsel_ggml_tensor(part(d.e_prev), &desc.e_prev, msg, sizeof msg);
  if (s == DFSEL_SUCCESS) s = dfsel_ggml_tensor(part(d.e_next), &desc.e_next, msg, sizeof msg);
  if (s == DFSEL_SUCCESS) s = dfsel_ggml_tensor(part(d.w_h), &desc.w_h, msg, sizeof msg);
  if (s == DFSEL_SUCCESS) s = dfsel_plan_create(&desc, plan, msg, sizeof msg);
  *err = msg;
  return s;
}

// The CUDA ordinal behind a ggml GPU device: by PCI bus id, or the one GPU there is.
int device_ordinal(ggml_backend_dev_t dev) {
#if defined(DFSEL_META_TEST_CUDA)
  if (ggml_backend_dev_type(dev) != GGML_BACKEND_DEVICE_TYPE_GPU) return 0;
  ggml_backend_dev_props p{};
  ggml_backend_dev_get_props(dev, &p);
  int ord = -1, n = 0;
  if (p.device_id && cudaDeviceGetByPCIBusId(&ord, p.device_id) == cudaSuccess) return ord;
  cudaGetLastError();
  return cudaGetDeviceCount(&n) == cudaSuccess && n == 1 ? 0 : -1;
#else
  (void)dev;
  return 0;
#endif
}

void* new_stream(ggml_backend_dev_t dev, int ordinal) {
#if defined(DFSEL_META_TEST_CUDA)
  if (ggml_backend_dev_type(dev) == GGML_BACKEND_DEVICE_TYPE_GPU) {
    cudaStream_t s = nullptr;
    cudaSetDevice(ordinal);
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    return s;
  }
#endif
  (void)dev;
  (void)ordinal;
  return nullptr;
}

void free_stream(void* s) {
#if defined(DFSEL_META_TEST_CUDA)
  if (s) cudaStreamDestroy(static_cast<cudaStream_t>(s));
#endif
  (void)s;
}

void meta_route(ggml_backend_dev_t d0, ggml_backend_dev_t d1) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Values v(seed);
  // docs/ggml.md: meta-route
  ggml_backend_dev_t devs[2] = {d0, d1};
  ggml_backend_dev_t meta = ggml_backend_meta_device(devs, 2, split_output_weight, const_cast<int64_t*>(kRows));
  BackendPtr backend(ggml_backend_dev_init(meta, nullptr), ggml_backend_free);
  ASSERT_NE(nullptr, backend);
  Draft d;
  ASSERT_EQ("", d.make(ggml_backend_dev_buffer_type(meta), v, false));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(backend.get(), d.graph));

  // Each device's parts, in place: its slice of the logits and its copies of the rest.
  dfsel_plan* plans[2] = {nullptr, nullptr};
  void* streams[2] = {nullptr, nullptr};
  Outputs out[2];
  dfsel_ggml_step steps[2];
  int64_t vb = 0;
  size_t head_bytes[2] = {0, 0};
  for (int j = 0; j < 2; ++j) {
    ggml_tensor* logits = ggml_backend_meta_simple_tensor(d.logits, (size_t)j);
    ggml_tensor* embd = ggml_backend_meta_simple_tensor(d.embd, (size_t)j);
    ggml_tensor* head = ggml_backend_meta_simple_tensor(d.lm_head, (size_t)j);
    ASSERT_NE(nullptr, logits);
    ASSERT_NE(nullptr, embd);
    ASSERT_NE(nullptr, head);
    ASSERT_EQ(kT, logits->ne[1]);
    ASSERT_EQ(kE, embd->ne[0]);
    head_bytes[j] = ggml_nbytes(head);
    const int ord = device_ordinal(devs[j]);
    ASSERT_GE(ord, 0);
    std::string err;
    ASSERT_EQ(DFSEL_SUCCESS, make_plan(d, devs[j], j, 2, vb, vb + logits->ne[0], (size_t)j, true, ord, &plans[j], &err))
        << err;
    vb += logits->ne[0];
    streams[j] = new_stream(devs[j], ord);
    ASSERT_EQ("", out[j].make(ggml_backend_dev_buffer_type(devs[j]), v.anchors));
    steps[j] = out[j].step(logits, embd);
  }
  ASSERT_EQ(kV, vb) << "the slices do not tile the vocabulary";
  char msg[1024] = "";
  const dfsel_status ran = dfsel_ggml_run_group(2, plans, steps, streams, msg, sizeof msg);
  for (int j = 0; j < 2 && ran == DFSEL_SUCCESS; ++j)
    EXPECT_EQ(DFSEL_SUCCESS, dfsel_plan_check(plans[j], streams[j])) << dfsel_plan_last_error(plans[j]);
  // end docs/ggml.md: meta-route
  const std::vector<float> rows0 = out[0].rows(), rows1 = out[1].rows();
  for (int j = 0; j < 2; ++j) {
    dfsel_plan_destroy(plans[j]);
    free_stream(streams[j]);
  }
  ASSERT_EQ(DFSEL_SUCCESS, ran) << msg;
  ASSERT_EQ(0, std::memcmp(rows0.data(), rows1.data(), rows0.size() * 4)) << "the devices' rows differ";
  const size_t mirrored = (size_t)kE * kV * 4;
  std::printf("meta route (%s): lm_head bytes a device %zu and %zu of %zu mirrored\n", ggml_backend_dev_name(d0),
              head_bytes[0], head_bytes[1], mirrored);
  EXPECT_LE(head_bytes[0], mirrored / 2 + kE * 4);
  EXPECT_LE(head_bytes[1], mirrored / 2 + kE * 4);

  // The same draft on device 0 alone, the head mirrored, with llama.cpp's in-graph selector.
  BackendPtr one(ggml_backend_dev_init(d0, nullptr), ggml_backend_free);
  Draft m;
  ASSERT_EQ("", m.make(ggml_backend_dev_buffer_type(d0), v, true));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(one.get(), m.graph));
  std::vector<float> gathered((size_t)(kV * kT)), peer((size_t)(kE * kT));
  ggml_backend_tensor_get(d.logits, gathered.data(), 0, gathered.size() * 4);  // the check's gather, not dfsel's
  ggml_backend_tensor_get(m.peer, peer.data(), 0, peer.size() * 4);

  // One plan over the gathered logits: the group's rows bit for bit.
  ContextPtr lctx = no_alloc_context(2);
  ggml_tensor* whole = named(ggml_new_tensor_2d(lctx.get(), GGML_TYPE_F32, kV, kT), "gathered_logits");
  BufferPtr lbuf(ggml_backend_alloc_ctx_tensors_from_buft(lctx.get(), ggml_backend_dev_buffer_type(d0)),
                 ggml_backend_buffer_free);
  ASSERT_NE(nullptr, lbuf);
  ggml_backend_tensor_set(whole, gathered.data(), 0, ggml_nbytes(whole));
  dfsel_plan* single = nullptr;
  std::string err;
  const int ord0 = device_ordinal(d0);
  ASSERT_EQ(DFSEL_SUCCESS, make_plan(m, d0, 0, 1, 0, kV, 0, false, ord0, &single, &err)) << err;
  Outputs o1;
  ASSERT_EQ("", o1.make(ggml_backend_dev_buffer_type(d0), v.anchors));
  void* s1 = new_stream(d0, ord0);
  const dfsel_ggml_step st = o1.step(whole, m.embd);
  const dfsel_status r1 = dfsel_ggml_run(single, &st, s1, msg, sizeof msg);
  const dfsel_status c1 = r1 == DFSEL_SUCCESS ? dfsel_plan_check(single, s1) : r1;
  dfsel_plan_destroy(single);
  free_stream(s1);
  ASSERT_EQ(DFSEL_SUCCESS, r1) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, c1);
  const std::vector<float> rows_one = o1.rows();
  EXPECT_EQ(0, std::memcmp(rows0.data(), rows_one.data(), rows0.size() * 4)) << "the split differs from one plan";

  // Against the in-graph selector over the mirrored head (its logits, computed whole).
  std::vector<float> mirrored_logits((size_t)(kV * kT));
  ggml_backend_tensor_get(m.logits, mirrored_logits.data(), 0, mirrored_logits.size() * 4);
  const PackedLayout lay{kE, kK, kB, kBlocks};
  PackedStats stats;
  EXPECT_EQ("", compare_packed(lay, peer.data(), rows0.data(), mirrored_logits, kV, peer_tolerance, &stats));
  EXPECT_EQ("", compare_walks(lay, peer.data(), rows0.data(), kPeerRelative * stats.largest_row, &stats));
  std::printf("meta route (%s): %ld of %ld scores matched the in-graph selector, worst %.2e of the row, %ld near-ties\n",
              ggml_backend_dev_name(d0), stats.compared, stats.scores, stats.worst_rel, stats.near_ties);
}

TEST(GgmlMetaRoute, TwoCpuDevicesReadInPlace) {
  ggml_backend_dev_t cpu = ggml_backend_dev_by_type(GGML_BACKEND_DEVICE_TYPE_CPU);
  ASSERT_NE(nullptr, cpu);
  meta_route(cpu, cpu);
}

#if defined(DFSEL_META_TEST_CUDA)
TEST(GgmlMetaRoute, TwoCudaDevicesReadInPlace) {
  std::vector<ggml_backend_dev_t> gpus;
  for (size_t i = 0; i < ggml_backend_dev_count(); ++i)
    if (ggml_backend_dev_type(ggml_backend_dev_get(i)) == GGML_BACKEND_DEVICE_TYPE_GPU) gpus.push_back(ggml_backend_dev_get(i));
  if (gpus.size() < 2) GTEST_SKIP() << "needs two ggml GPU devices (GGML_CUDA_DEVICES=2 on one GPU)";
  meta_route(gpus[0], gpus[1]);
}
#endif

}  // namespace
}  // namespace dfsel::test
