// The DSpark chain of one rank as one cooperative launch (kernels/dspark_launch.cuh).
//
// Built with -fmad=false (host/CMakeLists.txt), as the pass is: l, the keys, the normaliser's
// terms and the confidence round where kernels/common/dspark_math.cuh rounds them.
#include "kernels/dspark_launch.cuh"

#include "kernels/block/dspark_merge.cuh"
#include "kernels/block/dspark_mma.cuh"
#include "kernels/block/dspark_rows.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/common/grid_barrier.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/warp.cuh"
#include "kernels/dspark_chain.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {

namespace {

// The kernel's dynamic shared memory, by offset: e of every group as BF16 terms (the pass's
// layout), e as floats and the state of every block (this CTA's copy of the chain), the
// records of the step taken, each warp's bests, and per block the normaliser part, its
// base-logits row and its place in the lists of the step.
struct LaunchCarve {
  size_t terms, e, state, rec, warp_best, norm_lo, norm_hi, z_row, active, emitted, misc, total;
};

DFSEL_HD LaunchCarve launch_carve(int e_pitch, int terms, int nb, int R8, int max_blocks, int warps) {
  LaunchCarve c;
  size_t off = 0;
  auto take = [&](size_t bytes, size_t align) {
    off = (off + align - 1) / align * align;
    const size_t at = off;
    off += bytes;
    return at;
  };
  const size_t mb = (size_t)max_blocks, groups = (mb + nb - 1) / nb;
  c.terms = take(groups * terms * nb * (size_t)e_pitch, 16);
  c.e = take(mb * R8 * sizeof(float), 16);
  c.state = take(mb * sizeof(DSparkChainState), 16);
  c.rec = take(mb * sizeof(DSparkRecord), 16);
  c.warp_best = take((size_t)warps * mb * sizeof(DSparkWarpBest), 16);
  c.norm_lo = take(mb * 8, 8);
  c.norm_hi = take(mb * 8, 8);
  c.z_row = take(mb * 8, 8);
  c.active = take(mb * 4, 4);
  c.emitted = take(mb * 4, 4);
  c.misc = take(4 * 4, 4);
  c.total = (off + 127) / 128 * 128;
  return c;
}

// NB: the blocks of a group (8: mma's columns); TERMS: e's BF16 terms (1 or 3);
// SAMPLING: temperature > 0 (greedy steps keep no l and no normaliser, and fewer registers).
template <int NB, int TERMS, bool SAMPLING, int WARPS, int MINB>
__global__ void __launch_bounds__(WARPS * 32, MINB)
    dspark_launch_kernel(const __grid_constant__ DSparkChainArgs a, const int32_t e_pitch) {
  extern __shared__ __align__(128) uint8_t smem[];
  const LaunchCarve sc = launch_carve(e_pitch, TERMS, NB, a.R8, a.max_blocks, WARPS);
  uint8_t* terms = smem + sc.terms;
  float* e_f = reinterpret_cast<float*>(smem + sc.e);
  DSparkChainState* st_s = reinterpret_cast<DSparkChainState*>(smem + sc.state);
  DSparkRecord* rec_s = reinterpret_cast<DSparkRecord*>(smem + sc.rec);
  DSparkWarpBest* warp_best = reinterpret_cast<DSparkWarpBest*>(smem + sc.warp_best);
  unsigned long long* norm_lo = reinterpret_cast<unsigned long long*>(smem + sc.norm_lo);
  unsigned long long* norm_hi = reinterpret_cast<unsigned long long*>(smem + sc.norm_hi);
  const uint8_t** z_row = reinterpret_cast<const uint8_t**>(smem + sc.z_row);
  int32_t* active = reinterpret_cast<int32_t*>(smem + sc.active);
  int32_t* emitted = reinterpret_cast<int32_t*>(smem + sc.emitted);
  int32_t* misc = reinterpret_cast<int32_t*>(smem + sc.misc);

  static_assert(NB == 8, "the shared Philox calls take a lane's 2 slots of 8 blocks");
  constexpr int kSlots = NB / 4, kTiles = TERMS * NB / 8;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, nr = lane & 15, hh = lane >> 4;
  const bool writer = blockIdx.x == 0;
  constexpr bool sampling = SAMPLING;
  const int64_t vs = a.v_end - a.v_begin;
  const size_t slot = (size_t)a.max_blocks * (size_t)vs;
  const int chunks = a.R / 32;
  // The warp's slices of 16 rows: wg, wg + tw, ... (strided over the grid's warps, so that the
  // whole grid sweeps one region of W2 at a time); even steps take them backwards.
  const int64_t n_slices = (vs + 15) / 16;
  const int64_t wg = (int64_t)blockIdx.x * WARPS + warp, tw = (int64_t)gridDim.x * WARPS;
  const int n_mine = wg < n_slices ? (int)((n_slices - 1 - wg) / tw + 1) : 0;
  const DSparkLayout lay = make_dspark_layout(a.n_blocks, false, 0);  // rec_s: one rank's records

  // W2 is the plan's, written by no kernel: the first slice is loaded before anything else.
  uint4 wa[kDSparkMmaChunks], wb[kDSparkMmaChunks];
  int64_t held = -1;  // the slice in wa, wb
  auto load = [&](int64_t sl) {
    dspark_slice_loads<false>(a.w2, a.w2_stride, sl * 16 + g8, sl * 16 + g8 + 8, vs, chunks, lane, wa, wb);
    held = sl;
  };
  if (n_mine > 0) load(wg);
  for (int b = tid; b < a.n_blocks; b += blockDim.x) st_s[b] = a.state[b];
  for (int i = tid; i < a.n_blocks * a.R8; i += blockDim.x) e_f[i] = a.e[i];

  auto slot_block = [](int q, int l) { return dspark_mma_column(q, l); };
  uint64_t bk[kSlots];
  float bl[kSlots];
  uint32_t bm[kSlots];
  auto reset = [&] {
#pragma unroll
    for (int q = 0; q < kSlots; ++q) bk[q] = 0, bl[q] = 0.0f, bm[q] = 0;
  };

  const int last = a.N + (sampling ? 1 : 0);
  for (int k = 1; k <= last; ++k) {
    __syncthreads();  // the states of the step before taken, its lists and bests read
    const bool reads_w2 = k <= a.N;
    for (int i = tid; i < WARPS * a.n_blocks; i += blockDim.x) warp_best[i] = DSparkWarpBest{0, 0.0f, 0u};
    for (int b = tid; b < a.n_blocks; b += blockDim.x) norm_lo[b] = 0, norm_hi[b] = 0;
    // The blocks that draft this step (with their base-logits rows) and those whose last
    // step's normaliser is pending, in block order.
    if (warp == 0) dspark_step_lists(a, st_s, k, reads_w2, sampling, lane, active, z_row, emitted, nullptr, misc);
    __syncthreads();
    const int n_act = misc[0], n_emit = misc[1];
    const int n_groups = (n_act + NB - 1) / NB;
    dspark_fill_e_terms<NB, TERMS>(terms, e_pitch, e_f, a.R8, a.R, active, n_groups, n_act);
    __syncthreads();

    const bool need_w2 = reads_w2 && n_act > 0;
    const bool back = (k & 1) == 0;
    const float* l_prev = a.l_store + (size_t)((k - 1) & 1) * slot;
    float* l_now = a.l_store + (size_t)(k & 1) * slot;
    auto slice_of = [&](int i) { return wg + (int64_t)(back ? n_mine - 1 - i : i) * tw; };
    // l, the key, slot q's best and largest l, and l stored (sampling) of row v for the block in
    // column gi of the active list, from its dot product.
    auto take = [&](int q, int64_t v, int gi, float z, float dot, float s, float gumbel) {
      const int b = active[gi];
      const int32_t id = (int32_t)(a.v_begin + v);
      const float l = markov_logit(a.transform, z, dot, s);
      float key = l;
      if constexpr (SAMPLING) key = markov_sample_key(l, a.temperature, gumbel);
      const uint64_t ck = cand_key(key, id);
      if (ck > bk[q]) bk[q] = ck, bl[q] = l;
      bm[q] = max(bm[q], value_key(l));
      if constexpr (SAMPLING) l_now[(size_t)b * vs + v] = l;
    };
    // Into the warp's bests: a maximum over the lanes that share a slot, kept by lanes 0..3.
    auto flush = [&](int g) {
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        const int gi = g * NB + slot_block(q, lane);
        const bool keeps = lane < 4 && gi < n_act;
        dspark_meet_slot<4>(bk[q], bl[q], bm[q], keeps, keeps ? &warp_best[warp * a.n_blocks + active[gi]] : nullptr);
      }
    };
    // Step k - 1's normaliser over a slice's rows: lanes 0-15 and 16-31 each a pending block.
    auto norm16 = [&](int base, int64_t vn, float l) {
      const int ei = base + hh;
      uint64_t u = 0;
      if (vn < vs && ei < n_emit) u = (uint64_t)(norm_weight(l, st_s[emitted[ei]].last_max, a.temperature) * kNormOne);
#pragma unroll
      for (int off = 1; off < 16; off <<= 1) u += shfl_xor_u64(u, off);
      if (nr == 0 && ei < n_emit) add_norm(&norm_lo[emitted[ei]], &norm_hi[emitted[ei]], u);
    };
    reset();
    for (int i = 0; i < n_mine; ++i) {
      const int64_t sl = slice_of(i);
      if (need_w2 && held != sl) load(sl);
      const int64_t r0 = sl * 16, va = r0 + g8, vb = va + 8, vn = r0 + nr;
      float lp[kDSparkNormAhead];  // the first pending blocks' last l
#pragma unroll
      for (int q = 0; q < kDSparkNormAhead; ++q) {
        const int ei = 2 * q + hh;
        lp[q] = SAMPLING && vn < vs && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + vn] : 0.0f;
      }
      for (int g = 0; g < n_groups; ++g) {
        float z[2][kSlots], sc2[2];
        dspark_slice_inputs<NB>(a, z_row, n_act, g, va, vs, lane, z, sc2);
        float acc[kTiles][4];
        dspark_slice_mma<kTiles>(wa, wb, terms + (size_t)g * kTiles * 8 * e_pitch, e_pitch, chunks, lane, acc);
        // The next slice's loads, in flight under this one's keys.
        if (g == n_groups - 1 && i + 1 < n_mine) load(slice_of(i + 1));
        // Sampling: the Gumbel noise of the lane's elements. The 8 lanes of a column t share
        // the slice's 4 x 2 Philox calls (ids 4c .. 4c + 3 of the 16 rows, its 2 slots'
        // blocks), one a lane, and pass the words round: the bits of markov_gumbel (a.v_begin
        // is 0, and slices start at multiples of 16).
        float gum[2][kSlots];
        if constexpr (SAMPLING) {
          const int gi_mine = g * NB + slot_block(g8 >> 2, lane);
          const Philox4 mine = markov_philox(a.seed, (uint32_t)(gi_mine < n_act ? active[gi_mine] : 0), (uint32_t)k,
                                             (uint32_t)(r0 >> 2) + (uint32_t)(g8 & 3));
#pragma unroll
          for (int ri = 0; ri < 2; ++ri)
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
              const int src = ((2 * ri + (g8 >> 2) + 4 * q) << 2) | (lane & 3);
              uint32_t w[4];
#pragma unroll
              for (int x = 0; x < 4; ++x) w[x] = __shfl_sync(kFullWarp, mine.v[x], src);
              const int sel = g8 & 3;
              const uint32_t word = sel == 0 ? w[0] : sel == 1 ? w[1] : sel == 2 ? w[2] : w[3];
              const int64_t v = ri ? vb : va;
              const int gi = g * NB + slot_block(q, lane);
              gum[ri][q] = v < vs && gi < n_act ? markov_gumbel_of_word(word) : 0.0f;
            }
        }
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const int64_t v = ri ? vb : va;
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int gi = g * NB + slot_block(q, lane);
            if (v < vs && gi < n_act)
              take(q, v, gi, z[ri][q], dspark_slice_dot<NB, TERMS>(acc, ri, q), sc2[ri], SAMPLING ? gum[ri][q] : 0.0f);
          }
        }
        if (n_groups > 1) {
          flush(g);
          reset();
        }
      }
      if constexpr (SAMPLING) {
#pragma unroll
        for (int q = 0; q < kDSparkNormAhead; ++q)
          if (2 * q < n_emit) norm16(2 * q, vn, lp[q]);
        for (int base = 2 * kDSparkNormAhead; base < n_emit; base += 2) {
          const int ei = base + hh;
          norm16(base, vn, vn < vs && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + vn] : 0.0f);
        }
      }
    }
    if (n_groups == 1) flush(0);
    __syncthreads();

    // The CTA's part of the step's slot: its warps' bests met, then atomics. The CTA that holds
    // the best key wrote l at its id (sampling: every l), where the take below reads it.
    for (int b = tid; b < a.n_blocks; b += blockDim.x) {
      uint64_t kk = 0;
      float lg = 0.0f;
      uint32_t mm = 0;
      for (int w = 0; w < WARPS; ++w) {
        const DSparkWarpBest& x = warp_best[w * a.n_blocks + b];
        if (x.key > kk) kk = x.key, lg = x.logit;
        mm = max(mm, x.row_max);
      }
      DSparkStepSlot* s = a.slots + (size_t)k * a.max_blocks + b;
      if (kk != 0) {
        atomicMax(&s->key, (unsigned long long)kk);
        if (!sampling) l_now[(size_t)b * vs + (cand_from_key(kk).id - a.v_begin)] = lg;
      }
      if (mm != 0) atomicMax(&s->row_max, mm);
      const unsigned long long lo = norm_lo[b], hi = norm_hi[b];
      if ((lo | hi) != 0) {
        const unsigned long long old = atomicAdd(&s->norm_lo, lo);
        atomicAdd(&s->norm_hi, hi + (old + lo < old ? 1ull : 0ull));
      }
    }
    // The next step's first slice: its base logits asked into the L2 now, so that the loads
    // after the barrier find them there (W2's rows are in registers already when the walk
    // turns, as it does every step).
    if (k < a.N && n_mine > 0 && lane < n_act) {
      const int64_t v = (k & 1 ? wg + (int64_t)(n_mine - 1) * tw : wg) * 16;
      const uint8_t* row = a.logits + map_row(a.row_map, (int64_t)active[lane] * a.N + k) * a.logits_stride;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(row + (size_t)v * (a.logits_type == DFSEL_TYPE_F32 ? 4 : 2)));
    }
    grid_barrier(a.barrier);

    // Every CTA takes the step, a warp a block: the slot as one rank's record, into this CTA's
    // state, e and confidence; CTA 0 writes the outputs.
    for (int b = warp; b < a.n_blocks; b += WARPS) {
      const DSparkStepSlot* s = a.slots + (size_t)k * a.max_blocks + b;
      DSparkChainState st = st_s[b];
      float* e = e_f + (size_t)b * a.R8;
      const uint64_t kk = (uint64_t)__ldcg(&s->key);
      const CandRec c = cand_from_key(kk);
      const bool cand = reads_w2 && kk != 0 && st.drafting;
      // Without d2t a candidate is the winner and its id the next row's: its loads go out now,
      // beside lane 0's of l.
      if (cand && !a.d2t) dspark_set_e(a, e, a.w1 + (size_t)(c.id - (a.sharded_w1 ? a.v_begin : 0)) * a.w1_stride, lane);
      int won = 0;
      int32_t target = 0;
      if (lane == 0) {
        DSparkMerged m;
        m.anchor_rank = -1;
        m.row_max = row_max_of(__ldcg(&s->row_max));
        m.norm = NormSum{(uint64_t)__ldcg(&s->norm_lo), (uint64_t)__ldcg(&s->norm_hi)};
        DSparkRecord rec = empty_dspark_record();
        if (cand) {
          const int64_t local = c.id - a.v_begin;
          rec.key = c.z;
          rec.draft_id = c.id;
          rec.target_id = a.d2t ? a.d2t[local] : c.id;
          rec.logit = __ldcg(l_now + (size_t)b * vs + local);
          rec.row_max = m.row_max;
        }
        m.winner = rec.draft_id >= 0 ? 0 : -1;
        rec_s[b] = rec;
        won = dspark_take_merged(a, m, lay, reinterpret_cast<const uint8_t*>(rec_s), b, k, &st, writer ? &a.out : nullptr);
        target = rec.target_id;
      }
      won = __shfl_sync(kFullWarp, won, 0);
      target = __shfl_sync(kFullWarp, target, 0);
      if (won && a.d2t) dspark_set_e(a, e, a.w1 + (size_t)target * a.w1_stride, lane);
      __syncwarp();
      if (won && k < a.N) dspark_confidence_gate(a, b, k + 1, e, lane, &st.drafting, writer);
      if (lane == 0) {
        st_s[b] = st;
        if (writer) a.state[b] = st;
      }
    }
  }
}

