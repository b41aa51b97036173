// dfsel's batched top-K, device layer (docs/topk.md): per row of a batch, the k largest elements
// with their ids, in one pass over the row. Header-only; its include closure is this folder.
//
//   Problem p{n_rows, n_cols, k, id_offset};
//   Options o; o.num_sms = <the device's SM count>;
//   size_t bytes = scratch_bytes(p, sizeof(T), o);   // 0: this launch needs none
//   o.scratch = <bytes of device memory whose first counter_bytes(o) bytes are zero>;
//   cudaError_t e = batched_topk<T>(p, StridedRows{rows, row_bytes}, IdWriter{ids, k}, o, stream);
//
// Reading the row once is the whole cost (16 x 124160 F32 is 1.9 us of an H200's HBM), so the
// kernel streams 16-byte loads and keeps the per-element work to one max:
//   - a row is cut into `splits` chunks, one CTA each, so that a few rows still cover the GPU;
//   - a CTA folds its chunk tile by tile into a sorted top-k list in shared memory
//     (topk_block.cuh); a tile whose items all lie below the list's k-th key costs one float max
//     per element and one barrier, and the next tile's loads are already in flight;
//   - each CTA of a split row writes its list to scratch and takes a ticket; the last CTA of the
//     row merges the lists with the same block routine and writes the result, so a batch is one
//     launch, and it resets the ticket, so the scratch is left reusable (graph replays);
//   - the grid is rows x splits and the chunks are a fixed number of vectors, so a CTA finds its
//     row and chunk without a division.
// The order is topk_order.cuh's: larger value first, the lower id among equal values, NaN last
// (below -inf). Ties are thus resolved to the lowest ids, the same on every run.
//
// Scratch rule: rows split over several CTAs meet in scratch. Its counters (the first
// counter_bytes(o) bytes) must be zero before a launch; every launch that completes leaves them
// zero. A caller that owns its scratch zeroes it once (dfsel does, at plan creation); a caller
// whose scratch comes from a pool shared with other work zeroes the counters on the stream before
// each launch (ggml-cuda does). After a failed launch, zero them again.
//
// PDL: Options::pdl launches the kernel as a programmatic dependent launch (sm_90). It then reads
// its rows before the previous kernel in the stream completes, so those rows, and the scratch it
// writes, must not be written by that kernel; it waits for that kernel before writing its output.
// It lets the next kernel, if launched so, start once every CTA has folded its chunk.
#pragma once

#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

#include <cuda/atomic>

#include "topk_block.cuh"
#include "topk_order.cuh"
#include "topk_policy.cuh"
#include "topk_tile.cuh"

