// score_lattice: merge, unary, K x K scores and the block walk in one launch (SPEC
// sections 2, 4.5, 4.6 and 5). A cluster of C = min(L, the largest cluster the device holds)
// CTAs per block; CTA rank c takes positions p = 1 + c, 1 + c + C, ... in phases
// (kernels/block/lattice_*.cuh): stage the records and copy the codebook rows, merge, find the
// rows, score, write the row and push its walk steps to rank 0, which walks the block after a
// cluster barrier. No ticket, no global fence, and nothing is left in the workspace between
// launches.
#include "kernels/score_lattice.cuh"

#include <algorithm>

#include "kernels/block/lattice_cta.cuh"
#include "kernels/block/lattice_merge.cuh"
#include "kernels/block/lattice_score.cuh"
#include "kernels/block/lattice_stamps.cuh"
#include "kernels/block/lattice_walk.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/common/agree_record.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/dispatch.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {
namespace {

// What every CTA does first: the copies' barrier, its arrival on the cluster barrier (peers
// write the walker's tables only after every CTA has arrived), the wait for the kernels
// before, and the block's anchor. A group's records say what each rank was given: in the
// walker, thread t compares rank t + 1's with rank 0's (`differs`); the verdict is met just
// before the walk, long after the loads land.
struct CtaStart {
  int32_t anchor;
  bool anchor_ok;
  bool differs;
};

template <int KP>
__device__ __forceinline__ CtaStart start_cta(const LatticeArgs& a, const LatticeShared<KP>& s, int b, int rank) {
  // The copies' barrier first: a fence here waits for nothing in flight.
  if (threadIdx.x == 0) {
    mbar_init(&s.bar[0], 1);
    mbar_init_fence();
  }
  __syncthreads();
  if (rank == 0) cluster_arrive_release();
  else cluster_arrive_relaxed();
  chain_wait();  // the records and g of the kernels before
  CtaStart c;
  c.anchor = a.anchors[b];
  c.anchor_ok = c.anchor >= 0 && c.anchor < a.rows.n_vocab;
  c.differs = false;
  if (a.rows.layout.agree_off && rank == 0 && (int)threadIdx.x + 1 < a.rows.n_ranks)
    c.differs = agree_diff(*layout_agree(a.rows.layout, (void*)a.rows.recv, b),
                           *layout_agree(a.rows.layout, rank_records(a.rows, threadIdx.x + 1), b)) != 0;
  return c;
}

// Every case: rows staged whole or R in chunks, by bulk copies or by the threads, the walker's
// tables pushed or in the workspace, greedy or sampling.
template <int KP, dfsel_type T>
__global__ void __launch_bounds__(kLatticeThreads, kLatticeMinCtas)
    lattice_kernel(LatticeArgs a, LatticeSmem sm, int cluster) {
  extern __shared__ __align__(128) uint8_t smem[];
  const LatticeShared<KP> s = carve_lattice<KP>(smem, sm);
  const int L = a.block_size - 1, b = blockIdx.x / cluster, rank = blockIdx.x % cluster;
  const CtaStart c = start_cta<KP>(a, s, b, rank);
  uint32_t phase = 0;
  bool started = false;
  for (int p = 1 + rank; p <= L; p += cluster) {
    const int d = b * L + p - 1;
    stage_records<KP>(a, sm, s, d, b, p, c.anchor, c.anchor_ok);
    __syncthreads();
    if (sm.spec && threadIdx.x == 0) mbar_arrive(&s.bar[0]);  // every copy of the phase is counted
    merge_records<KP>(a, s, p);
    __syncthreads();
    find_rows<KP>(a, sm, s, d, b, p, c.anchor, c.anchor_ok);
    __syncthreads();
    score_rows<KP, T>(sm, s, a.R, phase);
    if (!started) cluster_wait();
    started = true;
    write_row<KP>(a, sm, s, d, b, p);
    __syncthreads();  // the next position restages what write_row reads; the steps are all out
  }
  if (!started) cluster_wait();
  // Every CTA's steps are in the walker's tables (or the workspace) after this barrier, and no
  // CTA exits while a peer may still write its shared memory.
  cluster_arrive_release();
  cluster_wait();
  if (rank != 0) return;
  walk_block<KP>(a, sm, s, b, c.anchor_ok, c.differs);
}

// The common case only (LatticeLaunch::fast): every record's rows staged whole by bulk copies
// as the records land (spec), the steps and any q rows pushed to the walker, and greedy or
// sampling known (kHow). Per position: stage, merge and find in one phase, the partial
// products, then the lanes that choose each row sum its scores: three barriers where the
// general kernel has six, and none of its fallbacks in the code. Bitwise the general kernel's.
template <int KP, dfsel_type T, Choose kHow>
__global__ void __launch_bounds__(kLatticeThreads, lattice_fast_min_ctas(KP))
    lattice_fast_kernel(LatticeArgs a, LatticeSmem sm, int cluster) {
  LATTICE_STAMPS_BEGIN;
  extern __shared__ __align__(128) uint8_t smem[];
  const LatticeShared<KP> s = carve_lattice<KP>(smem, sm);
  const int L = a.block_size - 1, b = blockIdx.x / cluster, rank = blockIdx.x % cluster;
  const CtaStart c = start_cta<KP>(a, s, b, rank);
  LATTICE_STAMP(0, rank);
  uint32_t phase = 0;
  bool started = false;
  for (int p = 1 + rank; p <= L; p += cluster) {
    const int d = b * L + p - 1;
    stage_records<KP>(a, sm, s, d, b, p, c.anchor, c.anchor_ok);
    clear_slots<KP>(a, s, p);
    __syncthreads();
    LATTICE_STAMP(1, rank);
    if (threadIdx.x == 0) mbar_arrive(&s.bar[0]);
    merge_and_find<KP>(a, s, d, p, c.anchor_ok);
    __syncthreads();
    LATTICE_STAMP(2, rank);
    product_partials<KP, T, true>(sm, s, a.R, phase);
    LATTICE_STAMP(3, rank);
    if (!started) cluster_wait();
    started = true;
    finish_row<KP, kHow>(a, s, d, b, p);
    LATTICE_STAMP(4, rank);
    if (p + cluster <= L) __syncthreads();  // the next position restages what this one reads
  }
  if (!started) cluster_wait();
  cluster_arrive_release();
  cluster_wait();
  LATTICE_STAMP(5, rank);
  if (rank != 0) return;
  walk_block<KP, true>(a, sm, s, b, c.anchor_ok, c.differs);
  LATTICE_STAMP(6, rank);
}

// The instances of one K bucket and codebook type: the general kernel, then the fast one
// greedy and sampling (LatticeLaunch::fast says which a launch may take).
enum LatticePath { kGeneralPath, kGreedyPath, kSamplePath, kPaths };

template <int KP, dfsel_type T>
void* kernel_of(int path) {
  if (path == kGreedyPath) return (void*)lattice_fast_kernel<KP, T, Choose::kGreedy>;
  if (path == kSamplePath) return (void*)lattice_fast_kernel<KP, T, Choose::kSample>;
  return (void*)lattice_kernel<KP, T>;
}

size_t lowest_set_bit(uintptr_t x) { return (size_t)(x & (~x + 1)); }

// The largest power of two, up to 16, that divides the address of every codebook row the
// lattice reads. Sharded, the rows sit in the records at offsets that are multiples of 16.
size_t row_alignment(const LatticeArgs& a) {
  uintptr_t bits = a.rows.layout.sharded
                       ? (uintptr_t)a.rows.recv
                       : (uintptr_t)a.rows.e_prev | (uintptr_t)a.rows.e_next | (uintptr_t)a.rows.stride;
  bits |= 16;
  return lowest_set_bit(bits);
}

// Bytes between staged rows holding `bytes`: 32-bit fragment loads of 8 rows (64-bit for F32)
// fall in distinct banks when the pitch is an odd multiple of 16 bytes (32 for F32).
int slot_pitch(dfsel_type t, size_t bytes) {
  const size_t q = t == DFSEL_TYPE_F32 ? 32 : 16;
  size_t pitch = (bytes + q - 1) / q * q;
  if ((pitch / q) % 2 == 0) pitch += q;
  return (int)pitch;
}

// The carve for the arguments' K, R, L, S, type and row alignment.
template <int KP>
LatticeSmem lattice_smem(const LatticeArgs& a) {
  using W = LatticeWarps<KP>;
  const dfsel_type t = a.cb_type;
  const int K = a.k, R = a.R, L = a.block_size - 1, S = a.rows.n_ranks;
  const int r16 = padded_rank(R);
  const size_t align = row_alignment(a);
  LatticeSmem sm{};
  sm.L = L;
  sm.copy_bytes = (int)(a.rows.layout.sharded ? a.rows.layout.row_pad : row_bytes(t, R));
  sm.bulk = align >= 16 && sm.copy_bytes % 16 == 0;
  const size_t low = align | (size_t)sm.copy_bytes | 16;
  sm.unit = (int)lowest_set_bit(low);
  // Whole rows: what is copied, and what the last k-step reads.
  const int whole = slot_pitch(t, std::max((size_t)sm.copy_bytes, row_bytes(t, r16)));
  sm.spec = sm.bulk && (size_t)2 * S * K * whole <= kSlotBudget;
  sm.rc = r16;
  sm.pitch = whole;
  sm.n_slots = sm.spec ? 2 * S * K : 2 * KP;
  if (!sm.spec && (size_t)sm.n_slots * whole > kSlotBudget) {  // R in chunks of `granule`
    const int granule = t == DFSEL_TYPE_Q8_0 ? 256 : 16;
    int rc = granule;
    // + 16: a sharded row's last chunk also brings the padding of its slot in the record.
    while (rc + granule < r16 && (size_t)sm.n_slots * slot_pitch(t, row_bytes(t, rc + granule) + 16) <= kSlotBudget)
      rc += granule;
    sm.rc = rc;
    sm.pitch = slot_pitch(t, row_bytes(t, rc) + 16);
  }
  sm.push_choices = (size_t)L * KP * sizeof(int2) <= kPushBudget;
  sm.push_q = sm.push_choices && (size_t)L * KP * KP * 4 <= kPushBudget;
  sm.walk_chunk = (int)std::min<size_t>(L, kPushBudget / (KP * sizeof(int2)));
  size_t o = 0;
  auto take = [&](size_t bytes) {
    const size_t at = o;
    o = align16(o + bytes);
    return at;
  };
  sm.slots_off = take((size_t)sm.n_slots * sm.pitch);
  sm.gs_off = take((size_t)r16 * 4);
  sm.recs_off = take((size_t)2 * S * K * sizeof(CandRec));
  sm.keys_off = take((size_t)2 * S * K * sizeof(uint64_t));
  sm.flags_off = take((size_t)S * 4);
  sm.cand_off = take(2 * KP * sizeof(CandRec));
  sm.src_off = take(4 * KP * sizeof(int));
  sm.rowp_off = take(2 * KP * sizeof(void*));
  sm.ok_off = take((size_t)sm.n_slots);
  sm.u_off = take(KP * 4);
  sm.red_off = take((size_t)W::kKg * KP * W::kRedPitch * 4);
  sm.fin_off = take((size_t)KP * W::kRedPitch * 4);
  sm.table_off = take((size_t)(sm.push_choices ? L : sm.walk_chunk) * KP * sizeof(int2));
  sm.qtab_off = take(sm.push_q ? (size_t)L * KP * KP * 4 : 0);
  sm.used_off = take((size_t)2 * L * 4);
  sm.bar_off = take(32);  // the two mbarriers, then misc
  sm.bytes = o;
  return sm;
}

// The largest cluster up to `want` that the current device can hold for `kernel`.
int cluster_that_fits(const void* kernel, size_t smem, int want) {
  for (int c = want; c > kPortableCluster; --c)
    if (cluster_fits(kernel, kLatticeThreads, smem, c)) return c;
  return std::min(want, kPortableCluster);
}

}  // namespace

