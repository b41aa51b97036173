// The kernels of one step as a chain (programmatic dependent launch, sm_90): a kernel launched
// `chained` may start while the kernel before it in the stream is still running, so that its
// set-up (barriers, parameters, its first loads) runs under the other's tail.
//
// The rule every chained kernel keeps: before chain_wait it reads only the step's inputs, which
// were complete before the step's first kernel started (that one is launched normally), and it
// writes only memory that no earlier kernel of the step reads or writes (its own scratch).
// chain_wait returns once the previous kernel has completed and its writes are visible; in a
// kernel launched normally it returns at once. Every chained kernel calls it before it exits,
// so that its completion implies its predecessor's: the kernel after it then waits for the
// whole chain.
#pragma once

namespace dfsel::cuda {

// Lets the next kernel in the stream, if it is chained, start its CTAs once every CTA of this
// one has called this (or exited). It does not make anything visible to that kernel.
__device__ __forceinline__ void chain_release() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// Waits until the previous kernel in the stream has completed and its writes are visible.
__device__ __forceinline__ void chain_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

}  // namespace dfsel::cuda
