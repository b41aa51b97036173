// The items shard_topk folds into its block top-K (block/select.cuh): one thread's share of a
// tile of a logits row, read with 16-byte loads, plus the per-type reads and maxima. One
// instance per stored logit type (Elem).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "dfsel/dfsel.h"
#include "kernels/block/select.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/common/order.cuh"

namespace dfsel::cuda {

// Stored element types: 16 bytes hold kVec of them. fast() is what the max and the filters
// compare (exact for every non-NaN value); exact() is the logit as load_elem reads it, NaN
// payload included, and is what the keys and outputs are made from.
template <dfsel_type T>
struct Elem;

template <>
struct Elem<DFSEL_TYPE_F32> {
  static constexpr int kVec = 4;
  static constexpr int kBytes = 4;
  static constexpr uint32_t kNaN = kF32NaNBits;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r); }
  __device__ static float exact(uint32_t r) { return stored_to_float<DFSEL_TYPE_F32>(r); }
};

template <>
struct Elem<DFSEL_TYPE_F16> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr uint32_t kNaN = kF16NaNBits;
  __device__ static float fast(uint32_t r) { return __half2float(__ushort_as_half((unsigned short)r)); }
  __device__ static float exact(uint32_t r) { return stored_to_float<DFSEL_TYPE_F16>(r); }
};

template <>
struct Elem<DFSEL_TYPE_BF16> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr uint32_t kNaN = kBF16NaNBits;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r << 16); }
  __device__ static float exact(uint32_t r) { return stored_to_float<DFSEL_TYPE_BF16>(r); }
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Raw bits of element e of a 16-byte vector.
template <dfsel_type T>
__device__ __forceinline__ uint32_t raw_at(const uint4& v, int e) {
  if constexpr (Elem<T>::kBytes == 4) return word(v, e);
  else return (word(v, e >> 1) >> ((e & 1) * 16)) & 0xffffu;
}

// Largest value of the tile (NaN ignored; NaN if every element is NaN). Invalid elements
// hold NaN, so they never count. 16-bit types take the max two at a time.
template <dfsel_type T, int U>
__device__ __forceinline__ float tile_max(const uint4 (&v)[U]) {
  if constexpr (T == DFSEL_TYPE_F32) {
    float m[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) m[i] = __uint_as_float(word(v[0], i));
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) m[i] = fmaxf(m[i], __uint_as_float(word(v[u], i)));
    return fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
  } else {
    using P = typename std::conditional<T == DFSEL_TYPE_F16, __half2, __nv_bfloat162>::type;
    P m[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t w = word(v[0], i);
      memcpy(&m[i], &w, 4);
    }
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const uint32_t w = word(v[u], i);
        P x;
        memcpy(&x, &w, 4);
        m[i] = __hmax2(m[i], x);  // max.{f16,bf16}x2: a NaN operand yields the other one
      }
    const P r = __hmax2(__hmax2(m[0], m[1]), __hmax2(m[2], m[3]));
    uint32_t w;
    memcpy(&w, &r, 4);
    return fmaxf(Elem<T>::fast(w & 0xffffu), Elem<T>::fast(w >> 16));
  }
}

// Vectors of a chunk in row-relative units: vector i covers columns [i * kVec - a_off, ...),
// where a_off = (row base mod 16) / element size, so every full vector load is 16-byte aligned.
// Ids are int32 (SPEC section 4.3 records), so every column and vector index fits in 32 bits.
struct ChunkView {
  const uint4* base;  // row base rounded down to 16 bytes
  int32_t v_end;      // the chunk's vectors end here
  int32_t n_cols;
  int32_t id_offset;
  int32_t a_off;
};

