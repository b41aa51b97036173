// DFSEL_HD marks code shared by the CPU reference and the CUDA kernels: one source of truth.
#pragma once

#if defined(__CUDACC__)
#define DFSEL_HD __host__ __device__ __forceinline__
#else
#define DFSEL_HD inline
#endif
