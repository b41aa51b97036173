// The items the top-K folds into its block layer (topk_block.cuh): one thread's share of a tile of
// a row, read with 16-byte loads, and the per-type reads and maxima. One instance per element type:
// float, __half, __nv_bfloat16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include <type_traits>

#include "topk_block.cuh"
#include "topk_order.cuh"

namespace DFSEL_TOPK_NAMESPACE {

// Element types: 16 bytes hold kVec of them. fast() is what the max and the filters compare
// (exact for every non-NaN value, but for subnormals where the build flushes them); exact() is
// the value as stored, NaN payload included, and is what the keys and outputs are made from.
// kFlushable: fast() can be an f32 subnormal, which a flush-to-zero build compares as 0.
template <class T>
struct Elem;

template <>
struct Elem<float> {
  static constexpr int kVec = 4;
  static constexpr int kBytes = 4;
  static constexpr bool kFlushable = true;
  static constexpr uint32_t kNaN = kNaNBits;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r); }
  __device__ static float exact(uint32_t r) { return float_of_bits(r); }
};

template <>
struct Elem<__half> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr bool kFlushable = false;  // half subnormals are f32 normals
  static constexpr uint32_t kNaN = 0x7e00u;
  __device__ static float fast(uint32_t r) { return __half2float(__ushort_as_half((unsigned short)r)); }
  __device__ static float exact(uint32_t r) { return f16_bits_to_float((uint16_t)r); }
};

template <>
struct Elem<__nv_bfloat16> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr bool kFlushable = true;
  static constexpr uint32_t kNaN = 0x7fc0u;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r << 16); }
  __device__ static float exact(uint32_t r) { return bf16_bits_to_float((uint16_t)r); }
};

__device__ __forceinline__ uint32_t word(const uint4& v, int i) {
  return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

// Raw bits of element e of a 16-byte vector.
template <class T>
__device__ __forceinline__ uint32_t raw_at(const uint4& v, int e) {
  if constexpr (Elem<T>::kBytes == 4) return word(v, e);
  else return (word(v, e >> 1) >> ((e & 1) * 16)) & 0xffffu;
}

// Largest value of the tile (NaN ignored; NaN if every element is NaN). Invalid elements
// hold NaN, so they never count. 16-bit types take the max two at a time.
template <class T, int U>
__device__ __forceinline__ float tile_max(const uint4 (&v)[U]) {
  if constexpr (std::is_same<T, float>::value) {
    float m[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) m[i] = __uint_as_float(word(v[0], i));
#pragma unroll
    for (int u = 1; u < U; ++u)
#pragma unroll
      for (int i = 0; i < 4; ++i) m[i] = fmaxf(m[i], __uint_as_float(word(v[u], i)));
    return fmaxf(fmaxf(m[0], m[1]), fmaxf(m[2], m[3]));
  } else {
    using P = typename std::conditional<std::is_same<T, __half>::value, __half2, __nv_bfloat162>::type;
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
// Ids are int32, so every column and vector index fits in 32 bits.
struct ChunkView {
  const uint4* base;  // row base rounded down to 16 bytes
  int32_t v_end;      // the chunk's vectors end here
  int32_t n_cols;
  int32_t id_offset;
  int32_t a_off;
};

template <class T>
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

// Thread tid's vectors of the tile at b: b + tid + u * kThreads (coalesced per u).
template <class T, int U>
__device__ __forceinline__ void load_tile(uint4 (&v)[U], const ChunkView& c, int32_t b) {
  constexpr int V = Elem<T>::kVec;
  const int32_t v0 = b + (int32_t)threadIdx.x;
  const int32_t vl = v0 + (U - 1) * kThreads;
  if (vl < c.v_end && v0 * V - c.a_off >= 0 && (vl + 1) * V - c.a_off <= c.n_cols) {
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = __ldcs(c.base + v0 + u * kThreads);  // all in flight
  } else {
#pragma unroll
    for (int u = 0; u < U; ++u) v[u] = load_vec_guarded<T>(c, v0 + u * kThreads);
  }
}

// One thread's share of a tile, as the Items of select_tile. Item i = (u, e) is element e of
// vector u; columns grow with i, so the first of equal values has the lowest id.
template <class T, int U>
struct DataItems {
  static constexpr int V = Elem<T>::kVec;
  static constexpr int N = U * V;
  uint4 v[U];
  int32_t v0;  // this thread's first vector
  ChunkView c;
  float mv;    // tile_max of the thread's elements

  __device__ __forceinline__ int32_t col(int i) const {
    return (v0 + (i / V) * kThreads) * V + (i % V) - c.a_off;
  }
  __device__ __forceinline__ bool valid(int i) const {
    const int32_t cc = col(i);
    return v0 + (i / V) * kThreads < c.v_end && cc >= 0 && cc < c.n_cols;
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
      if constexpr (Elem<T>::kFlushable) {
        // A flush-to-zero build (--use_fast_math, as ggml's) compares subnormals as 0: when the
        // maximum is 0 the items equal to it may hold distinct keys, so take the largest exact one.
        // Without flushing this finds the first zero, as the loop below would.
        if (mv == 0.0f) {
          uint64_t m = 0ull;
#pragma unroll
          for (int i = 0; i < N; ++i)
            if (Elem<T>::fast(raw(i)) == 0.0f) m = max(m, cand_key(Elem<T>::exact(raw(i)), id(i)));
          return m;
        }
      }
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
    return first < 0 ? 0ull : cand_key(__uint_as_float(kNaNBits), id(first));
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

__device__ __forceinline__ Rec list_rec(uint64_t key, float z) {
  Rec c;
  c.z = z;
  c.id = id_of_key(key);
  return c;
}

}  // namespace DFSEL_TOPK_NAMESPACE
