// score_lattice: merge, unary, K x K scores and the block walk in one launch (SPEC
// sections 2, 4.5, 4.6 and 5). One CTA per drafted row d = (block b, position p), in
// phases (kernels/block/lattice_*.cuh): stage and merge the records, find the codebook rows,
// score, write the row and its walk steps; the last CTA of a block walks it.
#include "kernels/score_lattice.cuh"

#include <assert.h>

#include "kernels/block/lattice_cta.cuh"
#include "kernels/block/lattice_merge.cuh"
#include "kernels/block/lattice_score.cuh"
#include "kernels/block/lattice_walk.cuh"
#include "kernels/dispatch.cuh"

namespace dfsel::cuda {
namespace {

template <int KP, dfsel_type T>
__global__ void __launch_bounds__(kLatticeThreads, 2) lattice_kernel(LatticeArgs a, LatticeSmem sm) {
  extern __shared__ __align__(16) uint8_t smem[];
  const LatticeShared<KP> s = carve_lattice<KP>(smem, sm);
  const int L = a.block_size - 1;
  const int d = blockIdx.x, b = d / L, p = d % L + 1;
  const int32_t anchor = a.anchors[b];
  const bool anchor_ok = anchor >= 0 && anchor < a.rows.n_vocab;

  stage_records<KP>(a, s, d, p);
  __syncthreads();
  merge_records<KP>(a, s, b, p, anchor_ok);
  __syncthreads();
  find_rows<KP>(a, s, d, b, p, anchor_ok);
  __syncthreads();
  score_rows<KP, T>(s, sm, a.R);
  write_row<KP>(a, s, d, b, p);
  if (last_of_block(a, s.misc + 1, b)) walk_block(a, s.region, b, anchor_ok);
}

template <int KP, dfsel_type T>
void* kernel_of() {
  return (void*)lattice_kernel<KP, T>;
}

// The largest power of two, up to 16, that divides the address of every codebook row the
// lattice reads. Sharded, the rows sit in the records at offsets that are multiples of 16.
size_t row_alignment(const LatticeArgs& a) {
  uintptr_t bits = a.rows.layout.sharded
                       ? (uintptr_t)a.rows.recv
                       : (uintptr_t)a.rows.e_prev | (uintptr_t)a.rows.e_next | (uintptr_t)a.rows.stride;
  bits |= 16;
  return (size_t)(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace

cudaError_t lattice_launch(const LatticeArgs& a, int device, LatticeLaunch* out) {
  // Wide loads: load4 reads 4 elements at once (16 bytes for F32, 8 for F16/BF16, 2-byte
  // aligned blocks for Q8_0); 2-byte types go 8 elements (16 bytes) at once when R allows.
  const size_t align = row_alignment(a);
  const bool two_byte = a.cb_type == DFSEL_TYPE_F16 || a.cb_type == DFSEL_TYPE_BF16;
  const bool vec = a.R % 4 == 0 && align >= (a.cb_type == DFSEL_TYPE_F32 ? 16u : two_byte ? 8u : 2u);
  const bool vec8 = vec && two_byte && a.R % 8 == 0 && align >= 16;
  const int L = a.block_size - 1;
  int optin = 0;
  cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  return dispatch_k(a.k, [&](auto KP) {
    out->kp = KP.value;
    out->smem = lattice_smem<KP.value>(a.k, a.R, L, a.rows.n_ranks, vec, vec8);
    if (out->smem.bytes > (size_t)optin) return cudaErrorInvalidValue;
    return dispatch_weight_type(a.cb_type, [&](auto T) {
      // Raised for the plan's device (the caller's current device) once; the attribute stays.
      if (out->smem.bytes <= 48 * 1024) return cudaSuccess;
      return cudaFuncSetAttribute(kernel_of<KP.value, T.value>(), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                  (int)out->smem.bytes);
    });
  });
}

cudaError_t score_lattice(const LatticeArgs& a, const LatticeLaunch& l, cudaStream_t stream) {
  if (a.n_blocks == 0) return cudaSuccess;
  assert(l.kp == k_bucket(a.k) && a.rows.layout.n_blocks >= a.n_blocks);
  const unsigned grid = (unsigned)a.n_blocks * (unsigned)(a.block_size - 1);
  dispatch_k(a.k, [&](auto KP) {
    dispatch_weight_type(a.cb_type, [&](auto T) {
      lattice_kernel<KP.value, T.value><<<grid, kLatticeThreads, l.smem.bytes, stream>>>(a, l.smem);
    });
  });
  return cudaGetLastError();
}

}  // namespace dfsel::cuda
