// The top-K's block layer (docs/topk.md): a CTA keeps a sorted list of its K best candidates in
// shared memory and folds in one tile of items at a time (topk_order.cuh: the 64-bit cand_key,
// larger is better, keys of distinct ids never tie).
//
// Folding a tile costs one barrier when no item of the tile beats the K-th key so far (the
// common case once the list is warm), and little more when a few do: they are appended to a
// candidate buffer that is merged into the list only now and then. When many threads hold
// items above the K-th key (a cold list, a rising row) the candidates are narrowed with a
// bound before they are ranked: the items are split into G groups; the K-th largest group
// maximum t is a key that K distinct items reach, so only items >= t can be in the top-K.
// Candidates then lie in the K groups whose maximum is >= t, at most K * (kThreads / G) * M of
// them with M items per thread; G >= 4K keeps that within 64 * M, the buffer's size, for every
// input (ties, sorted rows, NaN) with no overflow path. Groups interleave the threads
// (group = tid % G) so that the lowest ids, which win among equal values, fall into distinct
// groups: an all-equal or all -inf chunk then yields about 4K candidates, not a whole tile.
#pragma once

#include <stdint.h>

#include "topk_order.cuh"
#include "topk_policy.cuh"

namespace DFSEL_TOPK_NAMESPACE {

// Up to this many threads with an item above the K-th key: take all their items above it as
// candidates without the group bound (at most 64 * M, the buffer's size).
constexpr int kDirectThreads = 64;

// 4K groups, at most one per thread (then K * (kThreads / G) * M <= 64 * M still holds
// for every K <= 64 when kThreads >= 64).
template <int KB>
__host__ __device__ constexpr int select_groups() {
  return 4 * KB < kThreads ? 4 * KB : kThreads;
}

// KB: the compile-time bound on k; M: items per thread in one tile.
template <int KB, int M>
struct SelectShared {
  static constexpr int kCap = 64 * M;
  uint64_t cand_key[kCap];
  float cand_z[kCap];
  uint64_t list_key[2][KB];  // double-buffered: a merge reads one and writes the other
  float list_z[2][KB];
  uint64_t thread_max[kThreads];
  uint64_t group_max[select_groups<KB>()];
  uint64_t bound;
  int n_cand[2];  // appends count in n_cand[cb]; a merge resets the other one and flips cb
  int last;       // set when this CTA is the last of its row to finish
};

// Per-thread copy of the list's state; every thread of the CTA holds the same values.
struct SelectState {
  uint64_t tau;  // key of the K-th entry, 0 while the list holds fewer than k entries
  int n_list;
  int cur;       // list buffer
  int cb;        // candidate counter
  int pend;      // bound on the pending candidates (their count in shared memory may still be
                 // rising while threads decide, so decisions use this uniform bound instead)
};

// Key 0 lies below every real key (a real key's id half is at least 2^31), so it doubles as
// "no item" and as the bound of an empty list. The caller must put a barrier between this and
// any earlier use of s (select_tile starts with one).
template <int KB, int M>
__device__ __forceinline__ SelectState select_begin(SelectShared<KB, M>& s) {
  if (threadIdx.x == 0) s.n_cand[0] = s.n_cand[1] = 0;
  return SelectState{0ull, 0, 0, 0, 0};
}

// Smallest float value an item can have and still reach a key above lo; all_values is set
// when lo is NaN-level (value key 0), where any item, NaN included, may still beat it.
__device__ __forceinline__ float key_value_floor(uint64_t lo, bool* all_values) {
  const uint32_t vk = (uint32_t)(lo >> 32);
  *all_values = vk == 0u;
  // value_bits_of_key, written out: through the call the compiler lays out the fold's test
  // differently (its cubin changes), so the expression stays inline here.
  return __uint_as_float((vk & 0x80000000u) ? (vk & 0x7fffffffu) : ~vk);
}

// Entries of the descending list above key.
__device__ __forceinline__ int count_above(const uint64_t* list, int n, uint64_t key) {
  int lo = 0, hi = n;
  while (lo < hi) {
    const int mid = (lo + hi) >> 1;
    if (list[mid] > key) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// rank plus the count of keys[0..n) above key, or any value >= k once it reaches k. The loads
// go eight at a time with one test per eight, so that they are in flight together rather than
// each waiting on the previous compare (a loop that tests every key runs at shared-memory
// latency, about a microsecond per 50 keys).
__device__ __forceinline__ int rank_among(const uint64_t* keys, int n, uint64_t key, int rank, int k) {
  int j = 0;
  for (; j + 8 <= n && rank < k; j += 8) {
    int c = 0;
#pragma unroll
    for (int q = 0; q < 8; ++q) c += keys[j + q] > key ? 1 : 0;
    rank += c;
  }
  for (; j < n && rank < k; ++j) rank += keys[j] > key ? 1 : 0;
  return rank;
}

// Merges the nc pending candidates into the list: ranks every list entry and candidate among
// both sets (keys are distinct, so a rank is the count of keys above it) and writes the k best,
// in order, into the other list buffer. nc is s.n_cand[st.cb] read after a barrier that
// follows the last append. One barrier; appends may resume right after it.
template <int KB, int M>
__device__ void select_merge(SelectShared<KB, M>& s, SelectState& st, int k, int nc) {
  nc = min(nc, SelectShared<KB, M>::kCap);
  // The other counter was last read before the previous merge's barrier: free to reset.
  if (threadIdx.x == 0) s.n_cand[st.cb ^ 1] = 0;
  const int nl = st.n_list;
  const uint64_t* lk = s.list_key[st.cur];
  const float* lz = s.list_z[st.cur];
  uint64_t* ok = s.list_key[st.cur ^ 1];
  float* oz = s.list_z[st.cur ^ 1];
  for (int e = threadIdx.x; e < nl + nc; e += kThreads) {
    uint64_t key;
    float z;
    int rank;
    if (e < nl) {
      key = lk[e];
      z = lz[e];
      rank = e;
    } else {
      key = s.cand_key[e - nl];
      z = s.cand_z[e - nl];
      rank = count_above(lk, nl, key);
    }
    rank = rank_among(s.cand_key, nc, key, rank, k);
    if (rank < k) {
      ok[rank] = key;
      oz[rank] = z;
    }
  }
  __syncthreads();  // the new list is complete; the candidate buffer is free again
  st.n_list = min(k, nl + nc);
  st.cur ^= 1;
  st.cb ^= 1;
  st.pend = 0;
  st.tau = st.n_list == k ? ok[k - 1] : 0ull;
}

// Folds one tile into the candidate set. Items provides, per thread:
//   bool maybe_above(uint64_t lo)   cheap test; false only if no item has a key above lo
//   uint64_t max_key()              the exact largest key of the thread's items, 0 if none
//   void for_each_above(uint64_t lo, F f)   f(key, z) for each item with key > lo
// Every thread of the CTA must call it (it synchronises the block); select_flush completes
// the list after the last tile.
template <int KB, int M, class Items>
__device__ void select_tile(SelectShared<KB, M>& s, SelectState& st, const Items& items, int k) {
  constexpr int G = select_groups<KB>();
  constexpr int kCap = SelectShared<KB, M>::kCap;
  const int tid = threadIdx.x;
  const uint64_t mk = items.maybe_above(st.tau) ? items.max_key() : 0ull;
  // The barrier also completes the appends of earlier tiles: a merge right after it reads a
  // settled count (no thread appends before the merge's own barrier).
  const int n_above = __syncthreads_count(mk > st.tau);
  if (n_above == 0) return;
  const bool grouped = n_above > kDirectThreads;
  // Pending candidates only had to beat the K-th key of the last merge; they are merged when
  // the bound is needed or the buffer might not hold this tile's, so that a tile with a few
  // new candidates costs one barrier.
  if (st.pend > 0 && (grouped || st.pend + n_above * M > kCap)) select_merge(s, st, k, s.n_cand[st.cb]);
  uint64_t lo = st.tau;
  if (grouped) {
    // Threads at or below tau cannot contribute: leaving them out of the groups keeps the
    // bound valid (each group maximum is still a real item) and only raises it.
    s.thread_max[tid] = mk > lo ? mk : 0ull;
    if (tid == 0) s.bound = 0ull;
    __syncthreads();
    if (tid < G) {
      uint64_t m = 0ull;
#pragma unroll
      for (int q = 0; q < kThreads / G; ++q) m = max(m, s.thread_max[tid + q * G]);
      s.group_max[tid] = m;
    }
    __syncthreads();
    if (tid < G) {
      const uint64_t my = s.group_max[tid];
      int r = 0;
#pragma unroll 8
      for (int g = 0; g < G; ++g) r += s.group_max[g] > my ? 1 : 0;
      if (r == k - 1 && my != 0ull) s.bound = my;  // fewer than k non-empty groups: no bound
    }
    __syncthreads();
    const uint64_t b = s.bound;
    if (b != 0ull && b - 1 > lo) lo = b - 1;  // candidates: key >= b
  }
  // At most kCap appends: grouped, the buffer is empty and the bound allows 64 * M; direct,
  // n_above * M fit beside the pending ones (checked above).
  st.pend += grouped ? kCap : n_above * M;
  if (mk > lo) {
    int* counter = &s.n_cand[st.cb];
    items.for_each_above(lo, [&](uint64_t key, float z) {
      const int slot = atomicAdd(counter, 1);
      if (slot < kCap) {  // always true by the bounds above
        s.cand_key[slot] = key;
        s.cand_z[slot] = z;
      }
    });
  }
}

// After the last tile: merges what is pending. On return the list holds the top
// min(k, items seen) entries, in order, in s.list_key[st.cur] / s.list_z[st.cur].
template <int KB, int M>
__device__ void select_flush(SelectShared<KB, M>& s, SelectState& st, int k) {
  __syncthreads();  // the last appends are complete
  const int nc = s.n_cand[st.cb];
  if (nc > 0) select_merge(s, st, k, nc);
}

// Items of the last CTA of a split row: the partial lists of all splits, read from scratch,
// kThreads * R records at most.
template <int R>
struct RecordItems {
  uint64_t key[R];
  float z[R];

  __device__ __forceinline__ void load(const Rec* recs, int n) {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int r = threadIdx.x + i * kThreads;
      key[i] = 0ull;
      z[i] = 0.0f;
      if (r < n) {
        // .cg: the lists were written by other CTAs; read them from L2, not a stale L1 line.
        const uint2 raw = __ldcg(reinterpret_cast<const uint2*>(recs + r));
        Rec c;
        c.z = __uint_as_float(raw.x);
        c.id = (int32_t)raw.y;
        key[i] = cand_key(c);  // padding records {NaN, -1} have key 0: never selected
        z[i] = c.z;
      }
    }
  }
  __device__ __forceinline__ bool maybe_above(uint64_t) const { return true; }
  __device__ __forceinline__ uint64_t max_key() const {
    uint64_t m = 0ull;
#pragma unroll
    for (int i = 0; i < R; ++i) m = max(m, key[i]);
    return m;
  }
  template <class F>
  __device__ __forceinline__ void for_each_above(uint64_t lo, F f) const {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (key[i] > lo) f(key[i], z[i]);
  }
};

}  // namespace DFSEL_TOPK_NAMESPACE
