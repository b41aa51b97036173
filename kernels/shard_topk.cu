// shard_topk: per selected logits row, the top-K with global ids in candidate order
// (DESIGN section 2 for the order, section 3 step 1 for the role).
//
// Reading the row once is the whole cost (DESIGN section 5: 16 x 124160 F32 is 1.9 us of
// HBM), so the kernel streams 16-byte loads and keeps the per-element work to one max:
//   - a row is cut into `splits` chunks, one CTA each, so that a few rows still cover the GPU;
//   - a CTA folds its chunk tile by tile into a sorted top-K list in shared memory
//     (block_select.cuh); a tile whose items all lie below the list's K-th key costs one
//     float max per element and one barrier, and the next tile's loads are already in flight;
//   - each CTA of a split row writes its list to scratch and takes a ticket; the last CTA of
//     the row merges the lists with the same block routine and writes the result, so a step is
//     one launch, and it resets the ticket so that scratch stays reusable (graph replays).
#include "kernels/shard_topk.cuh"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <type_traits>

#include "kernels/block_select.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kVecsPerThread = 4;   // 16-byte loads per thread per tile
// The launch bounds ask for 4 CTAs per SM (64 registers a thread). The grid is sized for 4
// when the top-K has the GPU alone, and for 3 when the caller runs a kernel beside it
// (ShardTopKArgs::shares_sms: the plan's gate, gate.cu), leaving each SM room for one CTA.
constexpr int kRegBoundCtas = 4;
constexpr int kCtasPerSm = kRegBoundCtas;  // the most; sizes the counters and forced splits
constexpr int64_t kMinSplitCols = 2048;  // a split chunk smaller than this costs more than it saves
constexpr int kRecsPerThread = 8;   // the last CTA holds splits * k <= 2048 records in registers

// Stored element types: 16 bytes hold kVec of them. fast() is what the max and the filters
// compare (exact for every non-NaN value); exact() is the logit as load_elem reads it, NaN
// payload included, and is what the keys and outputs are made from.
template <dfsel_type T>
struct Elem;

template <>
struct Elem<DFSEL_TYPE_F32> {
  static constexpr int kVec = 4;
  static constexpr int kBytes = 4;
  static constexpr uint32_t kNaN = 0x7fc00000u;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r); }
  __device__ static float exact(uint32_t r) { return __uint_as_float(r); }
};

template <>
struct Elem<DFSEL_TYPE_F16> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr uint32_t kNaN = 0x7e00u;
  __device__ static float fast(uint32_t r) { return __half2float(__ushort_as_half((unsigned short)r)); }
  __device__ static float exact(uint32_t r) { return f16_to_float((uint16_t)r); }
};

template <>
struct Elem<DFSEL_TYPE_BF16> {
  static constexpr int kVec = 8;
  static constexpr int kBytes = 2;
  static constexpr uint32_t kNaN = 0x7fc0u;
  __device__ static float fast(uint32_t r) { return __uint_as_float(r << 16); }
  __device__ static float exact(uint32_t r) { return __uint_as_float(r << 16); }
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
// Ids are int32 (DESIGN section 3 records), so every column and vector index fits in 32 bits.
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
    return first < 0 ? 0ull : cand_key(__uint_as_float(0x7fc00000u), id(first));
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
  c.id = (int32_t)(0xffffffffu - (uint32_t)key);
  return c;
}

// Scratch: one ticket counter per split row, then the partial lists. Only rows of a launch
// of at most num_sms * kCtasPerSm / 2 rows are split, so the counters' region has a fixed size
// and the lists' offset does not depend on a run's row count (runs of different sizes share
// one scratch, and every counter is back at zero after each run).
size_t parts_offset(int num_sms) {
  return ((size_t)std::max(num_sms, 1) * kCtasPerSm * sizeof(unsigned) + 255) & ~(size_t)255;
}

