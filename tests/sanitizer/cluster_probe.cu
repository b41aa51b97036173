// dfsel_cluster_probe CLUSTER: a kernel whose every thread reaches every barrier, launched in
// clusters of CLUSTER CTAs (1280 CTAs, more than one wave of clusters), its results checked on
// the host. scripts/gpu-check.sh runs it under compute-sanitizer's synccheck to learn which
// cluster sizes that tool can follow: a report here is the tool's, as this kernel has no
// divergence to find. Exit status: 0 the results are right (and the tool, if any, found
// nothing); 1 a CUDA error or a wrong result; 2 bad usage; 3 the device holds no such cluster.
#include <cooperative_groups.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

constexpr int kThreads = 128, kIters = 10;

// out[cta][t]: the sum over kIters rounds of the neighbour's value t + 1 + i (mod kThreads),
// each round staged in shared memory between two barriers, plus the CTA's rank in its cluster.
__global__ void __launch_bounds__(kThreads) probe(int* out) {
  __shared__ int s[kThreads];
  const int t = threadIdx.x;
  int acc = 0;
  for (int i = 0; i < kIters; ++i) {
    s[t] = t + i;
    __syncthreads();
    acc += s[(t + 1) % kThreads];
    __syncthreads();
  }
  const unsigned cta = blockIdx.y * gridDim.x + blockIdx.x;
  out[cta * kThreads + t] = acc + (int)cooperative_groups::this_cluster().block_rank();
}

int fail(const char* what, cudaError_t e) {
  std::fprintf(stderr, "dfsel_cluster_probe: %s: %s\n", what, cudaGetErrorString(e));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const int cluster = argc == 2 ? std::atoi(argv[1]) : 0;
  if (cluster < 1 || cluster > 16) {
    std::fprintf(stderr, "usage: dfsel_cluster_probe CLUSTER (1 to 16 CTAs)\n");
    return 2;
  }
  const dim3 g(256 / cluster * cluster, 5);  // whole clusters along x
  cudaError_t e = cudaSuccess;
  if (cluster > 8) e = cudaFuncSetAttribute(probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return fail("cudaFuncSetAttribute", e);
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeClusterDimension;
  attr.val.clusterDim.x = (unsigned)cluster;
  attr.val.clusterDim.y = 1;
  attr.val.clusterDim.z = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = g;
  cfg.blockDim = dim3(kThreads);
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  int fits = 0;
  e = cudaOccupancyMaxActiveClusters(&fits, probe, &cfg);
  if (e != cudaSuccess) return fail("cudaOccupancyMaxActiveClusters", e);
  if (fits < 1) {
    std::printf("dfsel_cluster_probe: the device holds no cluster of %d\n", cluster);
    return 3;
  }
  const size_t n = (size_t)g.x * g.y * kThreads;
  int* out = nullptr;
  e = cudaMalloc(&out, n * sizeof(int));
  if (e != cudaSuccess) return fail("cudaMalloc", e);
  if ((e = cudaMemset(out, 0xff, n * sizeof(int))) != cudaSuccess) return fail("cudaMemset", e);
  if ((e = cudaLaunchKernelEx(&cfg, probe, out)) != cudaSuccess) return fail("launch", e);
  if ((e = cudaDeviceSynchronize()) != cudaSuccess) return fail("the kernel", e);
  std::vector<int> got(n);
  if ((e = cudaMemcpy(got.data(), out, n * sizeof(int), cudaMemcpyDeviceToHost)) != cudaSuccess)
    return fail("cudaMemcpy", e);
  cudaFree(out);
  for (size_t i = 0; i < n; ++i) {
    const int t = (int)(i % kThreads), x = (int)(i / kThreads % g.x);
    const int want = kIters * ((t + 1) % kThreads) + kIters * (kIters - 1) / 2 + x % cluster;
    if (got[i] != want) {
      std::fprintf(stderr, "dfsel_cluster_probe: CTA %zu thread %d: %d, want %d\n", i / kThreads, t, got[i], want);
      return 1;
    }
  }
  std::printf("dfsel_cluster_probe: %u CTAs in clusters of %d: every result right\n", g.x * g.y, cluster);
  return 0;
}
