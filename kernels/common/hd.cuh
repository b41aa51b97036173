// DFSEL_HD marks code shared by the CPU reference and the CUDA kernels: one source of truth.
#pragma once

#if defined(__CUDACC__)
#define DFSEL_HD __host__ __device__ __forceinline__
#else
#define DFSEL_HD inline
#endif

// A loop the device compiler unrolls (its bound a compile-time constant); a plain loop on the host.
#if defined(__CUDA_ARCH__)
#define DFSEL_UNROLL _Pragma("unroll")
#else
#define DFSEL_UNROLL
#endif
