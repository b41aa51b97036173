// Host side of thread-block clusters, shared by the launchers that use them (gate, lattice):
// a launch configuration with a 1-D cluster, and whether a cluster fits on the current device.
#pragma once

#include <cuda_runtime.h>

namespace dfsel::cuda {

constexpr int kPortableCluster = 8;  // every sm_90 part launches clusters of 8

// grid CTAs of `threads` in clusters of `cluster` along x; attr must outlive the launch.
inline cudaLaunchConfig_t cluster_config(dim3 grid, int threads, size_t smem, int cluster, cudaStream_t stream,
                                         cudaLaunchAttribute (&attr)[1]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = (unsigned)cluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cfg;
}

// Whether the current device can hold one cluster of `cluster` CTAs of `kernel` (threads, smem
// dynamic shared memory, already allowed on the kernel). Sizes above 8 are non-portable and
// not on every part (a MIG slice may hold fewer SMs a GPC); they are asked for here. A failed
// query is a no.
inline bool cluster_fits(const void* kernel, int threads, size_t smem, int cluster) {
  if (cluster <= kPortableCluster) return true;
  if (cudaFuncSetAttribute(kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  cudaLaunchAttribute attr[1];
  const cudaLaunchConfig_t cfg = cluster_config(dim3((unsigned)cluster), threads, smem, cluster, nullptr, attr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return n >= 1;
}

}  // namespace dfsel::cuda