template <dfsel_type T, int KB>
__global__ void __launch_bounds__(kSelectThreads, kRegBoundCtas)
    shard_topk_kernel(ShardTopKArgs a, int splits, size_t parts_at) {
  constexpr int U = kVecsPerThread;
  constexpr int32_t kTile = U * kSelectThreads;  // vectors per tile
  __shared__ SelectShared<KB, U * Elem<T>::kVec> s;
  const int tid = threadIdx.x;
  const int k = a.k;
  const int sel = blockIdx.x / splits;
  const int split = blockIdx.x - sel * splits;
  const RowMap m = a.map;
  const int64_t row = (int64_t)(sel / m.group_rows) * m.group_stride + m.group_offset + sel % m.group_rows;
  const uint8_t* p = static_cast<const uint8_t*>(a.logits) + row * (int64_t)a.row_stride;

  ChunkView c;
  c.a_off = (int)((reinterpret_cast<uintptr_t>(p) & 15u) / Elem<T>::kBytes);
  c.base = reinterpret_cast<const uint4*>(p - c.a_off * Elem<T>::kBytes);
  c.n_cols = (int32_t)a.n_cols;
  c.id_offset = (int32_t)a.id_offset;
  const int32_t nv = (c.n_cols + c.a_off + Elem<T>::kVec - 1) / Elem<T>::kVec;
  const int32_t vb = (int32_t)((int64_t)nv * split / splits);
  c.v_end = (int32_t)((int64_t)nv * (split + 1) / splits);

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

  CandRec* out = a.out + (size_t)sel * a.out_stride;
  if (splits > 1) {
    unsigned* counter = static_cast<unsigned*>(a.scratch) + sel;
    CandRec* parts = reinterpret_cast<CandRec*>(static_cast<uint8_t*>(a.scratch) + parts_at) +
                     (size_t)sel * splits * k;
    if (tid < k) {
      // Short chunks pad with {NaN, -1}, whose key is 0: below every real candidate.
      parts[split * k + tid] = tid < st.n_list ? list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid])
                                               : CandRec{__uint_as_float(0x7fc00000u), -1};
      __threadfence();  // the list is visible GPU-wide before the ticket that announces it
    }
    __syncthreads();
    if (tid == 0) {
      const unsigned ticket = atomicAdd(counter, 1u);
      s.last = ticket == (unsigned)splits - 1u;
      if (s.last) {
        *counter = 0u;     // every split has taken its ticket: reset for the next launch
        __threadfence();   // order the reads of the other splits' lists after the ticket
      }
    }
    __syncthreads();
    if (!s.last) return;
    RecordItems<kRecsPerThread> recs;
    recs.load(parts, splits * k);
    st = select_begin(s);
    select_tile(s, st, recs, k);
    select_flush(s, st, k);
  }
  if (tid < k) out[tid] = list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid]);
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

// The one place where k and the element type become template parameters.
template <dfsel_type T>
cudaError_t launch(const ShardTopKArgs& a, int splits, int num_sms, cudaStream_t stream) {
  const unsigned grid = (unsigned)a.n_rows * (unsigned)splits;
  const size_t parts = parts_offset(num_sms);
  if (a.k <= 8) shard_topk_kernel<T, 8><<<grid, kSelectThreads, 0, stream>>>(a, splits, parts);
  else if (a.k <= 16) shard_topk_kernel<T, 16><<<grid, kSelectThreads, 0, stream>>>(a, splits, parts);
  else if (a.k <= 32) shard_topk_kernel<T, 32><<<grid, kSelectThreads, 0, stream>>>(a, splits, parts);
  else shard_topk_kernel<T, 64><<<grid, kSelectThreads, 0, stream>>>(a, splits, parts);
  return cudaGetLastError();
}

}  // namespace

size_t shard_topk_scratch_bytes(int32_t n_rows, int32_t k, int64_t n_cols, int num_sms) {
  if (n_rows <= 0 || k < 1 || k > kMaxTopK) return 0;
  // A run may select fewer rows than planned, and fewer rows split further: size the partial
  // lists for the worst row count up to n_rows. Only split rows use them, and those number at
  // most num_sms * kCtasPerSm / 2, so the loop is short.
  const int64_t stop = std::min<int64_t>(n_rows, (int64_t)std::max(num_sms, 1) * kCtasPerSm);
  int64_t recs = 0;
  for (int64_t n = 1; n <= stop; ++n) {
    const int s = std::max(topk_splits((int32_t)n, k, n_cols, num_sms, false),
                           topk_splits((int32_t)n, k, n_cols, num_sms, true));
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
  if (a.splits <= 0) return topk_splits(a.n_rows, a.k, a.n_cols, num_sms, a.shares_sms != 0);
  // Forced, for tuning: the last CTA's records and the counters must fit.
  if ((int64_t)a.splits * a.k > (int64_t)kSelectThreads * kRecsPerThread || a.splits > a.n_cols ||
      (a.splits > 1 && a.n_rows > std::max(num_sms, 1) * kCtasPerSm))
    return 0;
  return a.splits;
}

cudaError_t shard_topk(const ShardTopKArgs& a, int num_sms, cudaStream_t stream) {
  const int splits = shard_topk_splits(a, num_sms);
  if (splits == 0) return cudaErrorInvalidValue;
  if (a.n_rows == 0) return cudaSuccess;
  if (splits > 1 && a.scratch == nullptr) return cudaErrorInvalidValue;
  switch (a.type) {
    case DFSEL_TYPE_F32: return launch<DFSEL_TYPE_F32>(a, splits, num_sms, stream);
    case DFSEL_TYPE_F16: return launch<DFSEL_TYPE_F16>(a, splits, num_sms, stream);
    case DFSEL_TYPE_BF16: return launch<DFSEL_TYPE_BF16>(a, splits, num_sms, stream);
    default: return cudaErrorInvalidValue;
  }
}

}  // namespace dfsel::cuda
