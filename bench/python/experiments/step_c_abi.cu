// The C side of bench/python/results/README.md (graph replay gap): SelectorStep/tokens:16
// through the C ABI only, one source built twice, against libdfsel.a and libdfsel.so. Same
// inputs (bench_data.cuh), same capture and timing as bench_util.cuh, 1 and 10 replays a
// timing. From the repository root, BUILD a CUDA build with DFSEL_SHARED=ON:
//   F="-O3 -arch=sm_90 -std=c++17 --expt-relaxed-constexpr -I. -Iinclude"
//   nvcc $F -DLINKED='"static"' bench/python/experiments/step_c_abi.cu BUILD/host/libdfsel.a \
//     -lnccl -lbenchmark -lpthread -o step_static
//   nvcc $F -DLINKED='"shared"' bench/python/experiments/step_c_abi.cu -LBUILD/host -ldfsel \
//     -lbenchmark -Xlinker -rpath=$PWD/BUILD/host -o step_shared
#include <algorithm>
#include <cstdio>
#include <vector>
#include "bench/bench_data.cuh"
using namespace dfsel::bench;
int main() {
  const int64_t V = 248320, E = 5120; const int R = 256, K = 16, B = 16, C = 8;
  auto al = [](size_t n) { void* p; cudaMalloc(&p, n); return p; };
  void* ep = al((size_t)V * R * 2); void* en = al((size_t)V * R * 2); void* wh = al((size_t)R * E * 2);
  void* hid = al((size_t)B * E * 4); int32_t* anc = (int32_t*)al(4); int32_t* path = (int32_t*)al(64); int32_t* ne = (int32_t*)al(4);
  fill_hashed(ep, DFSEL_TYPE_BF16, V * R, 0.1f, 11); fill_hashed(en, DFSEL_TYPE_BF16, V * R, 0.1f, 12);
  fill_hashed(wh, DFSEL_TYPE_BF16, (size_t)R * E, 0.02f, 13); fill_hashed(hid, DFSEL_TYPE_F32, (size_t)B * E, 1.0f, 14);
  int32_t a0 = (int32_t)(hash64(0) % (uint64_t)V); cudaMemcpy(anc, &a0, 4, cudaMemcpyHostToDevice);
  std::vector<void*> lg(C);
  for (int c = 0; c < C; ++c) { lg[c] = al((size_t)B * V * 4); fill_hashed(lg[c], DFSEL_TYPE_F32, (size_t)B * V, 8.0f, 100 + c * 7919); }
  dfsel_plan_desc d{};
  d.config = dfsel_config{V, E, R, K, B, 1.0f, 0.0f, 1};
  d.shard = dfsel_shard{0, 1, 0, V};
  d.backend = DFSEL_BACKEND_CUDA; d.device = 0; d.placement = DFSEL_CODEBOOKS_REPLICATED;
  d.e_prev = dfsel_tensor_2d(ep, DFSEL_TYPE_BF16, R, V, (size_t)R * 2);
  d.e_next = dfsel_tensor_2d(en, DFSEL_TYPE_BF16, R, V, (size_t)R * 2);
  d.w_h = dfsel_tensor_2d(wh, DFSEL_TYPE_BF16, E, R, (size_t)E * 2);
  char msg[512]; dfsel_plan* plan = nullptr;
  if (dfsel_plan_create(&d, &plan, msg, sizeof msg) != DFSEL_SUCCESS) { printf("create: %s\n", msg); return 1; }
  std::vector<dfsel_inputs> in(C);
  for (int c = 0; c < C; ++c) {
    in[c] = dfsel_inputs{};
    in[c].logits = dfsel_tensor_2d(lg[c], DFSEL_TYPE_F32, V, B, (size_t)V * 4);
    in[c].hidden = dfsel_tensor_2d(hid, DFSEL_TYPE_F32, E, B, (size_t)E * 4);
    in[c].anchors = anc; in[c].n_blocks = 1;
  }
  dfsel_outputs out{}; out.path = path; out.n_emitted = ne;
  cudaStream_t st; cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
  cudaGraph_t g; cudaGraphExec_t ex;
  cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal);
  for (int i = 0; i < 16; ++i) dfsel_plan_run(plan, &in[i % C], &out, st);
  cudaStreamEndCapture(st, &g); cudaGraphInstantiate(&ex, g, 0);
  cudaGraphLaunch(ex, st); cudaStreamSynchronize(st);
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  for (int per : {1, 10, 1, 10}) {
    std::vector<double> t;
    for (int r = 0; r < 200; ++r) {
      cudaEventRecord(a, st);
      for (int q = 0; q < per; ++q) cudaGraphLaunch(ex, st);
      cudaEventRecord(b, st); cudaEventSynchronize(b);
      float ms; cudaEventElapsedTime(&ms, a, b); t.push_back(ms * 1e3 / (16.0 * per));
    }
    std::sort(t.begin(), t.end());
    printf("%s: %2d replays a timing: median %.2f us (min %.2f)\n", LINKED, per, t[t.size() / 2], t[0]);
  }
  printf("status %d\n", (int)cudaGetLastError());
  return 0;
}
