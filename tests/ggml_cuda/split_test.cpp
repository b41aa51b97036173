// Two ggml-cuda devices, the lm_head split along the vocabulary (docs/ggml.md, "Under split-mode
// tensor", per-device graphs): device j's ggml-cuda backend computes its slice of the logits
// with its slice of the lm_head, and one dfsel_ggml_run_group over both devices reads each
// slice in place. The plans exchange in process: NCCL cannot put two ranks on one physical GPU,
// which is what GGML_CUDA_DEVICES=2 makes of one H200. Checked: both devices receive the same
// packed rows, bit for bit those of one plan over the whole vocabulary (the slices put side by
// side on one device), and equal to llama.cpp's in-graph selector over a mirrored head (the
// rules of in_graph_test.cpp). Each device's lm_head bytes are reported against the mirrored
// head's. Needs two ggml GPU devices: scripts/ggml-gpu-check.sh runs it with GGML_CUDA_DEVICES=2.
#include <gtest/gtest.h>

#include <cstring>
#include <unistd.h>

#include "dfsel/ggml.h"
#include "ggml/packed_compare.h"
#include "ggml_cuda/cuda_draft.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

// The CUDA ordinal of a ggml device: by its PCI bus id, or the one GPU there is when ggml's
// devices are GGML_CUDA_DEVICES's virtual devices on it.
int cuda_ordinal(ggml_backend_dev_t d) {
  ggml_backend_dev_props p{};
  ggml_backend_dev_get_props(d, &p);
  int ord = -1, n = 0;
  if (p.device_id && cudaDeviceGetByPCIBusId(&ord, p.device_id) == cudaSuccess) return ord;
  cudaGetLastError();
  return cudaGetDeviceCount(&n) == cudaSuccess && n == 1 ? 0 : -1;
}

struct Device {
  ggml_backend_t backend = nullptr;
  DraftWeights w;
  DraftGraph g;
  DfselOutputs o;
  dfsel_plan* plan = nullptr;
  cudaStream_t stream = nullptr;
  ~Device() {
    if (plan) dfsel_plan_destroy(plan);
    if (stream) cudaStreamDestroy(stream);
    if (backend) ggml_backend_free(backend);
  }
};

dfsel_status make_plan(const DraftShape& s, const DraftWeights& w, int ordinal, int rank, int n, int64_t vb,
                       int64_t ve, dfsel_plan** plan, std::string* err) {
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{s.V, s.E, s.R, s.K, s.block, 1.0f, 0.0f, s.blocks};
  desc.shard = dfsel_shard{rank, n, vb, ve};
  desc.backend = DFSEL_BACKEND_CUDA;
  desc.device = ordinal;
  char msg[512] = "";
  dfsel_status st = dfsel_ggml_tensor(w.e_prev, &desc.e_prev, msg, sizeof msg);
  if (st == DFSEL_SUCCESS) st = dfsel_ggml_tensor(w.e_next, &desc.e_next, msg, sizeof msg);
  if (st == DFSEL_SUCCESS) st = dfsel_ggml_tensor(w.w_h, &desc.w_h, msg, sizeof msg);
  if (st == DFSEL_SUCCESS) st = dfsel_plan_create(&desc, plan, msg, sizeof msg);
  *err = msg;
  return st;
}

dfsel_ggml_step step_of(const ggml_tensor* logits, const DraftGraph& g, const DfselOutputs& o) {
  dfsel_ggml_step st{};
  st.logits = logits;
  st.hidden = g.embd;
  st.anchors = o.anchors;
  st.packed = o.packed;
  st.path = o.path;
  st.n_emitted = o.n_emitted;
  return st;
}

