// dfsel_ggml_run's refusals on ggml-cuda: a tensor in host memory (a ggml CPU buffer, or bare
// host memory), on another GPU than the plan's, of the wrong shape, or device tensors given to a
// CPU plan, each refused with its name before anything is enqueued (the poisoned outputs stay
// poisoned); and the same tensors accepted once they are right.
#include <gtest/gtest.h>

#include <ggml-cpu.h>

#include <cstring>
#include <unistd.h>

#include "dfsel/ggml.h"
#include "ggml/ggml_support.h"
#include "ggml_cuda/cuda_draft.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct Route {
  ggml_backend_t backend = nullptr;
  ggml_backend_buffer_type_t buft = nullptr;
  DraftShape s;
  DraftWeights w;
  DraftGraph g;
  DfselOutputs o;
  dfsel_plan* plan = nullptr;
  cudaStream_t stream = nullptr;

  ~Route() {
    if (plan) dfsel_plan_destroy(plan);
    if (stream) cudaStreamDestroy(stream);
    if (backend) ggml_backend_free(backend);
  }
  std::string make(ggml_backend_dev_t dev, dfsel_backend kind) {
    std::mt19937_64 rng(fresh_seed());
    backend = ggml_backend_dev_init(dev, nullptr);
    buft = ggml_backend_dev_buffer_type(dev);
    s.V = 4099;
    s.E = 512;
    s.blocks = 2;
    std::string e = w.make(s, buft, rng, "/tmp/dfsel-route-" + std::to_string(getpid()) + ".gguf");
    if (e.empty()) e = g.make(s, w, buft, rng(), false);
    if (e.empty()) e = o.make(s, g.anchors, buft);
    if (!e.empty()) return e;
    if (ggml_backend_graph_compute(backend, g.graph) != GGML_STATUS_SUCCESS) return "graph compute";
    dfsel_plan_desc desc{};
    desc.config = dfsel_config{s.V, s.E, s.R, s.K, s.block, 1.0f, 0.0f, s.blocks};
    desc.shard = dfsel_shard{0, 1, 0, s.V};
    desc.backend = kind;
    char msg[512];
    // A CPU plan's weights are host copies; a CUDA plan's the loaded device tensors.
    const bool cpu = kind == DFSEL_BACKEND_CPU;
    if (dfsel_ggml_tensor(cpu ? w.e_prev_h : w.e_prev, &desc.e_prev, msg, sizeof msg) != DFSEL_SUCCESS ||
        dfsel_ggml_tensor(cpu ? w.e_next_h : w.e_next, &desc.e_next, msg, sizeof msg) != DFSEL_SUCCESS ||
        dfsel_ggml_tensor(cpu ? w.w_h_h : w.w_h, &desc.w_h, msg, sizeof msg) != DFSEL_SUCCESS ||
        dfsel_plan_create(&desc, &plan, msg, sizeof msg) != DFSEL_SUCCESS)
      return msg;
    if (cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking) != cudaSuccess) return "stream";
    return "";
  }
  dfsel_ggml_step step() const {
    dfsel_ggml_step st{};
    st.logits = g.logits;
    st.hidden = g.embd;
    st.anchors = o.anchors;
    st.packed = o.packed;
    st.path = o.path;
    st.n_emitted = o.n_emitted;
    return st;
  }
  // The status and message of a run of st; the outputs must still be poisoned after a refusal.
  dfsel_status run(const dfsel_ggml_step& st, std::string* msg) {
    o.poison();
    char m[512] = "";
    const dfsel_status r = dfsel_ggml_run(plan, &st, stream, m, sizeof m);
    *msg = m;
    cudaStreamSynchronize(stream);
    return r;
  }
  bool untouched() const {
    for (int32_t v : get_i32(o.n_emitted))
      if (v != -1) return false;
    for (int32_t v : get_i32(o.path))
      if (v != -1) return false;
    return true;
  }
};

#define MAKE_ROUTE(r, kind)                                                    \
  DFSEL_REQUIRE_GPUS(1);                                                       \
  const std::vector<ggml_backend_dev_t> gpus_ = ggml_gpu_devices();            \
  ASSERT_FALSE(gpus_.empty());                                                 \
  Route r;                                                                     \
  ASSERT_EQ("", r.make(gpus_[0], kind))

TEST(GgmlCudaRoute, RunsOnTheGraphsTensors) {
  MAKE_ROUTE(r, DFSEL_BACKEND_CUDA);
  std::string msg;
  ASSERT_EQ(DFSEL_SUCCESS, r.run(r.step(), &msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_plan_check(r.plan, r.stream)) << dfsel_plan_last_error(r.plan);
  for (int32_t n : get_i32(r.o.n_emitted)) EXPECT_EQ(r.s.block - 1, n);
}

TEST(GgmlCudaRoute, HostBufferTensorIsRefusedByName) {
  MAKE_ROUTE(r, DFSEL_BACKEND_CUDA);
  // The same t_embd in a ggml CPU buffer.
  ggml_init_params p{4 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* h = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, r.s.E, r.s.tokens());
  ggml_set_name(h, "t_embd_on_host");
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_cpu_buffer_type());
  ASSERT_NE(nullptr, buf);
  const std::vector<float> v = get_f32(r.g.embd);
  ggml_backend_tensor_set(h, v.data(), 0, ggml_nbytes(h));
  dfsel_ggml_step st = r.step();
  st.hidden = h;
  std::string msg;
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, r.run(st, &msg));
  EXPECT_NE(std::string::npos, msg.find("'t_embd_on_host'")) << msg;
  EXPECT_NE(std::string::npos, msg.find("host memory")) << msg;
  EXPECT_TRUE(r.untouched());
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
}

