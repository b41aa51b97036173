// Host side of the launches of a step, shared by the launchers: a launch configuration (a 1-D
// thread-block cluster, a chained launch), and whether a cluster fits on the current device.
#pragma once

#include <cuda_runtime.h>

#include <mutex>

namespace dfsel::cuda {

constexpr int kPortableCluster = 8;  // every sm_90 part launches clusters of 8
constexpr int kMaxCluster = 16;      // the largest cluster sm_90 launches (non-portable above 8)

// grid CTAs of `threads`, in clusters of `cluster` along x (1: no cluster); chained: the
// launch may start while the previous kernel in the stream runs (kernels/common/chain.cuh says
// what the kernel must do then). attr must outlive the launch.
inline cudaLaunchConfig_t launch_config(dim3 grid, int threads, size_t smem, cudaStream_t stream, int cluster,
                                        bool chained, cudaLaunchAttribute (&attr)[2]) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = grid;
  cfg.blockDim = dim3((unsigned)threads);
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 0;
  if (cluster > 1) {
    cudaLaunchAttribute& a = attr[cfg.numAttrs++];
    a.id = cudaLaunchAttributeClusterDimension;
    a.val.clusterDim.x = (unsigned)cluster;
    a.val.clusterDim.y = 1;
    a.val.clusterDim.z = 1;
  }
  if (chained) {
    cudaLaunchAttribute& a = attr[cfg.numAttrs++];
    a.id = cudaLaunchAttributeProgrammaticStreamSerialization;
    a.val.programmaticStreamSerializationAllowed = 1;
  }
  return cfg;
}

// Lets `kernel` take at least `bytes` of dynamic shared memory on the current device: raised,
// never lowered, so that a later plan with a smaller carve leaves an earlier plan's launches
// their limit. The read and the raise are one step under a lock, as plans may be made on
// several threads at once (the attribute is the process's, per device).
inline cudaError_t raise_shared_memory_limit(const void* kernel, size_t bytes) {
  static std::mutex lock;
  std::lock_guard<std::mutex> hold(lock);
  cudaFuncAttributes fa{};
  const cudaError_t e = cudaFuncGetAttributes(&fa, kernel);
  if (e != cudaSuccess || (size_t)fa.maxDynamicSharedSizeBytes >= bytes) return e;
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// How many clusters of `cluster` CTAs of `kernel` (threads, smem dynamic shared memory, already
// allowed on the kernel; a size above 8 already allowed as non-portable) the current device
// holds at once; 0 when the query fails.
inline int resident_clusters(const void* kernel, int threads, size_t smem, int cluster) {
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)cluster), threads, smem, nullptr, cluster, false, attr);
  int n = 0;
  if (cudaOccupancyMaxActiveClusters(&n, kernel, &cfg) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return n;
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
  return resident_clusters(kernel, threads, smem, cluster) >= 1;
}

}  // namespace dfsel::cuda