namespace DFSEL_TOPK_NAMESPACE {

// One launch's rows.
struct Problem {
  int32_t n_rows;     // rows selected in this launch, >= 0
  int64_t n_cols;     // elements a row, >= k
  int32_t k;          // 1..kMaxK
  int64_t id_offset;  // id of column 0 (a vocabulary shard's first token); ids must stay below kMaxIdEnd
};

// How it runs.
struct Options {
  int num_sms = 0;        // the device's multiprocessors (the grid is sized for them)
  int32_t splits = 0;     // 0: the built-in rule; > 0: CTAs a row, forced (tuning sweeps)
  int ctas_per_sm = 0;    // 0: kCtasPerSm; fewer leaves room on each SM for a kernel beside it
  bool pdl = false;       // a programmatic dependent launch (sm_90; see the file comment)
  bool prefer_shared = false;  // ask for the largest shared-memory carve-out (a kernel beside it
                               // that needs shared memory then finds room on the SM)
  void* scratch = nullptr;     // scratch_bytes(...) bytes, counters zero (the scratch rule)
};

// Where row `sel` of a launch starts: base + sel * stride bytes (any 4-byte-aligned stride for
// float, 2-byte for the 16-bit types).
struct StridedRows {
  const void* base;
  size_t stride;
  __device__ __forceinline__ const uint8_t* row(int32_t sel) const {
    return static_cast<const uint8_t*>(base) + (int64_t)sel * (int64_t)stride;
  }
};

// Writers: the thread of rank r (0..k-1, rank 0 the largest) of row sel writes one element.
// Ids only, as ggml_top_k returns them (its order carries no meaning there).
struct IdWriter {
  int32_t* out;   // row sel's k ids at out + sel * stride
  size_t stride;  // in ids
  __device__ __forceinline__ void write(int32_t sel, int r, float, int32_t id) const {
    out[(size_t)sel * stride + r] = id;
  }
};

// (value, id) records in order, the largest first.
struct RecordWriter {
  Rec* out;       // row sel's k records at out + sel * stride
  size_t stride;  // in records
  __device__ __forceinline__ void write(int32_t sel, int r, float z, int32_t id) const {
    Rec c;
    c.z = z;
    c.id = id;
    out[(size_t)sel * stride + r] = c;
  }
};

namespace detail {

// PDL, sm_90: let the next kernel start; wait for the previous one. No-ops in a normal launch.
__device__ __forceinline__ void launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void wait_prerequisites() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

inline int ctas_per_sm(const Options& o) {
  return o.ctas_per_sm > 0 && o.ctas_per_sm < kCtasPerSm ? o.ctas_per_sm : kCtasPerSm;
}

// The split rows' ticket counters come first, one per row that can be split (only launches of at
// most num_sms * kCtasPerSm / 2 rows are), then the partial lists: the lists' offset does not
// depend on a launch's row count, so launches of different sizes can share one scratch.
inline size_t parts_offset(int num_sms) {
  return ((size_t)(num_sms > 0 ? num_sms : 1) * kCtasPerSm * sizeof(unsigned) + 255) & ~(size_t)255;
}

// CTAs a row: enough for about one resident wave, chunks no shorter than kMinSplitVecs 16-byte
// vectors, and at most kMaxSplitRecs partial records a row for the last CTA.
inline int rule_splits(int32_t n_rows, int32_t k, int64_t n_cols, int elem_bytes, int num_sms, int per_sm) {
  int64_t s = (int64_t)(num_sms > 0 ? num_sms : 1) * per_sm / (n_rows > 0 ? n_rows : 1);
  const int64_t by_len = n_cols * elem_bytes / 16 / kMinSplitVecs;
  const int64_t by_recs = kMaxSplitRecs / k;
  if (s > by_len) s = by_len;
  if (s > by_recs) s = by_recs;
  return (int)(s > 1 ? s : 1);
}

template <class T, int KB, class Rows, class Writer>
__global__ void __launch_bounds__(kThreads, kCtasPerSm)
    topk_kernel(Problem p, Rows rows, Writer w, void* scratch, int32_t chunk_vecs, size_t parts_at) {
  constexpr int U = kVecsPerThread;
  constexpr int32_t kTile = U * kThreads;  // vectors per tile
  __shared__ SelectShared<KB, U * Elem<T>::kVec> s;
  const int tid = threadIdx.x;
  const int k = p.k;
  const int32_t sel = (int32_t)blockIdx.x;
  const int split = blockIdx.y;
  const int splits = gridDim.y;
  const uint8_t* row = rows.row(sel);

  ChunkView c;
  c.a_off = (int)((reinterpret_cast<uintptr_t>(row) & 15u) / Elem<T>::kBytes);
  c.base = reinterpret_cast<const uint4*>(row - c.a_off * Elem<T>::kBytes);
  c.n_cols = (int32_t)p.n_cols;
  c.id_offset = (int32_t)p.id_offset;
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
  // A dependent kernel may start once every CTA has folded its chunk, not before: its CTAs
  // would wait on SMs that this fold still needs.
  launch_dependents();

  if (splits > 1) {
    unsigned* counter = static_cast<unsigned*>(scratch) + sel;
    Rec* parts = reinterpret_cast<Rec*>(static_cast<uint8_t*>(scratch) + parts_at) + (size_t)sel * splits * k;
    if (tid < k) {
      // Short chunks pad with {NaN, -1}, whose key is 0: below every real candidate.
      parts[split * k + tid] = tid < st.n_list ? list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid])
                                               : Rec{__uint_as_float(kNaNBits), -1};
    }
    __syncthreads();
    if (tid == 0) {
      // Release: the list the barrier above ordered before it is visible with the ticket that
      // announces it. Acquire: the last CTA reads every other list after its ticket. (A full
      // fence in each writing thread cost more than this one ordered atomic.)
      const unsigned ticket = ::cuda::atomic_ref<unsigned, ::cuda::thread_scope_device>(*counter).fetch_add(
          1u, ::cuda::memory_order_acq_rel);
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
  // Under PDL, the CTAs that write the result wait for the previous kernel first, so that the
  // grid completes after it and the next kernel's wait covers both.
  wait_prerequisites();
  if (tid < k) {
    const Rec r = list_rec(s.list_key[st.cur][tid], s.list_z[st.cur][tid]);
    w.write(sel, tid, r.z, r.id);
  }
}

}  // namespace detail

// CTAs a row that batched_topk launches for these arguments (the grid is n_rows times this); 0 for
// arguments it refuses: k outside 1..kMaxK or above n_cols, n_rows < 0, ids past kMaxIdEnd, a
// forced split count the last CTA cannot hold.
inline int splits(const Problem& p, int elem_bytes, const Options& o) {
  if (p.k < 1 || p.k > kMaxK || p.k > p.n_cols || p.n_rows < 0) return 0;
  if (p.id_offset < 0 || p.id_offset + p.n_cols > kMaxIdEnd) return 0;
  if (o.splits <= 0) return detail::rule_splits(p.n_rows, p.k, p.n_cols, elem_bytes, o.num_sms, detail::ctas_per_sm(o));
  const int sms = o.num_sms > 0 ? o.num_sms : 1;
  if ((int64_t)o.splits * p.k > (int64_t)kThreads * kRecsPerThread || o.splits > p.n_cols ||
      (o.splits > 1 && p.n_rows > sms * kCtasPerSm))
    return 0;
  return o.splits;
}

// Bytes of scratch the counters take (the part the scratch rule asks to be zero).
inline size_t counter_bytes(const Options& o) { return detail::parts_offset(o.num_sms); }

// Scratch this launch needs: 0 when no row is split.
inline size_t scratch_bytes(const Problem& p, int elem_bytes, const Options& o) {
  const int s = splits(p, elem_bytes, o);
  if (s <= 1) return 0;
  return detail::parts_offset(o.num_sms) + (size_t)p.n_rows * (size_t)s * (size_t)p.k * sizeof(Rec);
}

// Whether the grid of these arguments is resident all at once (one wave).
inline bool one_wave(const Problem& p, int elem_bytes, const Options& o) {
  const int s = splits(p, elem_bytes, o);
  const int sms = o.num_sms > 0 ? o.num_sms : 1;
  return (int64_t)p.n_rows * (s > 1 ? s : 1) <= (int64_t)sms * detail::ctas_per_sm(o);
}

// Enqueues the top-k of p.n_rows rows of T (float, __half or __nv_bfloat16) on stream: rows.row(sel)
// is row sel's first element, w.write(sel, rank, value, id) stores the result. Never allocates,
// never synchronises, graph-capturable. cudaErrorInvalidValue, with nothing launched, for
// arguments splits() refuses or a split launch without scratch.
template <class T, class Rows, class Writer>
cudaError_t batched_topk(const Problem& p, const Rows& rows, const Writer& w, const Options& o, cudaStream_t stream) {
  constexpr int V = Elem<T>::kVec;
  const int s = splits(p, (int)sizeof(T), o);
  if (s == 0 || (s > 1 && o.scratch == nullptr)) return cudaErrorInvalidValue;
  if (p.n_rows == 0) return cudaSuccess;
  // Vectors of a chunk: the row's vectors (at most this many, whatever its alignment) over splits.
  const int64_t nv_max = (p.n_cols + 2 * V - 2) / V;
  const int32_t chunk_vecs = (int32_t)((nv_max + s - 1) / s);
  const size_t parts_at = detail::parts_offset(o.num_sms);
  auto launch = [&](auto kernel) -> cudaError_t {
    if (o.prefer_shared) {
      const cudaError_t e =
          cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, cudaSharedmemCarveoutMaxShared);
      if (e != cudaSuccess) return e;
    }
    cudaLaunchConfig_t cfg = {};
    cudaLaunchAttribute attr[1];
    cfg.gridDim = dim3((unsigned)p.n_rows, (unsigned)s);
    cfg.blockDim = dim3((unsigned)kThreads);
    cfg.stream = stream;
    cfg.attrs = attr;
    if (o.pdl) {
      attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attr[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.numAttrs = 1;
    }
    return cudaLaunchKernelEx(&cfg, kernel, p, rows, w, o.scratch, chunk_vecs, parts_at);
  };
  switch (k_bucket(p.k)) {
    case 8: return launch(detail::topk_kernel<T, 8, Rows, Writer>);
    case 16: return launch(detail::topk_kernel<T, 16, Rows, Writer>);
    case 32: return launch(detail::topk_kernel<T, 32, Rows, Writer>);
    default: return launch(detail::topk_kernel<T, kMaxK, Rows, Writer>);
  }
}

}  // namespace DFSEL_TOPK_NAMESPACE
