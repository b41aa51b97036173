// score_lattice: merge, unary, K x K scores and the block walk in one launch (DESIGN
// sections 2 and 3, steps 3 to 5). One CTA per drafted row d = (block b, position p).
//
// Scores are a small GEMM per row, S = u + (E_prev[P] * g) . E_next[C]^T over R: both factors
// are staged in shared memory as floats, R in chunks (A and B stay near 64 KB for every K),
// and each thread owns a kT x kT register tile of S. K is bucketed to KP in {8, 16, 32, 64},
// the only template parameter; candidates and predecessors beyond K are zero rows.
// Every row is computed in one fixed order whatever the shard count or the placement, so
// results are bitwise identical across them (DESIGN section 2). A row's walk step does not
// depend on the path, so each CTA decides the steps of its K rows from the scores it holds;
// the last CTA of a block to finish follows them from the anchor.
#include "kernels/score_lattice.cuh"

#include <limits.h>

#include "kernels/common/numeric.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/philox.cuh"

namespace dfsel::cuda {
namespace {

constexpr int kThreads = 256;
constexpr int kStop = 0x100;  // choice flag: p_min stops before this step

template <int KP>
struct Tile {
  // kT x kT scores per thread: independent accumulators, and R split over kGroups groups,
  // so that no thread runs one long dependent chain of FMAs over all of R.
  static constexpr int kT = KP >= 32 ? 4 : KP == 16 ? 2 : 1;
  static constexpr int kSide = KP / kT;
  static constexpr int kTiles = kSide * kSide;
  static constexpr int kGroups = kThreads / kTiles;  // thread groups splitting each R chunk
  static constexpr int kRchMax = 8192 / KP;           // 2 * KP * kRchMax floats = 64 KB
  static_assert(kGroups >= 1 && kTiles * kGroups == kThreads, "tiles cover the CTA");
};

// Shared memory plan, computed on the host and passed to the kernel. region is reused by the
// phases: A and B chunks, then the staged scores, then the walk's choice table.
struct Plan {
  int rch;  // R chunk, a multiple of 4
  int ld;   // pitch of A and B rows in floats: rch + 4 keeps 128-bit reads conflict-free
  int vec;   // load4 may use one wide load
  int vec8;  // 2-byte rows, R % 8 == 0, rows 16-byte aligned: 8 elements per 16-byte load
  size_t gs_off, ptr_off, cand_off, recs_off, src_off, u_off, misc_off, bytes;
};

size_t up16(size_t x) { return (x + 15) & ~(size_t)15; }

template <int KP>
Plan make_plan(int k, int R, int L, int n_ranks, bool vec, bool vec8) {
  using T = Tile<KP>;
  Plan pl;
  const int r4 = (R + 3) & ~3;
  pl.rch = r4 < T::kRchMax ? r4 : T::kRchMax;
  pl.ld = pl.rch + 4;
  pl.vec = vec ? 1 : 0;
  pl.vec8 = vec8 ? 1 : 0;  // rch is then a multiple of 8: R is, and so is kRchMax
  size_t region = 2 * (size_t)KP * pl.ld * 4;
  const size_t stage = (size_t)KP * KP * 4 * (T::kGroups > 1 ? 1 + T::kGroups : 1);
  if (stage > region) region = stage;
  const size_t walk = (size_t)L * k * 8 + (size_t)L * 3 * 4;  // choices [L][K]; row, pick, id [L]
  if (walk > region) region = walk;
  pl.gs_off = up16(region);
  pl.ptr_off = pl.gs_off + up16((size_t)r4 * 4);
  pl.cand_off = pl.ptr_off + 2 * KP * sizeof(void*);
  pl.recs_off = pl.cand_off + 2 * KP * sizeof(CandRec);
  pl.src_off = pl.recs_off + up16(2 * (size_t)n_ranks * k * sizeof(CandRec));
  pl.u_off = pl.src_off + 2 * KP * 4;
  pl.misc_off = pl.u_off + KP * 4;
  pl.bytes = pl.misc_off + 16;
  return pl;
}

__device__ __forceinline__ const uint8_t* rank_base(const LatticeArgs& a, int r) {
  return a.recv + (size_t)r * a.layout.bytes;
}

__device__ __forceinline__ uint8_t* mut(const uint8_t* p) { return const_cast<uint8_t*>(p); }

// A replicated codebook row; null (read as zeros) for an id outside the vocabulary.
__device__ __forceinline__ const uint8_t* book_row(const LatticeArgs& a, const void* base,
                                                   int32_t id) {
  if (id < 0 || id >= a.n_vocab) return nullptr;
  return (const uint8_t*)base + (size_t)id * a.cb_row_stride;
}

// Elements r..r+3 of a codebook row as float, exactly load_elem's values. vec: r + 4 <= R and
// rows aligned for one 16-byte (F32) or 8-byte (F16/BF16) load.
__device__ __forceinline__ void load4(const uint8_t* row, dfsel_type t, int r, int R, bool vec,
                                      float (&v)[4]) {
  if (!vec) {
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = r + c < R ? load_elem(row, t, r + c) : 0.0f;
    return;
  }
  if (t == DFSEL_TYPE_F32) {
    const float4 x = __ldg((const float4*)(row + (size_t)r * 4));
    v[0] = x.x; v[1] = x.y; v[2] = x.z; v[3] = x.w;
  } else if (t == DFSEL_TYPE_Q8_0) {
    const BlockQ8_0* blk = (const BlockQ8_0*)row + r / kQ8Block;
    const uint16_t d = __ldg(&blk->d);
#pragma unroll
    for (int c = 0; c < 4; ++c) v[c] = q8_value(d, __ldg(blk->qs + r % kQ8Block + c));
  } else {
    const uint2 x = __ldg((const uint2*)(row + (size_t)r * 2));
    const uint16_t h[4] = {(uint16_t)(x.x & 0xffffu), (uint16_t)(x.x >> 16),
                           (uint16_t)(x.y & 0xffffu), (uint16_t)(x.y >> 16)};
#pragma unroll
    for (int c = 0; c < 4; ++c)
      v[c] = t == DFSEL_TYPE_F16 ? f16_to_float(h[c]) : bf16_to_float(h[c]);
  }
}

// Elements r..r+7 of an F16 or BF16 row as float, in one 16-byte load (Plan::vec8).
__device__ __forceinline__ void load8(const uint8_t* row, dfsel_type t, int r, float (&v)[8]) {
  const uint4 x = __ldg((const uint4*)(row + (size_t)r * 2));
  const uint32_t w[4] = {x.x, x.y, x.z, x.w};
#pragma unroll
  for (int c = 0; c < 8; ++c) {
    const uint16_t h = (uint16_t)(w[c / 2] >> (16 * (c % 2)));
    v[c] = t == DFSEL_TYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
  }
}

// One step of the walk (DESIGN section 2) from lattice row `row` with the shared
// selector_math helpers: the choice j, flagged kStop when p_min stops before emitting it. It
// depends on the row alone, not on the path, so every row of a block is decided at once.
__device__ int choose(const LatticeArgs& a, const float* row, int b, int p) {
  const int K = a.k;
  int j;
  if (a.temperature > 0.0f) {
    float q[64];
    softmax_row(row, K, a.temperature, q);
    j = sample_row(q, K, philox_uniform(a.seed, (uint32_t)b, (uint32_t)p));
  } else {
    j = argmax_row(row, K);
  }
  return a.p_min > 0.0f && softmax_at(row, K, 1.0f, j) < a.p_min ? j | kStop : j;
}

// The walk of block b by the whole CTA: the choices of all L x K rows (made by the CTAs that
// scored them) are read in one pass, one thread follows them from row 0 (L dependent shared
// loads), then the path and q rows are written in parallel; q of a step is recomputed from
// the row it used, bitwise as in choose.
__device__ void walk_block(const LatticeArgs& a, float* region, int b, bool anchor_ok) {
  const int K = a.k, L = a.block_size - 1, tid = threadIdx.x;
  const size_t kk = (size_t)K * K;
  int2* table = (int2*)region;      // [L][K] {choice, id of the chosen candidate}
  int* used = (int*)(table + L * K);  // [L] row of step p + 1, -1 once stopped
  int* pick = used + L;               // [L] emitted j, -1 if none
  int* pick_id = pick + L;            // [L] its token id
  const float* lat = a.lattice + (size_t)b * L * kk;
  const int2* choices = a.choices + (size_t)b * L * K;
  for (int r = tid; r < L * K; r += kThreads) table[r] = __ldcg(choices + r);
  __syncthreads();
  if (tid == 0) {
    int prev = 0, n = 0;
    bool go = anchor_ok;
    for (int p = 0; p < L; ++p) {
      const int2 c = go ? table[p * K + prev] : make_int2(kStop, -1);
      used[p] = go ? prev : -1;
      go = go && !(c.x & kStop);
      pick[p] = go ? c.x : -1;
      pick_id[p] = go ? c.y : -1;
      if (go) prev = c.x, ++n;
    }
    a.n_emitted[b] = n;
    if (!anchor_ok && a.error) atomicCAS(a.error, 0, 1 + b);
  }
  __syncthreads();
  for (int p = tid; p < L; p += kThreads) {
    const size_t d = (size_t)b * L + p;
    a.path[d] = pick_id[p];
    if (a.temperature <= 0.0f || !a.q) continue;
    float row[64], q[64];
    if (used[p] >= 0) {
      for (int j = 0; j < K; ++j) row[j] = __ldcg(lat + p * kk + (size_t)used[p] * K + j);
      softmax_row(row, K, a.temperature, q);
    }
    for (int j = 0; j < K; ++j) a.q[d * K + j] = used[p] >= 0 ? q[j] : 0.0f;
  }
}

template <int KP>
__global__ void __launch_bounds__(kThreads, 2) lattice_kernel(LatticeArgs a, Plan pl) {
  using T = Tile<KP>;
  extern __shared__ __align__(16) uint8_t smem[];
  float* region = (float*)smem;
  float* gs = (float*)(smem + pl.gs_off);                         // g[d], zero-padded
  const uint8_t** prow = (const uint8_t**)(smem + pl.ptr_off);    // E_prev rows of P
  const uint8_t** nrow = prow + KP;                               // E_next rows of C
  CandRec* cand = (CandRec*)(smem + pl.cand_off);                 // C[d], then C[d - 1]
  CandRec* recs = (CandRec*)(smem + pl.recs_off);                 // records of d, d - 1
  int* src = (int*)(smem + pl.src_off);                           // record index of C[.][j]
  float* u = (float*)(smem + pl.u_off);
  int* misc = (int*)(smem + pl.misc_off);                         // anchor owner, last flag

  const int K = a.k, R = a.rank, L = a.block_size - 1, tid = threadIdx.x;
  const int d = blockIdx.x, b = d / L, p = d % L + 1;
  const int n_recs = a.n_ranks * K, n_lists = p >= 2 ? 2 : 1;
  const bool sharded = a.layout.sharded != 0;
  const int32_t anchor = a.anchors[b];
  const bool anchor_ok = anchor >= 0 && anchor < a.n_vocab;

  // 1. The records of row d (and d - 1) from every rank, and g[d].
  for (int e = tid; e < n_lists * n_recs; e += kThreads) {
    const int w = e / n_recs, q = e % n_recs;
    recs[e] = layout_cands(a.layout, mut(rank_base(a, q / K)))[(size_t)(d - w) * K + q % K];
  }
  for (int r = tid; r < ((R + 3) & ~3); r += kThreads) gs[r] = r < R ? a.g[(size_t)d * R + r] : 0.0f;
  for (int j = tid; j < 2 * KP; j += kThreads) {  // holes only if records repeat a key
    cand[j] = CandRec{0.0f, -1};
    src[j] = 0;
  }
  if (tid == 0) misc[0] = INT_MAX;
  __syncthreads();

  // 2. Merge (DESIGN section 3, step 3): the record of rank j < K is C[j]. The anchor's
  // E_prev row comes from the lowest rank that flags it owned.
  for (int e = tid; e < n_lists * n_recs; e += kThreads) {
    const int w = e / n_recs, q = e % n_recs;
    const int rk = cand_rank(recs + w * n_recs, n_recs, q);
    if (rk < K) {
      cand[w * KP + rk] = recs[e];
      src[w * KP + rk] = q;
    }
  }
  if (sharded && p == 1 && anchor_ok)
    for (int r = tid; r < a.n_ranks; r += kThreads)
      if (*layout_anchor_owned(a.layout, mut(rank_base(a, r)), b) == 1) atomicMin(&misc[0], r);
  __syncthreads();

  // 3. Unary, row pointers, and the per-candidate outputs.
  float* packed = a.packed ? (float*)((uint8_t*)a.packed + ((size_t)b * a.block_size + p) *
                                                               a.packed_row_stride)
                           : nullptr;
  for (int j = tid; j < KP; j += kThreads) {
    u[j] = 0.0f;
    prow[j] = nrow[j] = nullptr;
    if (j >= K) continue;
    const CandRec c = cand[j];
    u[j] = transform_logit(a.transform, c.z);
    const int q = src[j], pq = src[KP + j];
    nrow[j] = sharded ? layout_row(a.layout, mut(rank_base(a, q / K)), d, q % K, 1)
                      : book_row(a, a.e_next, c.id);
    if (p >= 2) {
      prow[j] = sharded ? layout_row(a.layout, mut(rank_base(a, pq / K)), d - 1, pq % K, 0)
                        : book_row(a, a.e_prev, cand[KP + j].id);
    } else if (j == 0 && anchor_ok) {  // P = {anchor}: one row, the others stay zero
      prow[0] = !sharded ? book_row(a, a.e_prev, anchor)
                : misc[0] < a.n_ranks ? layout_anchor_row(a.layout, mut(rank_base(a, misc[0])), b)
                                      : nullptr;
    }
    const size_t o = (size_t)d * K + j;
    if (a.cand_ids) a.cand_ids[o] = c.id;
    if (a.unary) a.unary[o] = u[j];
    if (packed) packed[j] = (float)c.id;
  }
  __syncthreads();

  // 4. Dot products over R in chunks: A[i][r] = E_prev[P_i][r] * g[r], B[j][r] = E_next[C_j][r].
  float* A = region;
  float* B = region + KP * pl.ld;
  const int t = tid % T::kTiles, grp = tid / T::kTiles;
  const int ti = t / T::kSide, tj = t % T::kSide;
  float acc[T::kT][T::kT];
#pragma unroll
  for (int x = 0; x < T::kT; ++x)
#pragma unroll
    for (int y = 0; y < T::kT; ++y) acc[x][y] = 0.0f;
  const int n4 = pl.rch / 4;
  for (int r0 = 0; r0 < R; r0 += pl.rch) {
    // One gather per iteration: batching several per thread measured slower (11.7 -> 13.1 us
    // for one block on an H200; with the 16-byte loads below, four at once 10.1 against
    // 9.94 us), so the loop is left to the compiler. 2-byte rows go 8 elements per load,
    // which halves the gathers each thread waits on in turn (11.1 -> 9.74 us).
    if (pl.vec8) {
      const int n8 = pl.rch / 8;
      for (int e = tid; e < 2 * KP * n8; e += kThreads) {
        const int w = e / (KP * n8), i = (e / n8) % KP, c8 = e % n8, r = r0 + 8 * c8;
        const uint8_t* row = w ? nrow[i] : prow[i];
        float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
        if (row && r < R) load8(row, a.cb_type, r, v);
        if (!w && r < R) {
#pragma unroll
          for (int c = 0; c < 8; ++c) v[c] *= gs[r + c];
        }
        float4* dst = (float4*)&(w ? B : A)[i * pl.ld + 8 * c8];
        dst[0] = make_float4(v[0], v[1], v[2], v[3]);
        dst[1] = make_float4(v[4], v[5], v[6], v[7]);
      }
    }
    for (int e = tid; !pl.vec8 && e < 2 * KP * n4; e += kThreads) {
      const int w = e / (KP * n4), i = (e / n4) % KP, c4 = e % n4, r = r0 + 4 * c4;
      const uint8_t* row = w ? nrow[i] : prow[i];
      float v[4] = {0.0f, 0.0f, 0.0f, 0.0f};
      if (row && r < R) load4(row, a.cb_type, r, R, pl.vec != 0, v);
      if (!w && r < R) {
#pragma unroll
        for (int c = 0; c < 4; ++c) v[c] *= gs[r + c];
      }
      *(float4*)&(w ? B : A)[i * pl.ld + 4 * c4] = make_float4(v[0], v[1], v[2], v[3]);
    }
    __syncthreads();
    for (int c4 = grp; c4 < n4; c4 += T::kGroups) {
      float4 av[T::kT], bv[T::kT];
#pragma unroll
      for (int x = 0; x < T::kT; ++x) av[x] = *(const float4*)&A[(ti + x * T::kSide) * pl.ld + 4 * c4];
#pragma unroll
      for (int y = 0; y < T::kT; ++y) bv[y] = *(const float4*)&B[(tj + y * T::kSide) * pl.ld + 4 * c4];
#pragma unroll
      for (int x = 0; x < T::kT; ++x)
#pragma unroll
        for (int y = 0; y < T::kT; ++y) {
          float s = acc[x][y];
          s = fmaf(av[x].x, bv[y].x, s);
          s = fmaf(av[x].y, bv[y].y, s);
          s = fmaf(av[x].z, bv[y].z, s);
          s = fmaf(av[x].w, bv[y].w, s);
          acc[x][y] = s;
        }
    }
    __syncthreads();
  }

  // 5. S[i][j] = u[j] + dot, staged as [KP][KP]; groups splitting R are summed in order.
  float* S = region;
  float* red = region + KP * KP;
#pragma unroll
  for (int x = 0; x < T::kT; ++x)
#pragma unroll
    for (int y = 0; y < T::kT; ++y) {
      const int i = ti + x * T::kSide, j = tj + y * T::kSide;
      if (T::kGroups == 1) S[i * KP + j] = u[j] + acc[x][y];
      else red[grp * KP * KP + i * KP + j] = acc[x][y];
    }
  if (T::kGroups > 1) {
    __syncthreads();
    for (int o = tid; o < KP * KP; o += kThreads) {
      float s = 0.0f;
      for (int g = 0; g < T::kGroups; ++g) s += red[g * KP * KP + o];
      S[o] = u[o % KP] + s;
    }
  }
  __syncthreads();

  // 6. Outputs of this position; at p = 1 every predecessor row repeats the anchor's row 0.
  // Each row's walk step is decided here, from the staged row, for the walking CTA to follow.
  const size_t base = (size_t)d * K * K;
  for (int i = tid; i < K; i += kThreads) {
    const int c = choose(a, S + (p == 1 ? 0 : i) * KP, b, p);
    a.choices[(size_t)d * K + i] = make_int2(c, cand[c & ~kStop].id);
  }
  for (int o = tid; o < K * K; o += kThreads) {
    const int i = o / K, j = o % K;
    const float s = S[(p == 1 ? 0 : i) * KP + j];
    a.lattice[base + o] = s;
    if (a.scores) a.scores[base + o] = s;
    if (packed) packed[K + o] = s;
  }
  if (packed) {
    for (int64_t e = K + K * K + tid; e < a.n_embd; e += kThreads) packed[e] = 0.0f;
    if (p == 1) {
      float* row0 = (float*)((uint8_t*)packed - a.packed_row_stride);
      for (int64_t e = tid; e < a.n_embd; e += kThreads) row0[e] = 0.0f;
    }
  }

  // 7. The last position of the block to finish walks it. The fence publishes this CTA's
  // choices and lattice rows before its ticket; the last resets the counter for the next
  // launch or graph replay.
  __threadfence();
  __syncthreads();
  if (tid == 0) {
    const unsigned ticket = atomicAdd(&a.block_counters[b], 1u);
    misc[1] = ticket == (unsigned)(L - 1);
    if (misc[1]) atomicExch(&a.block_counters[b], 0u);
  }
  __syncthreads();
  if (!misc[1]) return;
  __threadfence();
  walk_block(a, region, b, anchor_ok);
}

template <int KP>
cudaError_t launch(const LatticeArgs& a, bool vec, bool vec8, cudaStream_t stream) {
  const int L = a.block_size - 1;
  const Plan pl = make_plan<KP>(a.k, a.rank, L, a.n_ranks, vec, vec8);
  int dev = 0, optin = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e != cudaSuccess) return e;
  if (pl.bytes > (size_t)optin) return cudaErrorInvalidValue;
  if (pl.bytes > 48 * 1024) {
    e = cudaFuncSetAttribute(lattice_kernel<KP>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             (int)pl.bytes);
    if (e != cudaSuccess) return e;
  }
  lattice_kernel<KP><<<(unsigned)a.n_blocks * L, kThreads, pl.bytes, stream>>>(a, pl);
  return cudaGetLastError();
}

bool valid_type(dfsel_type t) {
  return t == DFSEL_TYPE_F32 || t == DFSEL_TYPE_F16 || t == DFSEL_TYPE_BF16 ||
         t == DFSEL_TYPE_Q8_0;
}

// The largest power of two, up to 16, that divides the address of every codebook row the
// lattice reads. Sharded, the rows sit in the records at offsets that are multiples of 16.
size_t row_alignment(const LatticeArgs& a) {
  uintptr_t bits = a.layout.sharded ? (uintptr_t)a.recv
                                    : (uintptr_t)a.e_prev | (uintptr_t)a.e_next | (uintptr_t)a.cb_row_stride;
  bits |= 16;
  return (size_t)(bits & (~bits + 1));  // the lowest set bit
}

}  // namespace