TEST(GgmlCudaSplit, PerDeviceSlicesEqualOneDeviceAndTheInGraphSelector) {
  DFSEL_REQUIRE_GPUS(1);
  const std::vector<ggml_backend_dev_t> gpus = ggml_gpu_devices();
  if (gpus.size() < 2) GTEST_SKIP() << "needs two ggml GPU devices (GGML_CUDA_DEVICES=2 on one GPU)";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  DraftShape s;
  s.V = 32003;
  s.E = 1024;
  s.blocks = 4;
  const int64_t split = s.V / 2;  // device 0: [0, split), device 1: [split, V): half the head each

  // Device j: the selector weights (replicated, each loaded from the GGUF) and its graph over
  // its lm_head slice; the values hashed from one seed, so the slices are slices of one head.
  Device dev[2];
  for (int j = 0; j < 2; ++j) {
    dev[j].backend = ggml_backend_dev_init(gpus[(size_t)j], nullptr);
    ASSERT_NE(nullptr, dev[j].backend);
    ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(gpus[(size_t)j]);
    std::mt19937_64 wrng(seed);
    ASSERT_EQ("", dev[j].w.make(s, buft, wrng, "/tmp/dfsel-split-" + std::to_string(getpid()) + "-" + std::to_string(j) + ".gguf"));
    DraftShape sj = s;
    sj.v_begin = j == 0 ? 0 : split;
    sj.v_end = j == 0 ? split : s.V;
    ASSERT_EQ("", dev[j].g.make(sj, dev[j].w, buft, seed, false));
    ASSERT_EQ("", dev[j].o.make(s, dev[j].g.anchors, buft));
    ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(dev[j].backend, dev[j].g.graph));
    const int ord = cuda_ordinal(gpus[(size_t)j]);
    ASSERT_GE(ord, 0);
    std::string err;
    ASSERT_EQ(DFSEL_SUCCESS, make_plan(s, dev[j].w, ord, j, 2, sj.v_begin, sj.slice_end(), &dev[j].plan, &err)) << err;
    CUDA_OK(cudaSetDevice(ord));
    CUDA_OK(cudaStreamCreateWithFlags(&dev[j].stream, cudaStreamNonBlocking));
    dev[j].o.poison();
  }
  std::printf("split: lm_head bytes a device: %zu and %zu with the split head, %zu mirrored (%.3f and %.3f of it)\n",
              ggml_nbytes(dev[0].g.lm_head), ggml_nbytes(dev[1].g.lm_head),
              ggml_row_size(GGML_TYPE_BF16, s.E) * (size_t)s.V,
              (double)ggml_nbytes(dev[0].g.lm_head) / (ggml_row_size(GGML_TYPE_BF16, s.E) * (size_t)s.V),
              (double)ggml_nbytes(dev[1].g.lm_head) / (ggml_row_size(GGML_TYPE_BF16, s.E) * (size_t)s.V));

  // One group call over both devices' slices, in place.
  dfsel_plan* plans[2] = {dev[0].plan, dev[1].plan};
  const dfsel_ggml_step steps[2] = {step_of(dev[0].g.logits, dev[0].g, dev[0].o), step_of(dev[1].g.logits, dev[1].g, dev[1].o)};
  void* streams[2] = {dev[0].stream, dev[1].stream};
  char msg[512] = "";
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_run_group(2, plans, steps, streams, msg, sizeof msg)) << msg;
  for (Device& d : dev) ASSERT_EQ(DFSEL_SUCCESS, dfsel_plan_check(d.plan, d.stream)) << dfsel_plan_last_error(d.plan);
  const std::vector<float> rows0 = get_f32(dev[0].o.packed), rows1 = get_f32(dev[1].o.packed);
  ASSERT_EQ(0, std::memcmp(rows0.data(), rows1.data(), rows0.size() * 4)) << "the devices' packed rows differ";
  EXPECT_EQ(get_i32(dev[0].o.path), get_i32(dev[1].o.path));

  // One device, one plan over the slices side by side: the same bits.
  const int64_t T = s.tokens();
  const std::vector<float> z0 = get_f32(dev[0].g.logits), z1 = get_f32(dev[1].g.logits);
  std::vector<float> whole((size_t)(s.V * T));
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(&whole[(size_t)(t * s.V)], &z0[(size_t)(t * split)], (size_t)split * 4);
    std::memcpy(&whole[(size_t)(t * s.V + split)], &z1[(size_t)(t * (s.V - split))], (size_t)(s.V - split) * 4);
  }
  Device one;
  one.backend = ggml_backend_dev_init(gpus[0], nullptr);
  ggml_backend_buffer_type_t buft0 = ggml_backend_dev_buffer_type(gpus[0]);
  {
    std::mt19937_64 wrng(seed);
    ASSERT_EQ("", one.w.make(s, buft0, wrng, "/tmp/dfsel-split-" + std::to_string(getpid()) + "-one.gguf"));
  }
  ASSERT_EQ("", one.g.make(s, one.w, buft0, seed, /*with_peer=*/true));  // the mirrored head, with the peer
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(one.backend, one.g.graph));
  ASSERT_EQ("", one.o.make(s, one.g.anchors, buft0));
  ggml_init_params p{2 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* side = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, s.V, T);
  ggml_set_name(side, "slices_side_by_side");
  ggml_backend_buffer_t sbuf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, buft0);
  ASSERT_NE(nullptr, sbuf);
  ggml_backend_tensor_set(side, whole.data(), 0, ggml_nbytes(side));
  std::string err;
  ASSERT_EQ(DFSEL_SUCCESS, make_plan(s, one.w, cuda_ordinal(gpus[0]), 0, 1, 0, s.V, &one.plan, &err)) << err;
  CUDA_OK(cudaStreamCreateWithFlags(&one.stream, cudaStreamNonBlocking));
  one.o.poison();
  const dfsel_ggml_step st = step_of(side, one.g, one.o);
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_run(one.plan, &st, one.stream, msg, sizeof msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_plan_check(one.plan, one.stream)) << dfsel_plan_last_error(one.plan);
  const std::vector<float> single = get_f32(one.o.packed);
  ASSERT_EQ(0, std::memcmp(rows0.data(), single.data(), single.size() * 4)) << "the split differs from one device";

  // Against the in-graph selector over the mirrored head: its logits are the whole product
  // computed at once, which may round apart from the slices' products.
  const std::vector<float> mirrored = get_f32(one.g.logits), peer = get_f32(one.g.peer);
  long differ = 0;
  for (size_t i = 0; i < whole.size(); ++i) differ += whole[i] != mirrored[i];
  const PackedLayout lay{s.E, s.K, s.block, s.blocks};
  PackedStats stats;
  // The peer's own rounding (tensor-core products): the rule of in_graph_test.cpp.
  ASSERT_EQ("", compare_packed(lay, peer.data(), rows0.data(), mirrored, s.V, peer_tolerance, &stats));
  ASSERT_EQ("", compare_walks(lay, peer.data(), rows0.data(), kPeerRelative * stats.largest_row, &stats));
  std::printf("split: rows bitwise one device's; %ld logits of %zu differ between the slices and the mirrored product; "
              "against the in-graph selector %ld of %ld scores matched, worst %.2e of the row, %ld near-ties\n",
              differ, whole.size(), stats.compared, stats.scores, stats.worst_rel, stats.near_ties);
  ggml_backend_buffer_free(sbuf);
  ggml_free(ctx);
}

}  // namespace
}  // namespace dfsel::test