TEST(GgmlCudaRoute, BareHostMemoryIsRefusedByName) {
  MAKE_ROUTE(r, DFSEL_BACKEND_CUDA);
  // A tensor with no buffer whose data is plain host memory (an engine's own array).
  std::vector<int32_t> anchors(r.g.anchors);
  ggml_tensor a = *r.o.anchors;
  a.buffer = nullptr;
  a.data = anchors.data();
  std::strcpy(a.name, "host_anchors");
  dfsel_ggml_step st = r.step();
  st.anchors = &a;
  std::string msg;
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, r.run(st, &msg));
  EXPECT_NE(std::string::npos, msg.find("'host_anchors'")) << msg;
  EXPECT_TRUE(r.untouched());
}

TEST(GgmlCudaRoute, AnotherGpusTensorIsRefusedByName) {
  DFSEL_REQUIRE_GPUS(2);
  MAKE_ROUTE(r, DFSEL_BACKEND_CUDA);
  // ggml's devices beyond the first that are another physical GPU (not GGML_CUDA_DEVICES's
  // virtual devices on the same one).
  int other = -1;
  for (size_t i = 1; i < gpus_.size() && other < 0; ++i) {
    ggml_backend_dev_props props{};
    ggml_backend_dev_get_props(gpus_[i], &props);
    ggml_backend_dev_props first{};
    ggml_backend_dev_get_props(gpus_[0], &first);
    if (!props.device_id || !first.device_id || std::strcmp(props.device_id, first.device_id) != 0) other = (int)i;
  }
  if (other < 0) GTEST_SKIP() << "ggml's GPU devices are all one physical GPU";
  ggml_init_params p{4 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* h = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, r.s.E, r.s.tokens());
  ggml_set_name(h, "t_embd_elsewhere");
  ggml_backend_buffer_t buf = ggml_backend_alloc_ctx_tensors_from_buft(ctx, ggml_backend_dev_buffer_type(gpus_[(size_t)other]));
  ASSERT_NE(nullptr, buf);
  dfsel_ggml_step st = r.step();
  st.hidden = h;
  std::string msg;
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, r.run(st, &msg));
  EXPECT_NE(std::string::npos, msg.find("'t_embd_elsewhere'")) << msg;
  EXPECT_NE(std::string::npos, msg.find("device")) << msg;
  EXPECT_TRUE(r.untouched());
  ggml_backend_buffer_free(buf);
  ggml_free(ctx);
}

TEST(GgmlCudaRoute, WrongShapesAreRefusedByName) {
  MAKE_ROUTE(r, DFSEL_BACKEND_CUDA);
  // Views of the right tensors with one extent wrong.
  ggml_init_params p{8 * ggml_tensor_overhead(), nullptr, true};
  ggml_context* ctx = ggml_init(p);
  ggml_tensor* narrow = ggml_view_2d(ctx, r.o.packed, r.s.E - 16, r.s.tokens(), r.o.packed->nb[1], 0);
  ggml_set_name(narrow, "packed_narrow");
  ggml_tensor* short_path = ggml_view_2d(ctx, r.o.path, r.s.block - 2, r.s.blocks, (r.s.block - 2) * 4, 0);
  ggml_set_name(short_path, "path_short");
  ggml_tensor more = *r.o.anchors;  // more anchors (blocks) than the plan's max_blocks
  more.ne[0] = r.s.blocks + 1;
  std::strcpy(more.name, "too_many_anchors");
  struct Bad {
    dfsel_ggml_step st;
    const char* name;
  };
  dfsel_ggml_step a = r.step(), b = r.step(), c = r.step();
  a.packed = narrow;
  b.path = short_path;
  c.anchors = &more;
  for (const Bad& bad : {Bad{a, "'packed_narrow'"}, Bad{b, "'path_short'"}, Bad{c, "'too_many_anchors'"}}) {
    std::string msg;
    EXPECT_EQ(DFSEL_INVALID_ARGUMENT, r.run(bad.st, &msg)) << bad.name;
    EXPECT_NE(std::string::npos, msg.find(bad.name)) << msg;
    EXPECT_TRUE(r.untouched()) << bad.name;
  }
  ggml_free(ctx);
}

TEST(GgmlCudaRoute, CpuPlanRefusesDeviceTensors) {
  MAKE_ROUTE(r, DFSEL_BACKEND_CPU);
  std::string msg;
  EXPECT_EQ(DFSEL_INVALID_ARGUMENT, r.run(r.step(), &msg));
  EXPECT_NE(std::string::npos, msg.find("not host memory")) << msg;
  EXPECT_TRUE(r.untouched());
}

}  // namespace
}  // namespace dfsel::test
