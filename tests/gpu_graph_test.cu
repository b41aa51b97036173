// A whole selector step captured in a CUDA graph and replayed with new inputs written into
// the same buffers: the plan allocates nothing and synchronises nothing in a run.
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "kernels/common/numeric.cuh"
#include "support/compare.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

TEST(GpuGraph, CaptureOnceReplayWithNewInputs) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Case c = model_case(124160, 512, 2);
  Data d = make_data(c, rng());
  const size_t cb_row = row_bytes(c.cb_t, c.R), nd = (size_t)c.blocks * (c.block - 1), n_tokens = (size_t)c.blocks * c.block;
  DeviceBuffer<uint8_t> e_prev(d.e_prev.size()), e_next(d.e_next.size()), w_h(d.w_h.size()), logits(d.logits.size()),
      hidden(d.hidden.size());
  DeviceBuffer<int32_t> anchors(c.blocks), path(nd), n_emitted(c.blocks), cand_ids(nd * c.K);
  DeviceBuffer<float> scores(nd * c.K * c.K);
  e_prev.upload(d.e_prev);
  e_next.upload(d.e_next);
  w_h.upload(d.w_h);
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{c.V, c.E, c.R, c.K, c.block, 1.0f, 0.0f, c.blocks};
  desc.shard = dfsel_shard{0, 1, 0, c.V};
  desc.backend = DFSEL_BACKEND_CUDA;
  desc.e_prev = make_matrix(e_prev.get(), c.cb_t, c.R, c.V, cb_row);
  desc.e_next = make_matrix(e_next.get(), c.cb_t, c.R, c.V, cb_row);
  desc.w_h = make_matrix(w_h.get(), c.wh_t, c.E, c.R, row_bytes(c.wh_t, c.E));
  dfsel_plan* plan = nullptr;
  char msg[256];
  ASSERT_EQ(dfsel_plan_create(&desc, &plan, msg, sizeof msg), DFSEL_SUCCESS) << msg;
  dfsel_inputs in{};
  in.logits = make_matrix(logits.get(), c.logits_t, c.V, n_tokens, d.logits_nb1);
  in.hidden = make_matrix(hidden.get(), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
  in.anchors = anchors.get();
  in.n_blocks = c.blocks;
  dfsel_outputs out{};
  out.path = path.get();
  out.n_emitted = n_emitted.get();
  out.cand_ids = cand_ids.get();
  out.scores = scores.get();

  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const dfsel_status s = dfsel_plan_run(plan, &in, &out, st);
  CUDA_OK(cudaStreamEndCapture(st, &graph));
  ASSERT_EQ(s, DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
  cudaGraphExec_t exec;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));

  for (int replay = 0; replay < 3; ++replay) {
    d = make_data(c, rng());  // new logits, hidden states and anchors; the weights stay
    // Keep the uploaded weights: regenerate them into d from the first upload's bytes.
    d.e_prev = e_prev.download();
    d.e_next = e_next.download();
    d.w_h = w_h.download();
    logits.upload(d.logits);
    hidden.upload(d.hidden);
    anchors.upload(d.anchors);
    path.poison();
    n_emitted.poison();
    cand_ids.poison();
    scores.poison();
    CUDA_OK(cudaGraphLaunch(exec, st));
    CUDA_OK(cudaStreamSynchronize(st));
    ASSERT_EQ(dfsel_plan_check(plan, st), DFSEL_SUCCESS) << dfsel_plan_last_error(plan);
    Result gpu;
    gpu.cand_ids = cand_ids.download();
    gpu.scores = scores.download();
    gpu.path = path.download();
    gpu.n_emitted = n_emitted.download();
    gpu.unary.assign(nd * c.K, 0.0f);
    const Result cpu = run_case(c, d, RunOpts{});
    ASSERT_EQ(cpu.status, DFSEL_SUCCESS) << cpu.error;
    for (size_t i = 0; i < nd * c.K; ++i) gpu.unary[i] = cpu.unary[i];  // unary is not an output here
    EXPECT_EQ(compare_greedy(c, cpu, gpu, 0.0f, 1e-4), "") << "replay " << replay;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(st);
  dfsel_plan_destroy(plan);
}

}  // namespace
}  // namespace dfsel::test
