// Faults: out of memory at plan creation, a peer that aborts its communicator, a stream of the
// wrong device or one that is capturing, a CUDA error on the caller's stream; and two plans
// running at once on two streams. Each fault gives a clear status, leaks no device memory and
// leaves the library able to make a new plan that gives correct results.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/compare.h"
#include "support/dspark_problem.h"
#include "support/gpu.cuh"
#include "support/problem.h"

#if defined(DFSEL_WITH_NCCL)
#include <nccl.h>
#endif

namespace dfsel::test {
namespace {

Case small_case() { return model_case(31040, 512, 16); }

size_t free_bytes(int device) {
  cudaSetDevice(device);
  size_t free = 0, total = 0;
  cudaMemGetInfo(&free, &total);
  return free;
}

// The CPU reference with the same shards, for comparing a GPU result.
Result cpu_result(const Case& c, const Data& d, const RunOpts& gpu_opts) {
  RunOpts r;
  r.bounds = gpu_opts.bounds;
  r.temperature = gpu_opts.temperature;
  r.seed = gpu_opts.seed;
  r.placement = gpu_opts.placement;
  return run_case(c, d, r);
}

std::string compare(const Case& c, const Result& cpu, const Result& gpu, const RunOpts& r) {
  if (gpu.status != DFSEL_SUCCESS) return "GPU run failed: " + gpu.error;
  if (cpu.status != DFSEL_SUCCESS) return "CPU run failed: " + cpu.error;
  return r.temperature > 0 ? compare_sampled(c, cpu, gpu, r.p_min, r.seed, 1e-4)
                           : compare_greedy(c, cpu, gpu, r.p_min, 1e-4);
}

// Holds device memory until fewer than `leave` bytes remain free (largest pieces first).
class DeviceFiller {
 public:
  explicit DeviceFiller(size_t leave) {
    for (size_t piece = (size_t)1 << 30; piece >= ((size_t)64 << 10); piece >>= 2) {
      while (free_bytes(0) > leave + piece) {
        void* p = nullptr;
        if (cudaMalloc(&p, piece) != cudaSuccess) {
          cudaGetLastError();
          break;
        }
        held_.push_back(p);
      }
    }
  }
  ~DeviceFiller() {
    for (void* p : held_) cudaFree(p);
  }

