// shard_topk: per selected logits row, the top-K with global ids in candidate order
// (SPEC section 3 for the order, section 4.2 for the role).
//
// Reading the row once is the whole cost (SPEC section 7: 16 x 124160 F32 is 1.9 us of
// HBM), so the kernel streams 16-byte loads and keeps the per-element work to one max:
//   - a row is cut into `splits` chunks, one CTA each, so that a few rows still cover the GPU;
//   - a CTA folds its chunk tile by tile into a sorted top-K list in shared memory
//     (block/select.cuh); a tile whose items all lie below the list's K-th key costs one
//     float max per element and one barrier, and the next tile's loads are already in flight;
//   - each CTA of a split row writes its list to scratch and takes a ticket; the last CTA of
//     the row merges the lists with the same block routine and writes the result, so a step is
//     one launch, and it resets the ticket so that scratch stays reusable (graph replays);
//   - the grid is rows x splits and the chunks are a fixed number of vectors, so a CTA finds its
//     row and chunk without a division (a 64-bit one cost each CTA about 100 instructions).
#include "kernels/shard_topk.cuh"

#include <assert.h>

#include <algorithm>
#include <cuda/atomic>

#include "kernels/block/select.cuh"
#include "kernels/block/topk_items.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/dispatch.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {
namespace {

// The launch shape and the split rule's constants are kernels/policy.cuh's: kSelectThreads,
// kTopKVecsPerThread, kTopKCtasPerSm (the launch bounds, and the most CTAs an SM, which sizes
// the counters and forced splits), kTopKCtasBesideGate, kMinSplitVecs, kMaxSplitRecs and
// kRecsPerThread.

// Scratch: one ticket counter per split row, then the partial lists. Only rows of a launch
// of at most num_sms * kTopKCtasPerSm / 2 rows are split, so the counters' region has a fixed
// size and the lists' offset does not depend on a run's row count (runs of different sizes
// share one scratch, and every counter is back at zero after each run).
size_t parts_offset(int num_sms) {
  return ((size_t)std::max(num_sms, 1) * kTopKCtasPerSm * sizeof(unsigned) + 255) & ~(size_t)255;
}

template <dfsel_type T, int KB>
__global__ void __launch_bounds__(kSelectThreads, kTopKCtasPerSm)
    shard_topk_kernel(ShardTopKArgs a, int32_t chunk_vecs, size_t parts_at) {
  constexpr int U = kTopKVecsPerThread;
  constexpr int32_t kTile = U * kSelectThreads;  // vectors per tile
  __shared__ SelectShared<KB, U * Elem<T>::kVec> s;
  const int tid = threadIdx.x;
  const int k = a.k;
  const int sel = blockIdx.x;
  const int split = blockIdx.y;
  const int splits = gridDim.y;
  const int64_t row = map_row(a.map, sel);
  const uint8_t* p = static_cast<const uint8_t*>(a.logits) + row * (int64_t)a.row_stride;

  ChunkView c;
  c.a_off = (int)((reinterpret_cast<uintptr_t>(p) & 15u) / Elem<T>::kBytes);
  c.base = reinterpret_cast<const uint4*>(p - c.a_off * Elem<T>::kBytes);
  c.n_cols = (int32_t)a.n_cols;
  c.id_offset = (int32_t)a.id_offset;
  const int32_t nv = (c.n_cols + c.a_off + Elem<T>::kVec - 1) / Elem<T>::kVec;
  const int32_t vb = min(split * chunk_vecs, nv);  // the last chunks may be short or empty
  c.v_end = min(vb + chunk_vecs, nv);

  SelectState st = select_begin(s);
  DataItems<T, U> it;
  it.c = c;
  load_tile<T, U>(it.v, c, vb);
  for (int32_t b = vb; b < c.v_end; b += kTile) {
    uint4 next[U];
    load_tile<T, U>(next, c, b + kTile);  // in flight while this tile is folded in
    it.v0 = b + tid;
    it.mv = tile_max<T, U>(it.v);
    select_tile(s, st, it, k);
#pragma unroll
    for (int u = 0; u < U; ++u) it.v[u] = next[u];
  }
  select_flush(s, st, k);
  // The next kernel of the step may start once every CTA has folded its chunk, not before:
  // its CTAs would wait on SMs that this fold still needs.
  chain_release();

  CandRec* out = a.out + (size_t)sel * a.out_stride;
  if (splits > 1) {
    unsigned* counter = static_cast<unsigned*>(a.scratch) + sel;
    CandRec* parts = reinterpret_cast<CandRec*>(static_cast<uint8_t*>(a.scratch) + parts_at) +
                     (size_t)sel * splits * k;
    if (tid < k) {
      // Short chunks pad with {NaN, -1}, whose key is 0: below every real candidate.
      parts[split * k + tid] = tid < st.n_list ? list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid])
                                               : CandRec{__uint_as_float(kF32NaNBits), -1};
    }
    __syncthreads();
    if (tid == 0) {
      // Release: the list the barrier above ordered before it is visible with the ticket that
      // announces it. Acquire: the last CTA reads every other list after its ticket. (A full
      // fence in each writing thread, as before, cost more than this one ordered atomic.)
      const unsigned ticket =
          ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device>(*counter).fetch_add(1u, ::cuda::memory_order_acq_rel);
      s.last = ticket == (unsigned)splits - 1u;
      if (s.last) *counter = 0u;  // every split has taken its ticket: reset for the next launch
    }
    __syncthreads();
    if (!s.last) return;
    RecordItems<kRecsPerThread> recs;
    recs.load(parts, splits * k);
    st = select_begin(s);
    select_tile(s, st, recs, k);
    select_flush(s, st, k);
  }
  // Chained, the CTAs that write the result wait for the kernel before (the step's gate) first,
  // so that the grid completes after it and the next kernel's wait covers both.
  chain_wait();
  if (tid < k) out[tid] = list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid]);
}

