// The node the way an engine runs it: weights in a ggml-backend buffer, graph tensors placed
// by ggml's graph allocator after the node was made, the graph computed by the CPU backend
// (ggml_backend_graph_compute) and computed again on new inputs, as decode loops reuse graphs.
#include <gtest/gtest.h>

#include <ggml-alloc.h>
#include <ggml-backend.h>
#include <ggml-cpu.h>

#include <memory>

#include "dfsel/ggml.h"
#include "ggml_support.h"
#include "plan_run.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

std::vector<uint16_t> as_f16(const std::vector<float>& x) {
  std::vector<uint16_t> h(x.size());
  ggml_fp32_to_fp16_row(x.data(), reinterpret_cast<ggml_fp16_t*>(h.data()), (int64_t)x.size());
  return h;
}

TEST(GgmlBackend, NodeInAnAllocatedGraphOnTheCpuBackend) {
  const int64_t V = 32000, E = 320, R = 256;
  const int K = 16, block = 16, blocks = 3;
  const int64_t T = (int64_t)blocks * block;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);

  std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)> backend(ggml_backend_cpu_init(), ggml_backend_free);
  ASSERT_NE(nullptr, backend);
  ggml_backend_cpu_set_n_threads(backend.get(), 2);

  GgmlContext wctx(8 * ggml_tensor_overhead(), /*no_alloc=*/true);
  ggml_tensor* ep = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, R, V);
  ggml_tensor* en = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, R, V);
  ggml_tensor* wh = ggml_new_tensor_2d(wctx.get(), GGML_TYPE_F16, E, R);
  std::unique_ptr<ggml_backend_buffer, void (*)(ggml_backend_buffer_t)> wbuf(
      ggml_backend_alloc_ctx_tensors(wctx.get(), backend.get()), ggml_backend_buffer_free);
  ASSERT_NE(nullptr, wbuf);
  for (ggml_tensor* t : {ep, en, wh}) {
    const std::vector<uint16_t> h = as_f16(uniform(rng, (size_t)(t->ne[0] * t->ne[1]), 1.0f));
    ggml_backend_tensor_set(t, h.data(), 0, h.size() * 2);
  }

  dfsel_plan_desc desc{};
  desc.config = make_config(V, E, (int)R, K, block, blocks, 1.0f, 30.0f);
  desc.shard = dfsel_shard{0, 1, 0, V};
  char msg[512] = "";
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(ep, &desc.e_prev, msg, sizeof msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(en, &desc.e_next, msg, sizeof msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(wh, &desc.w_h, msg, sizeof msg)) << msg;
  desc.n_threads = 0;  // every core: the graph's 2 threads bound it
  dfsel_ggml_op* op = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_create(&desc, &op, msg, sizeof msg)) << msg;
  std::unique_ptr<dfsel_ggml_op, dfsel_status (*)(dfsel_ggml_op*)> keep(op, dfsel_ggml_op_destroy);

  // The graph's tensors have no data when the node is made; the allocator places them.
  GgmlContext gctx(64 * ggml_tensor_overhead() + ggml_graph_overhead(), /*no_alloc=*/true);
  ggml_tensor* z = ggml_new_tensor_2d(gctx.get(), GGML_TYPE_F32, V, T);
  ggml_tensor* h = ggml_new_tensor_2d(gctx.get(), GGML_TYPE_F32, E, T);
  ggml_tensor* a = ggml_new_tensor_1d(gctx.get(), GGML_TYPE_I32, blocks);
  for (ggml_tensor* t : {z, h, a}) ggml_set_input(t);
  ggml_set_name(z, "logits");
  ggml_tensor* out = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_select(gctx.get(), op, z, h, a, &out)) << dfsel_ggml_op_last_error(op);
  ggml_set_output(out);
  ggml_cgraph* gf = ggml_new_graph(gctx.get());
  ggml_build_forward_expand(gf, out);
  std::unique_ptr<ggml_gallocr, void (*)(ggml_gallocr_t)> galloc(
      ggml_gallocr_new(ggml_backend_get_default_buffer_type(backend.get())), ggml_gallocr_free);
  ASSERT_TRUE(ggml_gallocr_alloc_graph(galloc.get(), gf));

  for (int step = 0; step < 2; ++step) {
    SCOPED_TRACE("step " + std::to_string(step));
    const std::vector<float> zf = uniform(rng, (size_t)(V * T), 10.0f), hf = uniform(rng, (size_t)(E * T), 1.0f);
    std::vector<int32_t> anchors((size_t)blocks);
    for (int32_t& x : anchors) x = (int32_t)(rng() % (uint64_t)V);
    ggml_backend_tensor_set(z, zf.data(), 0, zf.size() * 4);
    ggml_backend_tensor_set(h, hf.data(), 0, hf.size() * 4);
    ggml_backend_tensor_set(a, anchors.data(), 0, anchors.size() * 4);
    ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(backend.get(), gf));
    ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_op_check(op)) << dfsel_ggml_op_last_error(op);
    std::vector<float> got((size_t)(E * T));
    ggml_backend_tensor_get(out, got.data(), 0, got.size() * 4);

    PlanIo io;
    io.cfg = desc.config;
    io.e_prev = desc.e_prev, io.e_next = desc.e_next, io.w_h = desc.w_h;
    io.logits = dfsel_tensor_2d(zf.data(), DFSEL_TYPE_F32, V, T, (size_t)V * 4);
    io.hidden = dfsel_tensor_2d(hf.data(), DFSEL_TYPE_F32, E, T, (size_t)E * 4);
    io.anchors = anchors.data();
    io.n_blocks = blocks;
    const PlanOut plan = run_plan(io);
    ASSERT_EQ(DFSEL_SUCCESS, plan.status) << plan.error;
    const long at = first_bit_diff(plan.packed.data(), got.data(), got.size());
    ASSERT_EQ(-1, at) << "row " << at / E << " element " << at % E;
    ASSERT_EQ((float)plan.cand_ids[0], got[(size_t)E]) << "row 1 starts with its first candidate";
  }
}

}  // namespace
}  // namespace dfsel::test