 private:
  std::vector<void*> held_;
};

TEST(GpuFault, OutOfMemoryAtPlanCreationLeaksNothing) {
  DFSEL_REQUIRE_GPUS(1);
  Case c = small_case();
  c.blocks = 64;  // 960 drafted rows: a workspace of several MiB
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  Session s(c, d, r);  // inputs and outputs are on the device before memory runs out
  {
    DeviceFiller fill((size_t)256 << 10);
    const size_t before = free_bytes(0);
    ASSERT_LT(before, (size_t)4 << 20) << "could not fill the device";
    for (int attempt = 0; attempt < 3; ++attempt) {
      Result res;
      EXPECT_EQ(s.create(&res), DFSEL_OUT_OF_MEMORY) << res.error;
      EXPECT_NE(res.error.find("out of memory"), std::string::npos) << res.error;
      EXPECT_EQ(s.plans[0], nullptr);
      EXPECT_EQ(free_bytes(0), before) << "a failed plan creation kept device memory";
    }
  }
  // With the memory back, the same description gives a working plan.
  Result res;
  ASSERT_EQ(s.create(&res), DFSEL_SUCCESS) << res.error;
  ASSERT_EQ(s.run(), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plans[0]);
  EXPECT_EQ(compare(c, cpu_result(c, d, r), s.collect(), r), "");
}

TEST(GpuFault, TwoPlansOnTwoStreamsRunAtOnce) {
  DFSEL_REQUIRE_GPUS(1);
  Case c1 = small_case();
  c1.V = 248320;
  c1.blocks = 1;
  Case c2 = small_case();
  c2.V = 124160;
  c2.K = 8;
  c2.R = 64;
  c2.block = 8;
  c2.blocks = 8;
  c2.logits_t = DFSEL_TYPE_BF16;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d1 = make_data(c1, seed), d2 = make_data(c2, seed + 1);
  RunOpts r1, r2;
  r1.backend = r2.backend = DFSEL_BACKEND_CUDA;
  r2.temperature = 0.7f;
  r2.seed = seed + 2;
  const Result cpu1 = cpu_result(c1, d1, r1), cpu2 = cpu_result(c2, d2, r2);
  Session s1(c1, d1, r1), s2(c2, d2, r2);
  Result res;
  ASSERT_EQ(s1.create(&res), DFSEL_SUCCESS) << res.error;
  ASSERT_EQ(s2.create(&res), DFSEL_SUCCESS) << res.error;
  cudaStream_t a = nullptr, b = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
  CUDA_OK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
  s1.streams[0] = a;  // the sessions destroy these streams
  s2.streams[0] = b;
  Result first1, first2;
  for (int iter = 0; iter < 8; ++iter) {
    s1.poison();
    s2.poison();
    // Both steps are in flight before either is waited for; the order alternates.
    if (iter % 2 == 0) {
      ASSERT_EQ(s1.enqueue(), DFSEL_SUCCESS);
      ASSERT_EQ(s2.enqueue(), DFSEL_SUCCESS);
    } else {
      ASSERT_EQ(s2.enqueue(), DFSEL_SUCCESS);
      ASSERT_EQ(s1.enqueue(), DFSEL_SUCCESS);
    }
    const Result g1 = s1.collect(), g2 = s2.collect();
    ASSERT_EQ(compare(c1, cpu1, g1, r1), "") << "iteration " << iter;
    ASSERT_EQ(compare(c2, cpu2, g2, r2), "") << "iteration " << iter;
    if (iter == 0) {
      first1 = g1;
      first2 = g2;
    }
    EXPECT_EQ(first_diff(g1.scores, first1.scores), -1);
    EXPECT_EQ(first_diff(g2.q, first2.q), -1);
    EXPECT_EQ(first_diff(g2.path, first2.path), -1);
  }
}

TEST(GpuFault, CheckOnACapturingStreamLeavesTheCaptureIntact) {
  DFSEL_REQUIRE_GPUS(1);
  Case c = small_case();
  c.blocks = 2;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  Session s(c, d, r);
  Result res;
  ASSERT_EQ(s.create(&res), DFSEL_SUCCESS) << res.error;
  cudaStream_t st = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  s.streams[0] = st;
  s.poison();
  CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  EXPECT_EQ(s.enqueue(), DFSEL_SUCCESS);
  EXPECT_EQ(dfsel_plan_check(s.plans[0], st), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(s.plans[0])).find("capturing a CUDA graph"), std::string::npos)
      << dfsel_plan_last_error(s.plans[0]);
  EXPECT_EQ(dfsel_plan_wait(s.plans[0], st, 10), DFSEL_INVALID_ARGUMENT);
  cudaGraph_t graph = nullptr;
  CUDA_OK(cudaStreamEndCapture(st, &graph));  // the refusal did not invalidate the capture
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaGraphInstantiate(&exec, graph, 0));
  CUDA_OK(cudaGraphLaunch(exec, st));
  EXPECT_EQ(compare(c, cpu_result(c, d, r), s.collect(), r), "");
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
}

