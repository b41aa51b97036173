// shard_topk: per selected logits row, the top-K with global ids in candidate order
// (DESIGN section 2 for the order, section 3 step 1 for the role).
//
// Reading the row once is the whole cost (DESIGN section 5: 16 x 124160 F32 is 1.9 us of
// HBM), so the kernel streams 16-byte loads and keeps the per-element work to one max:
//   - a row is cut into `splits` chunks, one CTA each, so that a few rows still cover the GPU;
//   - a CTA folds its first tile with a one-pass bound (block/select_first.cuh) and later
//     tiles into its sorted top-K list (block/select.cuh): a tile whose items all lie below the
//     list's K-th key costs one float max per element and one barrier, and the next tile's
//     loads are already in flight;
//   - the CTAs of a split row publish their lists as keys and the last of them to start merges
//     the lists as soon as they land (block/row_merge.cuh), so a step is one launch and the
//     scratch is left as it was found (graph replays).
#include "kernels/shard_topk.cuh"

#include <assert.h>

#include <algorithm>

#include "kernels/block/row_merge.cuh"
#include "kernels/block/select.cuh"
#include "kernels/block/select_first.cuh"
#include "kernels/block/topk_items.cuh"
#include "kernels/dispatch.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kVecsPerThread = 4;   // 16-byte loads per thread per tile
// The launch bounds ask for 4 CTAs per SM (64 registers a thread). The grid is sized for 4
// when the top-K has the GPU alone, and for 3 when the caller runs a kernel beside it
// (ShardTopKArgs::shares_sms: the plan's gate, gate.cu), leaving each SM room for one CTA.
constexpr int kRegBoundCtas = 4;
constexpr int kCtasPerSm = kRegBoundCtas;
constexpr int64_t kMinSplitCols = 2048;  // a split chunk smaller than this costs more than it saves
constexpr int kRecsPerThread = 8;   // the merging CTA holds splits * k <= 2048 keys in registers

template <dfsel_type T, int KB>
__global__ void __launch_bounds__(kSelectThreads, kRegBoundCtas)
    shard_topk_kernel(ShardTopKArgs a, int splits) {
  constexpr int U = kVecsPerThread;
  constexpr int32_t kTile = U * kSelectThreads;  // vectors per tile
  __shared__ SelectShared<KB, U * Elem<T>::kVec> s;
  const int tid = threadIdx.x;
  const int k = a.k;
  const int sel = blockIdx.x / splits;
  const int split = blockIdx.x - sel * splits;
  const int64_t row = map_row(a.map, sel);
  const uint8_t* p = static_cast<const uint8_t*>(a.logits) + row * (int64_t)a.row_stride;

  ChunkView c;
  c.a_off = (int)((reinterpret_cast<uintptr_t>(p) & 15u) / Elem<T>::kBytes);
  c.base = reinterpret_cast<const uint4*>(p - c.a_off * Elem<T>::kBytes);
  c.n_cols = (int32_t)a.n_cols;
  c.id_offset = (int32_t)a.id_offset;
  const int32_t nv = (c.n_cols + c.a_off + Elem<T>::kVec - 1) / Elem<T>::kVec;
  const int32_t vb = (int32_t)((int64_t)nv * split / splits);
  c.v_end = (int32_t)((int64_t)nv * (split + 1) / splits);

#define STAMP(ph) if (a.stamps && tid == 0) a.stamps[blockIdx.x * 8 + (ph)] = clock64()
  STAMP(0);
  SelectState st = select_begin(s);
  DataItems<T, U> it;
  it.c = c;
#ifdef DFSEL_TOPK_REGDB
  uint4 next[U];
  load_tile<T, U>(it.v, c, vb);
  load_tile<T, U>(next, c, vb + kTile);
#else
  load_tile<T, U>(it.v, c, vb);
  prefetch_tile_l2<T>(c, vb + kTile, kTile);
#endif
  // The start ticket's round trip overlaps the loads; its answer is needed only at the end.
  if (tid == 0) s.last = splits > 1 && atomicAdd(RowSlots(a.scratch, sel, splits, k).start, 1u) == (unsigned)splits - 1u;
  bool flush = false;
  for (int32_t b = vb;;) {
    it.v0 = b + tid;
    it.mv = tile_max<T, U>(it.v);
    if (b == vb) STAMP(1);
    // The first tile takes the one-pass bound unless its items defeat it (select_first.cuh).
    if (b != vb || (a.debug & 1) || !select_first(s, st, it, k)) {
      select_tile(s, st, it, k);
      flush = true;
    }
    b += kTile;
    if (b >= c.v_end) break;
#ifdef DFSEL_TOPK_REGDB
#pragma unroll
    for (int u = 0; u < U; ++u) it.v[u] = next[u];
    load_tile<T, U>(next, c, b + kTile);
#else
    // This tile's bytes are in L2 or on their way (prefetched a tile ahead); the next tile's follow.
    load_tile<T, U>(it.v, c, b);
    prefetch_tile_l2<T>(c, b + kTile, kTile);
#endif
  }
  if (flush) select_flush(s, st, k);
  STAMP(2);

  CandRec* out = a.out + (size_t)sel * a.out_stride;
  if (splits == 1) {
    if (tid < k) out[tid] = list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid]);
    return;
  }
  RowSlots slots(a.scratch, sel, splits, k);
  if (tid < k) store_slot(slots.keys + split * k + tid, tid < st.n_list ? s.list_key[st.cur][tid] : kPadKey);
  STAMP(3);
  if (a.stamps && tid == 0) a.stamps[blockIdx.x * 8 + 7] = s.last;
  if (!s.last) return;
  if (a.debug & 2) { if (tid == 0) *slots.start = 0u; return; }

  // The merging CTA: every list of the row, as soon as it lands.
  SlotItems<kRecsPerThread> recs;
  recs.poll(slots.keys, splits, k);
  __syncthreads();  // every thread is past its last read of the list and counters above
  STAMP(4);
  st = select_begin(s);
  if (!select_first(s, st, recs, k)) {
    select_tile(s, st, recs, k);
    select_flush(s, st, k);
  }
  if (tid < k) {
    const uint64_t key = s.list_key[st.cur][tid];
    CandRec r = cand_from_key(key);
    // A key keeps neither a NaN's payload nor a zero's sign: those come from the row itself.
    const uint32_t vk = (uint32_t)(key >> 32);
    if (vk == 0u || vk == 0x80000000u) r.z = Elem<T>::exact(load_raw<T>(p, r.id - c.id_offset));
    out[tid] = r;
  }
  STAMP(5);
  recs.clear(slots.keys, splits, k);
  if (tid == 0) *slots.start = 0u;  // every CTA of the row has taken its ticket
  STAMP(6);
}