// CTAs an SM the grid is sized for: all of them, or one fewer beside the gate (policy.cuh).
int ctas_per_sm(bool shares_sms) { return shares_sms ? kTopKCtasBesideGate : kTopKCtasPerSm; }

// Rows split into this many chunks: enough CTAs for about one resident wave, chunks no
// shorter than kMinSplitVecs 16-byte vectors of elem_bytes elements, and at most kMaxSplitRecs
// partial records per row for the last CTA.
int topk_splits(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms, bool shares_sms, int elem_bytes) {
  int64_t s = (int64_t)(num_sms > 0 ? num_sms : 1) * ctas_per_sm(shares_sms) / (n_rows > 0 ? n_rows : 1);
  s = std::min<int64_t>(s, n_cols * elem_bytes / 16 / kMinSplitVecs);
  s = std::min<int64_t>(s, kMaxSplitRecs / k);
  return (int)std::max<int64_t>(s, 1);
}

// The heuristic's split count for a call's arguments.
int topk_splits(const ShardTopKArgs& a, int num_sms) {
  return topk_splits(a.n_rows, a.k, a.n_cols, num_sms, a.shares_sms != 0, (int)row_bytes(a.type, 1));
}

}  // namespace

size_t shard_topk_scratch_bytes(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms) {
  if (n_rows <= 0 || k < 1 || k > kMaxTopK) return 0;
  // A run may select fewer rows than planned, and fewer rows split further: size the partial
  // lists for the worst row count up to n_rows. Only split rows use them, and those number at
  // most num_sms * kTopKCtasPerSm / 2, so the loop is short.
  const int64_t stop = std::min<int64_t>(n_rows, (int64_t)std::max(num_sms, 1) * kTopKCtasPerSm);
  int64_t recs = 0;
  for (int64_t n = 1; n <= stop; ++n) {
    // F32 rows split the most (4-byte elements: the most vectors a row).
    const int s = std::max(topk_splits((int32_t)n, k, n_cols, num_sms, false, 4),
                           topk_splits((int32_t)n, k, n_cols, num_sms, true, 4));
    if (s > 1) recs = std::max<int64_t>(recs, n * s * k);
  }
  return recs == 0 ? 0 : parts_offset(num_sms) + (size_t)recs * sizeof(CandRec);
}

size_t shard_topk_scratch_bytes_split(int32_t n_rows, int32_t k, int32_t splits, int num_sms) {
  return parts_offset(num_sms) + (size_t)n_rows * splits * k * sizeof(CandRec);
}

int shard_topk_splits(const ShardTopKArgs& a, int num_sms) {
  if (a.k < 1 || a.k > kMaxTopK || a.k > a.n_cols || a.n_rows < 0) return 0;
  // Ids are int32: the shard's last id must be one (INT32_MAX - 16 leaves room for a vector).
  if (a.id_offset < 0 || a.id_offset + a.n_cols > INT32_MAX - 16) return 0;
  if (a.splits <= 0) return topk_splits(a, num_sms);
  // Forced, for tuning: the last CTA's records and the counters must fit.
  if ((int64_t)a.splits * a.k > (int64_t)kSelectThreads * kRecsPerThread || a.splits > a.n_cols ||
      (a.splits > 1 && a.n_rows > std::max(num_sms, 1) * kTopKCtasPerSm))
    return 0;
  return a.splits;
}

bool shard_topk_one_wave(const ShardTopKArgs& a, int num_sms) {
  return (int64_t)a.n_rows * std::max(a.splits, 1) <= (int64_t)std::max(num_sms, 1) * ctas_per_sm(a.shares_sms != 0);
}

cudaError_t shard_topk(const ShardTopKArgs& a, int num_sms, cudaStream_t stream) {
  // The plan validated the arguments (shard_topk_splits > 0 for them) and sized the scratch.
  const int splits = a.splits > 0 ? a.splits : topk_splits(a, num_sms);
  assert(shard_topk_splits(a, num_sms) == splits && (splits == 1 || a.scratch));
  if (a.n_rows == 0) return cudaSuccess;
  const dim3 grid((unsigned)a.n_rows, (unsigned)splits);
  const size_t parts = parts_offset(num_sms);
  return dispatch_float_type(a.type, [&](auto T) {
    // Vectors of a chunk: the row's vectors (at most this many, whatever its alignment) over splits.
    constexpr int V = Elem<T.value>::kVec;
    const int64_t nv_max = (a.n_cols + 2 * V - 2) / V;
    const int32_t chunk_vecs = (int32_t)((nv_max + splits - 1) / splits);
    return dispatch_k(a.k, [&](auto KB) {
      auto* kernel = shard_topk_kernel<T.value, KB.value>;
      // Beside another kernel, ask for the most shared memory (the least L1, which streaming
      // reads do not use): an SM's split is set by the kernel that reaches it first, and the
      // default for this one (about 64 KB) leaves no room for the gate's CTA.
      if (a.shares_sms) {
        const cudaError_t e =
            cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
        if (e != cudaSuccess) return e;
      }
      cudaLaunchAttribute attr[2];
      const cudaLaunchConfig_t cfg = launch_config(grid, kSelectThreads, 0, stream, 1, a.chained != 0, attr);
      return cudaLaunchKernelEx(&cfg, kernel, a, chunk_vecs, parts);
    });
  });
}

}  // namespace dfsel::cuda