cudaError_t score_lattice(const LatticeArgs& in, cudaStream_t stream) {
  LatticeArgs a = in;
  if (a.n_blocks < 0 || a.block_size < 2 || a.k < 1 || a.k > 64 || a.rank < 1 ||
      a.rank > 1024 || a.n_ranks < 1 || !valid_type(a.cb_type))
    return cudaErrorInvalidValue;
  if (a.n_blocks == 0) return cudaSuccess;
  const int L = a.block_size - 1;
  if ((int64_t)a.n_blocks * L > INT_MAX || a.layout.k != a.k ||
      a.layout.n_drafted < a.n_blocks * L || a.layout.n_blocks < a.n_blocks)
    return cudaErrorInvalidValue;
  if (!a.recv || !a.anchors || !a.g || !a.path || !a.n_emitted || !a.lattice ||
      !a.choices || !a.block_counters)
    return cudaErrorInvalidValue;
  if (a.cb_type == DFSEL_TYPE_Q8_0 && a.rank % kQ8Block != 0) return cudaErrorInvalidValue;
  if (a.layout.sharded ? a.layout.row_pad < row_bytes(a.cb_type, a.rank)
                       : (!a.e_prev || !a.e_next))
    return cudaErrorInvalidValue;
  if (a.packed) {
    if (a.packed_row_stride == 0) a.packed_row_stride = (size_t)a.n_embd * 4;
    if (a.n_embd < (int64_t)a.k + (int64_t)a.k * a.k ||
        a.packed_row_stride < (size_t)a.n_embd * 4 || a.packed_row_stride % 4 != 0)
      return cudaErrorInvalidValue;
  }
  // Wide loads: load4 reads 4 elements at once (16 bytes for F32, 8 for F16/BF16, 2-byte
  // aligned blocks for Q8_0); 2-byte types go 8 elements (16 bytes) at once when R allows.
  const size_t align = row_alignment(a);
  const bool two_byte = a.cb_type == DFSEL_TYPE_F16 || a.cb_type == DFSEL_TYPE_BF16;
  const bool vec = a.rank % 4 == 0 && align >= (a.cb_type == DFSEL_TYPE_F32 ? 16u : two_byte ? 8u : 2u);
  const bool vec8 = vec && two_byte && a.rank % 8 == 0 && align >= 16;
  if (a.k <= 8) return launch<8>(a, vec, vec8, stream);
  if (a.k <= 16) return launch<16>(a, vec, vec8, stream);
  if (a.k <= 32) return launch<32>(a, vec, vec8, stream);
  return launch<64>(a, vec, vec8, stream);
}

}  // namespace dfsel::cuda
