// One process per GPU, the way inference engines run dfsel under tensor parallelism.
//
//   nccl_rank --rank R --ranks S --id-file PATH [--vocab V] [--blocks N] [--steps N] [--sharded]
//
// Start S processes (ranks 0..S-1) with the same --id-file. Rank 0 creates the NCCL unique id
// and publishes it in that file; the others wait for it. Each rank owns a contiguous slice of
// the vocabulary: its logits slice and (with --sharded) only its codebook rows. Every rank
// prints the drafted tokens and a checksum of them; the checksums must agree.
#include <cuda_runtime.h>
#include <nccl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "dfsel/dfsel.h"

#define CHECK_CUDA(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e)); return 1; } } while (0)
#define CHECK_NCCL(x) do { ncclResult_t r = (x); if (r != ncclSuccess) { std::fprintf(stderr, "%s: %s\n", #x, ncclGetErrorString(r)); return 1; } } while (0)

namespace {

// Rank 0 writes the id to a temporary name and renames it, so readers never see half a file.
bool publish_id(const std::string& path, const ncclUniqueId& id) {
  const std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::ofstream(tmp, std::ios::binary).write(id.internal, sizeof id.internal);
  return std::rename(tmp.c_str(), path.c_str()) == 0;
}

bool wait_for_id(const std::string& path, ncclUniqueId* id, int seconds) {
  for (int i = 0; i < seconds * 100; ++i) {
    std::ifstream f(path, std::ios::binary);
    if (f.read(id->internal, sizeof id->internal)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

// The same pseudo-random values on every rank, from the global element index.
float value(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  z ^= z >> 29;
  return (float)((double)(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

dfsel_tensor f32_matrix(const void* p, int64_t ne0, int64_t ne1, size_t nb1) {
  return dfsel_tensor_2d(p, DFSEL_TYPE_F32, ne0, ne1, nb1);
}

template <typename F>
float* upload(size_t n, F f) {
  std::vector<float> h(n);
  for (size_t i = 0; i < n; ++i) h[i] = f(i);
  float* d = nullptr;
  if (cudaMalloc(&d, n * 4) != cudaSuccess) return nullptr;
  cudaMemcpy(d, h.data(), n * 4, cudaMemcpyHostToDevice);
  return d;
}

}  // namespace

int main(int argc, char** argv) {
  int rank = -1, ranks = 0, blocks = 1, steps = 3;
  int64_t V = 248320;
  const int64_t E = 1024;
  const int R = 256, K = 16, B = 16;
  bool sharded = false;
  std::string id_file;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto next = [&]() { return i + 1 < argc ? argv[++i] : (char*)"0"; };
    if (a == "--rank") rank = std::atoi(next());
    else if (a == "--ranks") ranks = std::atoi(next());
    else if (a == "--id-file") id_file = next();
    else if (a == "--vocab") V = std::atoll(next());
    else if (a == "--blocks") blocks = std::atoi(next());
    else if (a == "--steps") steps = std::atoi(next());
    else if (a == "--sharded") sharded = true;
  }
  if (rank < 0 || ranks < 1 || rank >= ranks || id_file.empty()) {
    std::fprintf(stderr, "usage: nccl_rank --rank R --ranks S --id-file PATH [--vocab V] [--blocks N] [--steps N] [--sharded]\n");
    return 2;
  }
  int n_gpus = 0;
  CHECK_CUDA(cudaGetDeviceCount(&n_gpus));
  CHECK_CUDA(cudaSetDevice(rank % n_gpus));

  ncclUniqueId id;
  if (rank == 0) {
    CHECK_NCCL(ncclGetUniqueId(&id));
    if (!publish_id(id_file, id)) return 1;
  } else if (!wait_for_id(id_file, &id, 60)) {
    std::fprintf(stderr, "rank %d: no NCCL id in %s\n", rank, id_file.c_str());
    return 1;
  }
  ncclComm_t comm;
  CHECK_NCCL(ncclCommInitRank(&comm, ranks, id, rank));

  // This rank's vocabulary slice.
  const int64_t vb = V * rank / ranks, ve = V * (rank + 1) / ranks, Vs = ve - vb;
  const int64_t cb_first = sharded ? vb : 0, cb_rows = sharded ? Vs : V;
  const size_t n_tokens = (size_t)blocks * B;
  float* e_prev = upload(cb_rows * R, [&](size_t i) { return 0.1f * value(1, cb_first * R + i); });
  float* e_next = upload(cb_rows * R, [&](size_t i) { return 0.1f * value(2, cb_first * R + i); });
  float* w_h = upload((size_t)R * E, [&](size_t i) { return 0.03f * value(3, i); });
  float* logits = upload(n_tokens * Vs, [&](size_t i) { return 3.0f * value(4, (i / Vs) * V + vb + i % Vs); });
  float* hidden = upload(n_tokens * E, [&](size_t i) { return value(5, i); });
  int32_t* anchors = nullptr;
  int32_t *path = nullptr, *n_emitted = nullptr;
  std::vector<int32_t> h_anchors(blocks);
  for (int b = 0; b < blocks; ++b) h_anchors[b] = (int32_t)((b * 7919 + 17) % V);
  CHECK_CUDA(cudaMalloc(&anchors, blocks * 4));
  CHECK_CUDA(cudaMemcpy(anchors, h_anchors.data(), blocks * 4, cudaMemcpyHostToDevice));
  CHECK_CUDA(cudaMalloc(&path, (size_t)blocks * (B - 1) * 4));
  CHECK_CUDA(cudaMalloc(&n_emitted, blocks * 4));
  if (!e_prev || !e_next || !w_h || !logits || !hidden) return 1;

  dfsel_plan_desc desc{};
  desc.config = dfsel_config{V, E, R, K, B, 1.0f, 0.0f, blocks};
  desc.shard = dfsel_shard{rank, ranks, vb, ve};
  desc.backend = DFSEL_BACKEND_CUDA;
  desc.device = rank % n_gpus;
  desc.placement = sharded ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
  desc.e_prev = f32_matrix(e_prev, R, cb_rows, R * 4);
  desc.e_next = f32_matrix(e_next, R, cb_rows, R * 4);
  desc.w_h = f32_matrix(w_h, E, R, E * 4);
  desc.nccl_comm = comm;
  dfsel_plan* plan = nullptr;
  char msg[512];
  if (dfsel_plan_create(&desc, &plan, msg, sizeof msg) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s\n", rank, msg);
    return 1;
  }
  dfsel_inputs in{};
  in.logits = f32_matrix(logits, Vs, n_tokens, Vs * 4);
  in.hidden = f32_matrix(hidden, E, n_tokens, E * 4);
  in.anchors = anchors;
  in.n_blocks = blocks;
  dfsel_outputs out{};
  out.path = path;
  out.n_emitted = n_emitted;
  cudaStream_t st;
  CHECK_CUDA(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));

  // Capture one step in a CUDA graph; a decode loop replays it.
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const dfsel_status s = dfsel_plan_run(plan, &in, &out, st);
  CHECK_CUDA(cudaStreamEndCapture(st, &graph));
  if (s != DFSEL_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s\n", rank, dfsel_plan_last_error(plan));
    return 1;
  }
  CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  cudaEvent_t t0, t1;
  cudaEventCreate(&t0);
  cudaEventCreate(&t1);
  float best_ms = 1e9f;
  for (int i = 0; i < steps; ++i) {
    cudaEventRecord(t0, st);
    CHECK_CUDA(cudaGraphLaunch(exec, st));
    cudaEventRecord(t1, st);
    CHECK_CUDA(cudaEventSynchronize(t1));
    float ms = 0;
    cudaEventElapsedTime(&ms, t0, t1);
    best_ms = ms < best_ms ? ms : best_ms;
  }
  if (dfsel_plan_check(plan, st) != DFSEL_SUCCESS) {
    std::fprintf(stderr, "rank %d: %s\n", rank, dfsel_plan_last_error(plan));
    return 1;
  }
  std::vector<int32_t> h_path((size_t)blocks * (B - 1)), h_n(blocks);
  CHECK_CUDA(cudaMemcpy(h_path.data(), path, h_path.size() * 4, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(h_n.data(), n_emitted, h_n.size() * 4, cudaMemcpyDeviceToHost));
  uint64_t sum = 1469598103934665603ull;
  for (int32_t t : h_path) sum = (sum ^ (uint32_t)t) * 1099511628211ull;
  std::printf("rank %d/%d vocab [%lld, %lld) block 0 emitted %d:", rank, ranks, (long long)vb, (long long)ve, h_n[0]);
  for (int p = 0; p < h_n[0]; ++p) std::printf(" %d", h_path[p]);
  std::printf("\nrank %d checksum %016llx best step %.1f us\n", rank, (unsigned long long)sum, best_ms * 1000.0f);

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  dfsel_plan_destroy(plan);
  ncclCommDestroy(comm);
  for (void* p : {(void*)e_prev, (void*)e_next, (void*)w_h, (void*)logits, (void*)hidden, (void*)anchors, (void*)path, (void*)n_emitted})
    cudaFree(p);
  return 0;
}
