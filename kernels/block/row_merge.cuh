// How the CTAs of a split row meet (shard_topk): each publishes its sorted partial list as K
// 64-bit candidate keys in the row's slots, and one CTA, the last of the row to start, waits
// for all slots and merges them.
//
// No fence and no end-of-work ticket: a slot holds 0 until its key lands (a real key is never
// 0, and a list shorter than K pads with kPadKey), so the merging CTA reads each key as soon as
// it is there, one L2 round trip after it was written, instead of fence, ticket and reads in
// turn. It then sets every slot back to 0 and the start counter too, so the scratch is all
// zero between launches whatever their split counts (graph replays, runs of other sizes).
//
// Why waiting is safe: the merging CTA is the one that took the row's last start ticket, so
// every other CTA of the row has started, is resident, and finishes without waiting on anyone.
#pragma once

#include <stdint.h>

#include "kernels/block/select.cuh"
#include "kernels/common/order.cuh"

namespace dfsel::cuda {

// Below every real key (whose low half, 0xffffffff - id, is at least 2^31) and not 0.
constexpr uint64_t kPadKey = 1ull;

// Slots of one split row in the scratch: a start counter, then splits x K keys. Row sel's
// block lies at sel * row_merge_words(splits, k) words.
__host__ __device__ constexpr int64_t row_merge_words(int splits, int k) { return 1 + (int64_t)splits * k; }

struct RowSlots {
  unsigned* start;  // start tickets taken
  uint64_t* keys;   // split s's list at keys + s * k

  __device__ RowSlots(void* scratch, int sel, int splits, int k) {
    uint64_t* b = static_cast<uint64_t*>(scratch) + sel * row_merge_words(splits, k);
    start = reinterpret_cast<unsigned*>(b);
    keys = b + 1;
  }
};

// Relaxed at GPU scope: the value reaches L2 and is read from there, never from a stale L1 line.
__device__ __forceinline__ void store_slot(uint64_t* p, uint64_t v) {
  asm volatile("st.relaxed.gpu.global.b64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
}

__device__ __forceinline__ uint64_t load_slot(const uint64_t* p) {
  uint64_t v;
  asm volatile("ld.relaxed.gpu.global.b64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
  return v;
}

// Items of the merging CTA: the row's splits x K published keys, R per thread at most. Entry e
// (e = tid + 256 i) is rank j = e / splits of list s = e % splits: every list's head comes
// first, so that when splits >= G each of select_first's groups (tid % G) holds some list's
// head, and its bound is the least of several heads rather than of K-th entries.
template <int R>
struct SlotItems {
  uint64_t key[R];

  // Slot of this thread's entry i, or -1 past the last.
  __device__ __forceinline__ static int slot(int i, int splits, int k) {
    const int e = threadIdx.x + i * kSelectThreads;
    const int j = e / splits;
    return j < k ? (e - j * splits) * k + j : -1;
  }

  // Waits for every slot of this thread, then takes padding as "no item" (key 0).
  __device__ __forceinline__ void poll(uint64_t* slots, int splits, int k) {
    int at[R];
#pragma unroll
    for (int i = 0; i < R; ++i) {
      at[i] = slot(i, splits, k);
      key[i] = 0ull;
    }
    bool pending = true;
    while (pending) {
      pending = false;
#pragma unroll
      for (int i = 0; i < R; ++i) {
        if (at[i] >= 0 && key[i] == 0ull) {
          key[i] = load_slot(slots + at[i]);
          pending = pending || key[i] == 0ull;
        }
      }
    }
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (key[i] == kPadKey) key[i] = 0ull;
  }

  // Sets this thread's slots back to 0 for the next launch.
  __device__ __forceinline__ void clear(uint64_t* slots, int splits, int k) const {
#pragma unroll
    for (int i = 0; i < R; ++i) {
      const int at = slot(i, splits, k);
      if (at >= 0) store_slot(slots + at, 0ull);
    }
  }

  __device__ __forceinline__ bool maybe_above(uint64_t) const { return true; }
  __device__ __forceinline__ uint64_t max_key() const {
    uint64_t m = 0ull;
#pragma unroll
    for (int i = 0; i < R; ++i) m = max(m, key[i]);
    return m;
  }
  __device__ __forceinline__ uint32_t max_value_key() const { return (uint32_t)(max_key() >> 32); }
  // z as the key gives it; the caller restores the bits a key does not keep (NaN payloads, the
  // sign of zero) for the K it outputs.
  template <class F>
  __device__ __forceinline__ void for_each_above(uint64_t lo, F f) const {
#pragma unroll
    for (int i = 0; i < R; ++i)
      if (key[i] > lo) f(key[i], cand_from_key(key[i]).z);
  }
};

}  // namespace dfsel::cuda