// Rows split into this many chunks: enough CTAs for about one resident wave, chunks no
// shorter than kMinSplitCols, and at most 2048 partial records per row for the last CTA.
int topk_splits(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms, bool shares_sms) {
  const int per_sm = shares_sms ? kCtasPerSm - 1 : kCtasPerSm;
  int64_t s = (int64_t)(num_sms > 0 ? num_sms : 1) * per_sm / (n_rows > 0 ? n_rows : 1);
  s = std::min<int64_t>(s, n_cols / kMinSplitCols);
  s = std::min<int64_t>(s, (int64_t)kSelectThreads * kRecsPerThread / k);
  return (int)std::max<int64_t>(s, 1);
}

}  // namespace

size_t shard_topk_scratch_bytes(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms) {
  if (n_rows <= 0 || k < 1 || k > kMaxTopK) return 0;
  // A run may select fewer rows than planned, and fewer rows split further: size the slots for
  // the worst row count up to n_rows. Splits fall as rows grow, so the loop ends early.
  int64_t words = 0;
  for (int64_t n = 1; n <= n_rows; ++n) {
    const int s = std::max(topk_splits((int32_t)n, k, n_cols, num_sms, false),
                           topk_splits((int32_t)n, k, n_cols, num_sms, true));
    if (s <= 1) break;
    words = std::max<int64_t>(words, n * row_merge_words(s, k));
  }
  return (size_t)words * sizeof(uint64_t);
}

size_t shard_topk_scratch_bytes_split(int32_t n_rows, int32_t k, int32_t splits, int) {
  return splits > 1 ? (size_t)n_rows * row_merge_words(splits, k) * sizeof(uint64_t) : 0;
}

int shard_topk_splits(const ShardTopKArgs& a, int num_sms) {
  if (a.k < 1 || a.k > kMaxTopK || a.k > a.n_cols || a.n_rows < 0) return 0;
  // Ids are int32: the shard's last id must be one (INT32_MAX - 16 leaves room for a vector).
  if (a.id_offset < 0 || a.id_offset + a.n_cols > INT32_MAX - 16) return 0;
  if (a.splits <= 0) return topk_splits(a.n_rows, a.k, a.n_cols, num_sms, a.shares_sms != 0);
  // Forced, for tuning: the merging CTA's keys must fit.
  if ((int64_t)a.splits * a.k > (int64_t)kSelectThreads * kRecsPerThread || a.splits > a.n_cols) return 0;
  return a.splits;
}

cudaError_t shard_topk(const ShardTopKArgs& a, int num_sms, cudaStream_t stream) {
  // The plan validated the arguments (shard_topk_splits > 0 for them) and sized the scratch.
  const int splits = a.splits > 0 ? a.splits : topk_splits(a.n_rows, a.k, a.n_cols, num_sms, a.shares_sms != 0);
  assert(shard_topk_splits(a, num_sms) == splits && (splits == 1 || a.scratch));
  if (a.n_rows == 0) return cudaSuccess;
  const unsigned grid = (unsigned)a.n_rows * (unsigned)splits;
  dispatch_float_type(a.type, [&](auto T) {
    dispatch_k(a.k, [&](auto KB) {
      shard_topk_kernel<T.value, KB.value><<<grid, kSelectThreads, 0, stream>>>(a, splits);
    });
  });
  return cudaGetLastError();
}

}  // namespace dfsel::cuda
