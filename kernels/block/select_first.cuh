// The first tile a CTA folds, when its top-K list is still empty: the case every CTA of a
// decode step is in, since a few rows over the whole GPU leave each CTA one tile (and the
// merging CTA's partial lists are one tile too). select_tile's general path ranks 4K group
// maxima over several barriers; this one needs two barriers, a few shuffles and one float
// compare per item.
//
// The bound: split the CTA's items into G >= k disjoint groups (group = tid % G) and take t, the
// least of the G group maxima. Each group holds an item at or above t, so at least k items reach
// t and the top-K lies among the items at or above t. On real logits that is about G ln G items.
// The first bound compares value keys only (value_key, 32 bits: one float compare an item);
// when it leaves more than kRankDirect candidates, the same bound on their exact 64-bit keys
// (distinct, so ties cannot inflate it) narrows them once more before they are ranked. An input
// that leaves more than half the buffer after the first bound (all values equal, one group
// starved of large values) falls back to select_tile, which is exact for every input.
#pragma once

#include <stdint.h>

#include "kernels/block/select.cuh"

namespace dfsel::cuda {

// Candidates ranked directly against each other (about n^2 / 2 compares in all).
constexpr int kRankDirect = 96;

// Groups for k: the least power of two >= k (1 for k = 1: the bound is then the CTA's maximum).
__device__ __forceinline__ int first_tile_groups(int k) {
  int g = 1;
  while (g < k) g <<= 1;
  return g;
}

// The least of the G group maxima (group = tid % G) of m, the same in every thread. Uses
// s.thread_max as 8 warps x 32 lanes of partial maxima; one barrier.
template <class Key, int KB, int M>
__device__ __forceinline__ Key least_group_max(SelectShared<KB, M>& s, Key m, int g) {
  static_assert(kSelectThreads == 256 && KB <= 64, "groups are laid out for 8 warps and k <= 64");
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // Lanes l and l ^ (G, 2G, ...) of a warp hold the same group: fold them first.
  for (int o = g; o < 32; o <<= 1) m = max(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane < g) s.thread_max[warp * 32 + lane] = m;
  __syncthreads();
  Key t = ~Key(0);
  if (lane < g) {
    // Group (32 w + lane) % G: for G <= 32 every warp holds part of group `lane`; for G = 64
    // the even warps hold group lane, the odd ones group lane + 32.
    Key even = 0, odd = 0;
#pragma unroll
    for (int w = 0; w < kSelectThreads / 32; ++w) {
      const Key v = (Key)s.thread_max[w * 32 + lane];
      if (g <= 32 || (w & 1) == 0) even = max(even, v);
      else odd = max(odd, v);
    }
    t = g <= 32 ? even : min(even, odd);
  }
  for (int o = 1; o < g && o < 32; o <<= 1) t = min(t, __shfl_xor_sync(0xffffffffu, t, o));
  return __shfl_sync(0xffffffffu, t, 0);
}

// Writes the k best of the n candidate keys[] / zs[] into list 0 (distinct keys: an entry's rank
// is the count of keys above it).
template <int KB, int M>
__device__ __forceinline__ void rank_into_list(SelectShared<KB, M>& s, const uint64_t* keys, const float* zs, int n,
                                               int k) {
  for (int e = threadIdx.x; e < n; e += kSelectThreads) {
    const uint64_t key = keys[e];
    const int rank = rank_among(keys, n, key, 0, k);
    if (rank < k) {
      s.list_key[0][rank] = key;
      s.list_z[0][rank] = zs[e];
    }
  }
}

// Folds the CTA's first tile into its empty list (st from select_begin). Items provide
// max_value_key() (value_key of the thread's largest item, 0 if none) and for_each_above.
// Returns false, having changed nothing the caller relies on, when the items defeat the bound:
// the caller then folds them with select_tile and completes the list with select_flush.
template <int KB, int M, class Items>
__device__ bool select_first(SelectShared<KB, M>& s, SelectState& st, const Items& items, int k) {
  constexpr int kHalf = SelectShared<KB, M>::kCap / 2;
  const int tid = threadIdx.x;
  const int g = first_tile_groups(k);
  const uint32_t mv = items.max_value_key();
  const uint32_t t = least_group_max<uint32_t>(s, mv, g);
  // Candidates: value key >= t, that is key > lo. t = 0 (a group with no item: a chunk shorter
  // than G, or only NaN) keeps every item.
  const uint64_t lo = t == 0u ? 0ull : ((uint64_t)t << 32) - 1ull;
  // n_cand[1] counts them: select_begin zeroed it before the barrier above, and select_tile's
  // appends go to n_cand[0] until its first merge, which zeroes n_cand[1] again.
  if (mv >= t) {
    items.for_each_above(lo, [&](uint64_t key, float z) {
      const int slot = atomicAdd(&s.n_cand[1], 1);
      if (slot < kHalf) {
        s.cand_key[slot] = key;
        s.cand_z[slot] = z;
      }
    });
  }
  __syncthreads();
  int n = s.n_cand[1];
  // The caller's select_tile starts with a barrier: every thread has read n by then.
  if (n > kHalf) return false;
  const uint64_t* keys = s.cand_key;
  const float* zs = s.cand_z;
  if (n > kRankDirect) {
    // Group e % G of the candidates, on exact keys; the survivors go to the buffer's upper half.
    uint64_t m = 0ull;
    for (int e = tid; e < n; e += kSelectThreads) m = max(m, s.cand_key[e]);
    const uint64_t t2 = least_group_max<uint64_t>(s, m, g);
    for (int e = tid; e < n; e += kSelectThreads) {
      const uint64_t key = s.cand_key[e];
      if (key >= t2) {
        const int slot = atomicAdd(&s.n_cand[0], 1);
        s.cand_key[kHalf + slot] = key;
        s.cand_z[kHalf + slot] = s.cand_z[e];
      }
    }
    __syncthreads();
    n = s.n_cand[0];
    keys += kHalf;
    zs += kHalf;
  }
  rank_into_list(s, keys, zs, n, k);
  __syncthreads();
  if (tid == 0) s.n_cand[0] = 0;  // read above by every thread; select_tile's appends use it next
  st.n_list = min(k, n);
  st.cur = 0;
  st.tau = st.n_list == k ? s.list_key[0][k - 1] : 0ull;
  return true;
}

}  // namespace dfsel::cuda