cudaError_t lattice_launch(const LatticeArgs& a, int device, LatticeLaunch* out, int max_cluster) {
  *out = LatticeLaunch{};  // smem.bytes stays 0 unless the carve is what failed
  const int L = a.block_size - 1;
  int optin = 0;
  cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e != cudaSuccess) return e;
  // The type first, so that an unknown one is refused before the carve is sized.
  return dispatch_weight_type(a.cb_type, [&](auto T) {
    return dispatch_k(a.k, [&](auto KP) {
      out->kp = KP.value;
      out->smem = lattice_smem<KP.value>(a);
      if (out->smem.bytes > (size_t)optin) return cudaErrorInvalidValue;
      // Raised for the plan's device (the caller's current device); the attributes stay.
      for (int path = 0; path < kPaths; ++path) {
        const cudaError_t r = raise_shared_memory_limit(kernel_of<KP.value, T.value>(path), out->smem.bytes);
        if (r != cudaSuccess) return r;
      }
      const int want = std::min(L, max_cluster > 0 ? std::min(max_cluster, kMaxCluster) : kMaxCluster);
      out->cluster = cluster_that_fits(kernel_of<KP.value, T.value>(kGeneralPath), out->smem.bytes, want);
      const LatticeSmem& sm = out->smem;
      out->fast = sm.spec && sm.bulk && sm.push_choices;
      for (int path = kGreedyPath; path < kPaths; ++path)
        if (!cluster_fits(kernel_of<KP.value, T.value>(path), kLatticeThreads, sm.bytes, out->cluster)) out->fast = 0;
      out->resident[0] = resident_clusters(kernel_of<KP.value, T.value>(kGeneralPath), kLatticeThreads, sm.bytes, out->cluster);
      out->resident[1] = out->fast ? resident_clusters(kernel_of<KP.value, T.value>(kGreedyPath), kLatticeThreads, sm.bytes, out->cluster) : 0;
      return cudaSuccess;
    });
  });
}