template <dfsel_type T>
__device__ __forceinline__ uint4 load_vec_guarded(const ChunkView& c, int32_t vi) {
  constexpr int V = Elem<T>::kVec;
  const int32_t c0 = vi * V - c.a_off;
  if (vi < c.v_end && c0 >= 0 && c0 + V <= c.n_cols) return __ldcs(c.base + vi);
  // The row's unaligned head or tail (or past the chunk): element by element, NaN outside.
  uint32_t w[4] = {0u, 0u, 0u, 0u};
#pragma unroll
  for (int e = 0; e < V; ++e) {
    const int32_t col = c0 + e;
    uint32_t r = Elem<T>::kNaN;
    if (vi < c.v_end && col >= 0 && col < c.n_cols) {
      if constexpr (Elem<T>::kBytes == 4) r = __ldcs(reinterpret_cast<const unsigned*>(c.base + vi) + e);
      else r = __ldcs(reinterpret_cast<const unsigned short*>(c.base + vi) + e);
    }
    if constexpr (Elem<T>::kBytes == 4) w[e] = r;
    else w[e >> 1] |= r << ((e & 1) * 16);
  }
  return make_uint4(w[0], w[1], w[2], w[3]);
}

// Thread tid's vectors of the tile at b: b + tid + u * kSelectThreads (coalesced per u).
template <dfsel_type T, int U>
__device__ __forceinline__ void load_tile(uint4 (&v)[U], const ChunkView& c, int32_t b) {
  constexpr int V = Elem<T>::kVec;
  const int32_t v0 = b + (int32_t)threadIdx.x;
  const int32_t vl = v0 + (U - 1) * kSelectThreads;
  if (vl < c.v_end && v0 * V - c.a_off >= 0 && (vl + 1) * V - c.a_off <= c.n_cols) {
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(c.base + v0 + u * kSelectThreads);  // all in flight
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load_vec_guarded<T>(c, v0 + u * kSelectThreads);
  }
}

// One thread's share of a tile, as the Items of select_tile. Item i = (u, e) is element e of
// vector u; columns grow with i, so the first of equal values has the lowest id.
template <dfsel_type T, int U>
struct DataItems {
  static constexpr int V = Elem<T>::kVec;
  static constexpr int N = U * V;
  uint4 v[U];
  int32_t v0;  // this thread's first vector
  ChunkView c;
  float mv;    // tile_max of the thread's elements

  __device__ __forceinline__ int32_t col(int i) const {
    return (v0 + (i / V) * kSelectThreads) * V + (i % V) - c.a_off;
  }
  __device__ __forceinline__ bool valid(int i) const {
    const int32_t cc = col(i);
    return v0 + (i / V) * kSelectThreads < c.v_end && cc >= 0 && cc < c.n_cols;
  }
  __device__ __forceinline__ uint32_t raw(int i) const { return raw_at<T>(v[i / V], i % V); }
  __device__ __forceinline__ int32_t id(int i) const { return c.id_offset + col(i); }

  __device__ __forceinline__ bool maybe_above(uint64_t lo) const {
    bool all;
    const float f = key_value_floor(lo, &all);
    return all || mv >= f;
  }
  __device__ __forceinline__ uint64_t max_key() const {
    if (mv == mv) {
      int first = 0;
#pragma unroll
      for (int i = N - 1; i >= 0; --i)
        if (Elem<T>::fast(raw(i)) == mv) first = i;  // -0 == +0: both share one value key
      return cand_key(mv, id(first));
    }
    // Every valid element is NaN (rare): the key of the first valid one, if any. All NaNs
    // share value key 0, so the id alone decides.
    int first = -1;
#pragma unroll
    for (int i = N - 1; i >= 0; --i)
      if (valid(i)) first = i;
    return first < 0 ? 0ull : cand_key(__uint_as_float(kF32NaNBits), id(first));
  }
  template <class F>
  __device__ __forceinline__ void for_each_above(uint64_t lo, F f) const {
    bool all;
    const float floor = key_value_floor(lo, &all);
#pragma unroll
    for (int i = 0; i < N; ++i) {
      const uint32_t r = raw(i);
      if ((all || Elem<T>::fast(r) >= floor) && valid(i)) {
        const float z = Elem<T>::exact(r);
        const uint64_t key = cand_key(z, id(i));
        if (key > lo) f(key, z);
      }
    }
  }
};

__device__ __forceinline__ CandRec list_rec(uint64_t key, float z) {
  CandRec c;
  c.z = z;
  c.id = id_of_key(key);
  return c;
}

}  // namespace dfsel::cuda
