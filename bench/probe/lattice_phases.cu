// dfsel_lattice_phases: where the lattice's fast instance spends its cycles, phase by phase.
// Builds its own copy of the lattice kernels with DFSEL_LATTICE_STAMPS
// (kernels/block/lattice_stamps.cuh) and runs ScoreLattice's one-rank replicated shape
// (K 16, R 256, BF16 codebooks, V 248320, blocks of 16) from records and anchors rotated
// through enough copies that the codebook rows come from HBM, as a CUDA graph of back-to-back
// launches. Prints, per cluster rank, the mean cycles from a CTA's entry to each stamp:
//   0 start   barrier set-up, cluster arrive, wait for the kernel before, anchor
//   1 staged  records loaded, their rows' copies issued, g loaded (one barrier)
//   2 merged  ranks, unary and row slots (one barrier)
//   3 product rows landed, tensor-core partials (one barrier)
//   4 steps   sums, choices, steps and q rows pushed, scores written
//   5 cluster every CTA's steps in the walker
//   6 walked  the walk and its writes (the walker only)
//   dfsel_lattice_phases [blocks] [temperature] [launches]
#define DFSEL_LATTICE_STAMPS 1
#include "kernels/score_lattice.cu"

#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

#define CHECK(x)                                                               \
  do {                                                                         \
    const cudaError_t e_ = (x);                                                \
    if (e_ != cudaSuccess) {                                                   \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));            \
      std::exit(1);                                                            \
    }                                                                          \
  } while (0)

__global__ void fill_rows(uint16_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)i * 2654435761u ^ seed;
    x ^= x >> 15;
    x *= 2246822519u;
    x ^= x >> 13;
    p[i] = (uint16_t)(0x3c00u | (x & 0x03ffu)) ^ (uint16_t)((x >> 16) & 0x8000u);  // bf16 in +-[0.0078, 0.0156)
  }
}

}  // namespace

int main(int argc, char** argv) {
  using namespace dfsel;
  const int blocks = argc > 1 ? std::atoi(argv[1]) : 1;
  const float temperature = argc > 2 ? (float)std::atof(argv[2]) : 0.0f;
  const int launches = argc > 3 ? std::atoi(argv[3]) : 2000;
  constexpr int K = 16, R = 256, block = 16, L = block - 1;
  constexpr int64_t V = 248320;
  const int rows = blocks * L;
  const size_t row_b = (size_t)R * 2;
  const ExchangeLayout l = make_exchange_layout(K, blocks, block, false, row_b, false);
  const int copies = 256;
  uint8_t *recv, *ep, *en;
  float *g, *q;
  int32_t *an, *path, *n_emitted, *err;
  CHECK(cudaMalloc(&recv, l.bytes * copies));
  CHECK(cudaMalloc(&ep, (size_t)V * row_b));
  CHECK(cudaMalloc(&en, (size_t)V * row_b));
  CHECK(cudaMalloc(&g, (size_t)rows * R * 4));
  CHECK(cudaMalloc(&q, (size_t)rows * K * 4));
  CHECK(cudaMalloc(&an, (size_t)blocks * 4 * copies));
  CHECK(cudaMalloc(&path, (size_t)rows * 4));
  CHECK(cudaMalloc(&n_emitted, (size_t)blocks * 4));
  CHECK(cudaMalloc(&err, 8));
  CHECK(cudaMemset(recv, 0, l.bytes * copies));
  CHECK(cudaMemset(err, 0, 8));
  CHECK(cudaMemset(g, 0, (size_t)rows * R * 4));
  fill_rows<<<1024, 256>>>((uint16_t*)ep, (size_t)V * R, 3);
  fill_rows<<<1024, 256>>>((uint16_t*)en, (size_t)V * R, 4);
  std::mt19937_64 rng(7);
  std::vector<int32_t> anchors((size_t)blocks * copies);
  for (auto& x : anchors) x = (int32_t)(rng() % V);
  CHECK(cudaMemcpy(an, anchors.data(), anchors.size() * 4, cudaMemcpyHostToDevice));
  std::vector<CandRec> cands((size_t)rows * K);
  for (int c = 0; c < copies; ++c) {
    for (int d = 0; d < rows; ++d)
      for (int j = 0; j < K; ++j) cands[(size_t)d * K + j] = CandRec{10.0f - j * 0.25f, (int32_t)(rng() % V)};
    CHECK(cudaMemcpy(recv + (size_t)c * l.bytes, cands.data(), cands.size() * sizeof(CandRec), cudaMemcpyHostToDevice));
  }
  dfsel::cuda::LatticeArgs a{};
  a.rows = RowSource{recv, l, 1, ep, en, row_b, V};
  a.k = K;
  a.R = R;
  a.block_size = block;
  a.n_blocks = blocks;
  a.transform = Transform{1.0f, 0.0f};
  a.cb_type = DFSEL_TYPE_BF16;
  a.g = g;
  a.walk = WalkParams{temperature, temperature > 0.0f ? 0.05f : 0.0f, 11};
  a.q = temperature > 0.0f ? q : nullptr;
  a.path = path;
  a.n_emitted = n_emitted;
  a.error = err;
  dfsel::cuda::LatticeLaunch launch{};
  CHECK(dfsel::cuda::lattice_launch(a, 0, &launch));
  if (!launch.fast) {
    std::fprintf(stderr, "the fast instance does not run this shape\n");
    return 1;
  }
  cudaStream_t st;
  CHECK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  CHECK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  for (int i = 0; i < launches; ++i) {
    a.rows.recv = recv + (size_t)(i % copies) * l.bytes;
    a.anchors = an + (size_t)(i % copies) * blocks;
    CHECK(dfsel::cuda::score_lattice(a, launch, st));
  }
  CHECK(cudaStreamEndCapture(st, &graph));
  CHECK(cudaGraphInstantiate(&exec, graph, 0));
  CHECK(cudaGraphLaunch(exec, st));  // warm-up
  CHECK(cudaStreamSynchronize(st));
  unsigned long long zero[16][kLatticeStamps] = {};
  CHECK(cudaMemcpyToSymbol(g_lattice_stamps, zero, sizeof(zero)));
  cudaEvent_t t0, t1;
  CHECK(cudaEventCreate(&t0));
  CHECK(cudaEventCreate(&t1));
  CHECK(cudaEventRecord(t0, st));
  CHECK(cudaGraphLaunch(exec, st));
  CHECK(cudaEventRecord(t1, st));
  CHECK(cudaStreamSynchronize(st));
  float ms = 0;
  CHECK(cudaEventElapsedTime(&ms, t0, t1));
  unsigned long long got[16][kLatticeStamps];
  CHECK(cudaMemcpyFromSymbol(got, g_lattice_stamps, sizeof(got)));
  std::printf("blocks %d, T %.2f, cluster %d, %d launches: %.3f us a launch (with stamps)\n", blocks, temperature,
              launch.cluster, launches, ms * 1e3 / launches);
  const char* names[] = {"start", "staged", "merged", "product", "steps", "cluster", "walked"};
  std::printf("rank");
  for (const char* n : names) std::printf(" %8s", n);
  std::printf("\n");
  const double per = (double)launches * blocks;
  for (int r = 0; r < launch.cluster && r < 16; ++r) {
    std::printf("%4d", r);
    for (int i = 0; i < 7; ++i) std::printf(" %8.0f", (double)got[r][i] / per);
    std::printf("\n");
  }
  return 0;
}