cudaError_t score_lattice(const LatticeArgs& a, const LatticeLaunch& l, cudaStream_t stream) {
  if (a.n_blocks == 0) return cudaSuccess;
  // The launch plan creation made for these arguments: the carve was sized for l.kp's instance
  // and the records for layout.n_blocks blocks.
  if (l.kp != k_bucket(a.k) || a.rows.layout.n_blocks < a.n_blocks) return cudaErrorInvalidValue;
  const unsigned grid = (unsigned)a.n_blocks * (unsigned)l.cluster;
  // Sampling with q rows the walker's table cannot hold reads them back from the workspace.
  const bool sample = a.walk.temperature > 0.0f;
  const int path = !l.fast || (sample && a.q && !l.smem.push_q) ? kGeneralPath : sample ? kSamplePath : kGreedyPath;
  return dispatch_k(l.kp, [&](auto KP) {
    return dispatch_weight_type(a.cb_type, [&](auto T) {
      cudaLaunchAttribute attr[2];
      const cudaLaunchConfig_t cfg = launch_config(dim3(grid), kLatticeThreads, l.smem.bytes, stream, l.cluster, true, attr);
      LatticeArgs args = a;
      LatticeSmem sm = l.smem;
      int cluster = l.cluster;
      void* params[] = {&args, &sm, &cluster};
      return cudaLaunchKernelExC(&cfg, kernel_of<KP.value, T.value>(path), params);
    });
  });
}

}  // namespace dfsel::cuda