using LaunchKernel = void (*)(DSparkChainArgs, int32_t);

template <int TERMS, bool SAMPLING>
LaunchKernel launch_kernel() {
  return dspark_launch_kernel<kDSparkLaunchGroup, TERMS, SAMPLING, kDSparkLaunchWarps, kDSparkLaunchCtasPerSm>;
}

}  // namespace

bool dspark_launch_supported(const DSparkChainArgs& a) {
  return a.n_ranks == 1 && a.v_begin % 4 == 0 && dspark_mma_supported(a);
}

cudaError_t dspark_launch_setup(const DSparkChainArgs& a, int device, DSparkLaunch* out) {
  if (!dspark_launch_supported(a)) return cudaErrorInvalidValue;
  const int terms = a.w1_type == DFSEL_TYPE_BF16 ? 1 : 3;  // e is W1's row widened
  const int nb = kDSparkLaunchGroup;
  DSparkLaunch l{};
  l.kernels[0] = terms == 1 ? launch_kernel<1, false>() : launch_kernel<3, false>();
  l.kernels[1] = terms == 1 ? launch_kernel<1, true>() : launch_kernel<3, true>();
  l.e_pitch = dspark_pitch((size_t)a.R * 2);
  l.threads = kDSparkLaunchWarps * 32;
  l.smem = launch_carve(l.e_pitch, terms, nb, a.R8, a.max_blocks, kDSparkLaunchWarps).total;
  int optin = 0, sms = 0, per_sm = kDSparkLaunchCtasPerSm;
  cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  if (l.smem > (size_t)optin) return cudaErrorInvalidValue;
  for (LaunchKernel k : l.kernels) {  // one grid for both: every CTA of either must be resident
    int n = 0;
    e = raise_shared_memory_limit((const void*)k, l.smem);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k, l.threads, l.smem);
    if (e != cudaSuccess) return e;
    per_sm = n < per_sm ? n : per_sm;
  }
  if (per_sm < 1) return cudaErrorInvalidValue;
  l.grid = sms * per_sm;
  *out = l;
  return cudaSuccess;
}

cudaError_t dspark_launch_run(const DSparkChainArgs& a, const DSparkLaunch& l, cudaStream_t stream) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)l.grid);
  cfg.blockDim = dim3((unsigned)l.threads);
  cfg.dynamicSmemBytes = l.smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, l.kernels[a.temperature > 0.0f ? 1 : 0], a, l.e_pitch);
}

}  // namespace dfsel::cuda