TEST(GpuFault, StreamOfAnotherDeviceIsRefused) {
  DFSEL_REQUIRE_GPUS(2);
  Case c = small_case();
  c.blocks = 2;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;  // the plan is on device 0
  Session s(c, d, r);
  Result res;
  ASSERT_EQ(s.create(&res), DFSEL_SUCCESS) << res.error;
  cudaStream_t other = nullptr, own = nullptr;
  CUDA_OK(cudaSetDevice(1));
  CUDA_OK(cudaStreamCreateWithFlags(&other, cudaStreamNonBlocking));
  CUDA_OK(cudaSetDevice(0));
  CUDA_OK(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
  s.streams[0] = other;
  EXPECT_EQ(s.run(), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(std::string(dfsel_plan_last_error(s.plans[0])).find("belongs to CUDA device 1 but the plan runs on device 0"),
            std::string::npos)
      << dfsel_plan_last_error(s.plans[0]);
  EXPECT_EQ(dfsel_plan_check(s.plans[0], other), DFSEL_INVALID_ARGUMENT);
  s.streams[0] = own;
  s.poison();
  CUDA_OK(cudaSetDevice(1));  // the caller's current device does not matter
  ASSERT_EQ(s.enqueue(), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plans[0]);
  EXPECT_EQ(compare(c, cpu_result(c, d, r), s.collect(), r), "");
  CUDA_OK(cudaSetDevice(1));
  cudaStreamDestroy(other);
  CUDA_OK(cudaSetDevice(0));
}

// A CUDA plan given weights its device cannot read is refused at creation, the pointer named:
// pageable host memory (a kernel would fault on it, or crawl over the bus); memory CUDA
// allocated on the host is taken. DSpark plans alike.
TEST(GpuFault, HostWeightsForACudaPlanAreRefused) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Case c;
  c.V = 600;
  const Data d = make_data(c, seed);
  dfsel_plan_desc desc = cpu_desc(c, d, 0, 1, 0, c.V);
  desc.backend = DFSEL_BACKEND_CUDA;
  desc.device = 0;
  auto create = [&](std::string* msg) {
    char buf[512] = "";
    dfsel_plan* plan = nullptr;
    const dfsel_status st = dfsel_plan_create(&desc, &plan, buf, sizeof buf);
    EXPECT_EQ(plan != nullptr, st == DFSEL_SUCCESS);
    dfsel_plan_destroy(plan);
    *msg = buf;
    return st;
  };
  std::string msg;
  EXPECT_EQ(create(&msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("e_prev.data = "), std::string::npos) << msg;
  EXPECT_NE(msg.find("host memory that CUDA did not allocate or register"), std::string::npos) << msg;
  // Codebooks on the device, W_h still pageable: W_h is named.
  void *e_prev = nullptr, *e_next = nullptr, *w_h = nullptr;
  CUDA_OK(cudaMalloc(&e_prev, d.e_prev.size()));
  CUDA_OK(cudaMalloc(&e_next, d.e_next.size()));
  CUDA_OK(cudaMemcpy(e_prev, d.e_prev.data(), d.e_prev.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(e_next, d.e_next.data(), d.e_next.size(), cudaMemcpyHostToDevice));
  desc.e_prev.data = e_prev;
  desc.e_next.data = e_next;
  EXPECT_EQ(create(&msg), DFSEL_INVALID_ARGUMENT);
  EXPECT_NE(msg.find("w_h.data = "), std::string::npos) << msg;
  // W_h in CUDA's pinned host memory, which the device can address: the plan is made.
  CUDA_OK(cudaMallocHost(&w_h, d.w_h.size()));
  std::memcpy(w_h, d.w_h.data(), d.w_h.size());
  desc.w_h.data = w_h;
  EXPECT_EQ(create(&msg), DFSEL_SUCCESS) << msg;
  cudaFree(e_prev);
  cudaFree(e_next);
  cudaFreeHost(w_h);

  DSparkCase dc;
  const DSparkData dd = make_dspark_data(dc, seed);
  dfsel_dspark_plan_desc ds = dspark_desc(dc, dd, DSparkRunOpts{}, 0);
  ds.backend = DFSEL_BACKEND_CUDA;
  ds.device = 0;
  char buf[512] = "";
  dfsel_dspark_plan* plan = nullptr;
  EXPECT_EQ(dfsel_dspark_plan_create(&ds, &plan, buf, sizeof buf), DFSEL_INVALID_ARGUMENT);
  EXPECT_EQ(plan, nullptr);
  EXPECT_NE(std::string(buf).find("w1.data = "), std::string::npos) << buf;
}

__global__ void fault_kernel() { __trap(); }

// A kernel fault on the caller's stream is sticky: CUDA refuses every later call in the
// process. dfsel reports it (DFSEL_CUDA_ERROR with CUDA's message) from run and check and
// destroys the plan without crashing; a new plan needs a new process (CUDA's rule). Runs in
// a child process, which exits 0 when every status was as expected.
void fault_on_stream_child() {
  Case c = small_case();
  c.blocks = 1;
  const Data d = make_data(c, 7);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  dfsel_status run = DFSEL_SUCCESS, check = DFSEL_SUCCESS;
  std::string msg;
  {
    Session s(c, d, r);
    Result res;
    if (s.create(&res) != DFSEL_SUCCESS) std::exit(10);
    cudaStream_t st = nullptr;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    s.streams[0] = st;
    fault_kernel<<<1, 1, 0, st>>>();
    cudaStreamSynchronize(st);
    run = s.enqueue();
    check = dfsel_plan_check(s.plans[0], st);
    msg = dfsel_plan_last_error(s.plans[0]);
  }  // plans destroyed in the faulted context
  std::fprintf(stderr, "run=%d check=%d msg=%s\n", (int)run, (int)check, msg.c_str());
  std::exit(run == DFSEL_CUDA_ERROR && check == DFSEL_CUDA_ERROR && msg.find("failed: ") != std::string::npos ? 0 : 1);
}

TEST(GpuFault, KernelFaultOnTheStreamIsReported) {
  DFSEL_REQUIRE_GPUS(1);
  GTEST_FLAG_SET(death_test_style, "threadsafe");  // the child starts CUDA afresh
  EXPECT_EXIT(fault_on_stream_child(), ::testing::ExitedWithCode(0), "run=4 check=4");
}

#if defined(DFSEL_WITH_NCCL)
// Rank 1 dies (aborts its communicator). Rank 0's next step cannot complete: dfsel_plan_wait
// says so within its limit instead of hanging; rank 0 aborts its communicator too, which ends
// the step, destroys its plan, and a new communicator with new plans works.
TEST(GpuFault, PeerAbortIsReportedAndANewCommunicatorWorks) {
  DFSEL_REQUIRE_GPUS(2);
  Case c = small_case();
  c.blocks = 2;
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Data d = make_data(c, seed);
  RunOpts r;
  r.backend = DFSEL_BACKEND_CUDA;
  r.nccl = true;
  r.bounds = {0, 12345, c.V};
  const Result cpu = cpu_result(c, d, r);
  {
    Session s(c, d, r);
    Result res;
    ASSERT_EQ(s.create(&res), DFSEL_SUCCESS) << res.error;
    ASSERT_EQ(s.run(), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plans[0]);
    ASSERT_EQ(compare(c, cpu, s.collect(), r), "");
    // NCCL allocates its buffers at the first collectives: measure after them.
    const size_t free0 = free_bytes(0), free1 = free_bytes(1);

    dfsel_plan_destroy(s.plans[1]);
    s.plans[1] = nullptr;
    EXPECT_GE(free_bytes(1), free1) << "destroying rank 1's plan took device memory";
    ASSERT_EQ(ncclCommAbort(static_cast<ncclComm_t>(s.comms[1])), ncclSuccess);
    s.comms[1] = nullptr;

    s.poison();
    ASSERT_EQ(s.enqueue_shard(0), DFSEL_SUCCESS) << dfsel_plan_last_error(s.plans[0]);
    const dfsel_status w = dfsel_plan_wait(s.plans[0], s.streams[0], 500);
    EXPECT_TRUE(w == DFSEL_TIMEOUT || w == DFSEL_NCCL_ERROR) << dfsel_status_string(w);
    const std::string msg = dfsel_plan_last_error(s.plans[0]);
    EXPECT_NE(msg.find("abort"), std::string::npos) << msg;
    std::printf("rank 0 after its peer aborted: %s: %s\n", dfsel_status_string(w), msg.c_str());

    ASSERT_EQ(ncclCommAbort(static_cast<ncclComm_t>(s.comms[0])), ncclSuccess);
    s.comms[0] = nullptr;
    CUDA_OK(cudaSetDevice(0));
    cudaStreamSynchronize(static_cast<cudaStream_t>(s.streams[0]));  // the aborted step has ended
    cudaGetLastError();
    dfsel_plan_destroy(s.plans[0]);
    s.plans[0] = nullptr;
    EXPECT_GE(free_bytes(0), free0) << "destroying rank 0's plan took device memory";
  }
  EXPECT_EQ(compare(c, cpu, run_case(c, d, r), r), "");
}
#endif

}  // namespace
}  // namespace dfsel::test
