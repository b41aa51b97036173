// The DSpark chain of one rank as one cooperative launch (kernels/dspark_launch.cuh).
//
// Built with -fmad=false (host/CMakeLists.txt), as the pass is: l, the keys, the normaliser's
// terms and the confidence round where kernels/common/dspark_math.cuh rounds them.
#include "kernels/dspark_launch.cuh"

#include <cstring>

#include "kernels/block/dspark_merge.cuh"
#include "kernels/block/dspark_mma.cuh"
#include "kernels/block/dspark_rows.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/common/grid_barrier.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/warp.cuh"
#include "kernels/dspark_chain.cuh"
#include "kernels/policy.cuh"

namespace dfsel::cuda {

namespace {

// The kernel's dynamic shared memory, by offset: each warp's stage (staged builds), e of every
// group as BF16 terms (the pass's layout), e as floats and the state of every block (this CTA's
// copy of the chain), the records of the step taken, each warp's bests, and per block the
// normaliser part, its base-logits row, its flags and its place in the lists of the step.
struct LaunchCarve {
  size_t stage, terms, e, state, rec, warp_best, norm_lo, norm_hi, z_row, active, emitted, flags, misc, total;
};

DFSEL_HD LaunchCarve launch_carve(int e_pitch, int terms, int nb, int R8, int max_blocks, int warps, bool staged) {
  LaunchCarve c;
  size_t off = 0;
  auto take = [&](size_t bytes, size_t align) {
    off = (off + align - 1) / align * align;
    const size_t at = off;
    off += bytes;
    return at;
  };
  const size_t mb = (size_t)max_blocks, groups = (mb + nb - 1) / nb;
  c.stage = take(staged ? (size_t)warps * kDSparkStagePieces * 16 : 0, 16);
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
  c.flags = take(mb, 4);
  c.misc = take(4 * 4, 4);
  c.total = (off + 127) / 128 * 128;
  return c;
}

// NB: the blocks of a group (8: mma's columns); TERMS: e's BF16 terms (1 or 3);
// SAMPLING: temperature > 0 (greedy steps keep no l and no normaliser, and fewer registers);
// STAGED: slices go through the warp's stage in shared memory by asynchronous copies, read a
// chunk at a time as they are multiplied, the next slice's chunk c copied over chunk c once it is
// read; else each slice is loaded into registers at its own start.
// Steps k_first .. k_last: on one rank every step (cooperative: the grid barrier between them);
// on several one step, whose last CTA writes the rank's records (no barrier).
template <int NB, int TERMS, bool SAMPLING, int WARPS, int MINB, bool STAGED>
__global__ void __launch_bounds__(WARPS * 32, MINB)
    dspark_launch_kernel(const __grid_constant__ DSparkChainArgs a, const int32_t e_pitch, const int32_t k_first,
                         const int32_t k_last, const uint32_t keep) {
  extern __shared__ __align__(128) uint8_t smem[];
  const LaunchCarve sc = launch_carve(e_pitch, TERMS, NB, a.R8, a.max_blocks, WARPS, STAGED);
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
  uint8_t* flags = smem + sc.flags;
  int32_t* misc = reinterpret_cast<int32_t*>(smem + sc.misc);

  static_assert(NB == 8 || NB == 16, "a lane's Philox calls cover its slots two at a time");
  constexpr int kSlots = NB / 4, kTiles = TERMS * NB / 8, kCalls = kSlots / 2;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g8 = lane >> 2, nr = lane & 15, hh = lane >> 4;
  const bool writer = blockIdx.x == 0;
  constexpr bool sampling = SAMPLING;
  const int vs = (int)(a.v_end - a.v_begin);  // dspark_launch_supported: below 2^31 - 16
  const size_t slot = (size_t)a.max_blocks * (size_t)vs;
  const int chunks = a.R / 32;
  // The warp's slices of 16 rows: wg, wg + tw, ... (strided over the grid's warps, so that the
  // whole grid sweeps one region of W2 at a time); even steps take them backwards.
  const int n_slices = (vs + 15) / 16;
  const int wg = blockIdx.x * WARPS + warp, tw = gridDim.x * WARPS;
  const int n_mine = wg < n_slices ? (n_slices - 1 - wg) / tw + 1 : 0;
  const DSparkLayout lay = make_dspark_layout(a.n_blocks, false, 0);  // rec_s: one rank's records

  // W2 is the plan's, written by no kernel: the first slice is loaded before anything else.
  // Staged builds read it chunk by chunk from the warp's stage (wa, wb unused), others hold it
  // in wa, wb.
  uint4 wa[kDSparkMmaChunks], wb[kDSparkMmaChunks];
  int held = -1;  // the slice in wa, wb, or in (or on its way to) the warp's stage
  uint4* stage = reinterpret_cast<uint4*>(smem + sc.stage) + (size_t)warp * kDSparkStagePieces;
  // The L2 policy of slice sl's loads in step k (DSparkLaunch::keep): a fixed share of the
  // slices kept for the next steps, the rest streamed; the last step leaves the kept ones as
  // any line, so that nothing of W2 outlives the chain ahead of other data. 40503 is 65536 over
  // the golden ratio: the kept slices of any run of consecutive slices are spread evenly.
  auto priority = [&](int sl, int k) -> int {
    if (keep == kDSparkKeepOff) return kDSparkL2None;
    if ((((uint32_t)sl * 40503u) & 0xffffu) >= keep) return kDSparkL2Stream;
    return k >= a.N ? kDSparkL2Normal : kDSparkL2Keep;
  };
  // Slice sl into the warp's stage (its copies issued unless on their way already) or into
  // wa, wb.
  auto load = [&](int sl, int k) {
    if constexpr (STAGED) {
      if (held != sl) {
        const DSparkSliceCopy cp = dspark_slice_copy(a.w2, a.w2_stride, sl * 16 + g8, vs, lane, priority(sl, k));
        for (int c = 0; c < chunks; ++c) cp.copy(stage, c, lane);
        cp_async_commit();
      }
    } else {
      dspark_slice_loads<false>(a.w2, a.w2_stride, sl * 16 + g8, sl * 16 + g8 + 8, vs, chunks, lane, wa, wb);
    }
    held = sl;
  };
  // The first step's first slice (even steps walk backwards: a launch a step on several ranks).
  if (n_mine > 0) load(k_first & 1 ? wg : wg + (n_mine - 1) * tw, k_first);
  chain_release();
  chain_wait();  // a step of several ranks: the merge before it has written the states and e
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

  const bool ranks = a.n_ranks > 1;
  for (int k = k_first; k <= k_last; ++k) {
    __syncthreads();  // the states of the step before taken, its lists and bests read
    const bool reads_w2 = k <= a.N;
    for (int i = tid; i < WARPS * a.n_blocks; i += blockDim.x) warp_best[i] = DSparkWarpBest{0, 0.0f, 0u};
    for (int b = tid; b < a.n_blocks; b += blockDim.x) norm_lo[b] = 0, norm_hi[b] = 0;
    // The blocks that draft this step (with their base-logits rows) and those whose last
    // step's normaliser is pending, in block order.
    if (warp == 0) dspark_step_lists(a, st_s, k, reads_w2, sampling, lane, active, z_row, emitted, flags, misc);
    __syncthreads();
    const int n_act = misc[0], n_emit = misc[1];
    const int n_groups = (n_act + NB - 1) / NB;
    dspark_fill_e_terms<NB, TERMS>(terms, e_pitch, e_f, a.R8, a.R, active, n_act);
    __syncthreads();

    const bool need_w2 = reads_w2 && n_act > 0;
    const bool back = (k & 1) == 0;
    const float* l_prev = a.l_store + (size_t)((k - 1) & 1) * slot;
    float* l_now = a.l_store + (size_t)(k & 1) * slot;
    auto slice_of = [&](int i) { return wg + (back ? n_mine - 1 - i : i) * tw; };
    // l, the key, slot q's best and largest l, and l stored (sampling) of row v for the block in
    // column gi of the active list, from its dot product.
    auto take = [&](int q, int v, int gi, float z, float dot, float s, float gumbel) {
      const int32_t id = (int32_t)(a.v_begin + v);
      const float l = markov_logit(a.transform, z, dot, s);
      float key = l;
      if constexpr (SAMPLING) key = markov_sample_key(l, a.temperature, gumbel);
      const uint64_t ck = cand_key(key, id);
      if (ck > bk[q]) bk[q] = ck, bl[q] = l;
      // Greedy: the key is l's, so the row's largest l is the best key's (flush).
      if constexpr (SAMPLING) bm[q] = max(bm[q], value_key(l));
      if constexpr (SAMPLING) l_now[(size_t)active[gi] * vs + v] = l;
    };
    // Into the warp's bests: a maximum over the lanes that share a slot, kept by lanes 0..3.
    auto flush = [&](int g) {
#pragma unroll
      for (int q = 0; q < kSlots; ++q) {
        const int gi = g * NB + slot_block(q, lane);
        const bool keeps = lane < 4 && gi < n_act;
        if constexpr (!SAMPLING) bm[q] = (uint32_t)(bk[q] >> 32);
        dspark_meet_slot<4>(bk[q], bl[q], bm[q], keeps, keeps ? &warp_best[warp * a.n_blocks + active[gi]] : nullptr);
      }
    };
    reset();
    // The base-logits rows of the lane's slots, found once a step where one group holds every
    // block (else at each group's turn).
    const uint8_t* zr[kSlots];
    uint32_t held_slots = n_groups == 1 ? dspark_slot_rows<NB>(z_row, n_act, 0, lane, zr) : 0u;
    for (int i = 0; i < n_mine; ++i) {
      const int sl = slice_of(i);
      if (need_w2 && held != sl) load(sl, k);
      if (STAGED && need_w2) cp_async_wait(0);  // the lane's copies of the slice have landed
      const int r0 = sl * 16, va = r0 + g8, vb = va + 8;
      for (int g = 0; g < n_groups; ++g) {
        if (n_groups > 1) held_slots = dspark_slot_rows<NB>(z_row, n_act, g, lane, zr);
        float z[2][kSlots], sc2[2];
        dspark_slice_z<NB>(a, zr, va, vs, z, sc2);
        float acc[kTiles][4];
        const uint8_t* e_g = terms + (size_t)g * kTiles * 8 * e_pitch;
        const bool next = g == n_groups - 1 && i + 1 < n_mine;
        if (STAGED && next) {  // the next slice's chunk c copied over this one's once read
          const int ns = slice_of(i + 1);
          const DSparkSliceCopy cp = dspark_slice_copy(a.w2, a.w2_stride, ns * 16 + g8, vs, lane, priority(ns, k));
          dspark_staged_mma<kTiles>(stage, e_g, e_pitch, chunks, lane, acc, [&](int c) { cp.copy(stage, c, lane); });
          cp_async_commit();
          held = ns;
        } else if (STAGED) {
          dspark_staged_mma<kTiles>(stage, e_g, e_pitch, chunks, lane, acc);
        } else {
          dspark_slice_mma<kTiles>(wa, wb, e_g, e_pitch, chunks, lane, acc);
        }
        // Sampling: the Gumbel noise of the lane's elements. The 8 lanes of a column t share
        // the slice's 4 x kSlots Philox calls (ids 4c .. 4c + 3 of the 16 rows, for the
        // blocks of its slots), kCalls a lane, and pass the words round: lane g8 calls for row
        // quad g8 % 4 and slots g8 / 4 + 2j, the bits of markov_gumbel (a.v_begin is a multiple
        // of 4, and slices start at multiples of 16).
        float gum[2][kSlots];
        if constexpr (SAMPLING) {
          Philox4 mine[kCalls];
#pragma unroll
          for (int j = 0; j < kCalls; ++j) {
            const int gi_mine = g * NB + slot_block((g8 >> 2) + 2 * j, lane);
            mine[j] = markov_philox(a.seed, (uint32_t)(gi_mine < n_act ? active[gi_mine] : 0), (uint32_t)k,
                                    (uint32_t)((a.v_begin + r0) >> 2) + (uint32_t)(g8 & 3));
          }
#pragma unroll
          for (int ri = 0; ri < 2; ++ri)
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
              const int src = ((2 * ri + (g8 >> 2) + 4 * (q & 1)) << 2) | (lane & 3);
              uint32_t w[4];
#pragma unroll
              for (int x = 0; x < 4; ++x) w[x] = __shfl_sync(kFullWarp, mine[q >> 1].v[x], src);
              const int sel = g8 & 3;
              const uint32_t word = sel == 0 ? w[0] : sel == 1 ? w[1] : sel == 2 ? w[2] : w[3];
              const int v = ri ? vb : va;
              gum[ri][q] = v < vs && (held_slots >> q & 1u) ? markov_gumbel_of_word(word) : 0.0f;
            }
        }
#pragma unroll
        for (int ri = 0; ri < 2; ++ri) {
          const int v = ri ? vb : va;
#pragma unroll
          for (int q = 0; q < kSlots; ++q) {
            const int gi = g * NB + slot_block(q, lane);
            if (v < vs && (held_slots >> q & 1u))
              take(q, v, gi, z[ri][q], dspark_slice_dot<NB, TERMS>(acc, ri, q), sc2[ri], SAMPLING ? gum[ri][q] : 0.0f);
          }
        }
        if (n_groups > 1) {
          flush(g);
          reset();
        }
      }
    }
    if (n_groups == 1) flush(0);
    // Sampling: step k - 1's normaliser over the warp's rows, a pass of its own over l alone,
    // so that the product's loop holds none of it (an exact integer sum: any order). Lanes 0-15
    // and 16-31 take the pending blocks 2p and 2p + 1 of kDSparkNormPairs pairs p at once, a row
    // a lane; each lane sums its rows of every slice, kDSparkNormSlices slices' loads in flight
    // together, and the 16 lanes meet once a step.
    if constexpr (SAMPLING) {
      for (int p0 = 0; 2 * p0 < n_emit; p0 += kDSparkNormPairs) {
        NormSum acc[kDSparkNormPairs];
        float m[kDSparkNormPairs];
        const float* row[kDSparkNormPairs];
#pragma unroll
        for (int q = 0; q < kDSparkNormPairs; ++q) {
          const int ei = 2 * (p0 + q) + hh;
          const int b = ei < n_emit ? emitted[ei] : 0;
          acc[q] = NormSum{0, 0};
          m[q] = st_s[b].last_max;
          row[q] = ei < n_emit ? l_prev + (size_t)b * vs : nullptr;
        }
        for (int i0 = 0; i0 < n_mine; i0 += kDSparkNormSlices) {
          float lp[kDSparkNormSlices][kDSparkNormPairs];  // NaN: no row (weight 0, as l NaN)
#pragma unroll
          for (int u = 0; u < kDSparkNormSlices; ++u) {
            const int vn = i0 + u < n_mine ? slice_of(i0 + u) * 16 + nr : vs;
#pragma unroll
            for (int q = 0; q < kDSparkNormPairs; ++q) lp[u][q] = row[q] && vn < vs ? row[q][vn] : NAN;
          }
#pragma unroll
          for (int u = 0; u < kDSparkNormSlices; ++u)
#pragma unroll
            for (int q = 0; q < kDSparkNormPairs; ++q)
              norm_add(&acc[q], (uint64_t)(norm_weight(lp[u][q], m[q], a.temperature) * kNormOne), 0u);
        }
#pragma unroll
        for (int q = 0; q < kDSparkNormPairs; ++q) {
#pragma unroll
          for (int off = 1; off < 16; off <<= 1) {
            const uint64_t lo = shfl_xor_u64(acc[q].lo, off), hi = shfl_xor_u64(acc[q].hi, off);
            norm_add(&acc[q], lo, hi);
          }
          const int ei = 2 * (p0 + q) + hh;
          if (nr == 0 && ei < n_emit) {
            add_norm(&norm_lo[emitted[ei]], &norm_hi[emitted[ei]], acc[q].lo);
            if (acc[q].hi) atomicAdd(&norm_hi[emitted[ei]], (unsigned long long)acc[q].hi);
          }
        }
      }
    }
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
    // Several ranks, a launch a step: the last CTA to fold its part in writes this rank's
    // records from the slots, and the exchange and the merge take the step.
    if (ranks) {
      if (!dspark_last_cta(a.ticket, &misc[2])) continue;
      for (int b = warp; b < a.n_blocks; b += WARPS) {
        const DSparkStepSlot* s = a.slots + (size_t)k * a.max_blocks + b;
        const uint64_t kk = (uint64_t)__ldcg(&s->key);
        float lg = 0.0f;
        int32_t anchor = 0;
        uint32_t inputs = 0;
        uint32_t mm = 0;
        NormSum ns{0, 0};
        if (lane == 0) {
          if (kk != 0) lg = __ldcg(l_now + (size_t)b * vs + (cand_from_key(kk).id - a.v_begin));
          anchor = a.anchors[b], inputs = __ldcg(a.inputs + b), mm = __ldcg(&s->row_max);
          ns = NormSum{(uint64_t)__ldcg(&s->norm_lo), (uint64_t)__ldcg(&s->norm_hi)};
        }
        dspark_send_record(a, b, flags[b], kk, lg, mm, ns, anchor, inputs, lane);
      }
      continue;
    }
    // The next step's first slice: its base logits asked into the L2 now, so that the loads
    // after the barrier find them there (W2's rows are in registers already when the walk
    // turns, as it does every step).
    if (k < a.N && n_mine > 0 && lane < n_act) {
      const int64_t v = (int64_t)(k & 1 ? wg + (n_mine - 1) * tw : wg) * 16;
      const uint8_t* row = a.logits + map_row(a.row_map, (int64_t)active[lane] * a.N + k) * a.logits_stride;
      asm volatile("prefetch.global.L2 [%0];" ::"l"(row + (size_t)v * (a.logits_type == DFSEL_TYPE_F32 ? 4 : 2)));
    }
    grid_barrier(a.barrier, (uint32_t)k);

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
  if constexpr (STAGED) cp_async_wait(0);  // a slice staged for a step that read none lands first
}

using LaunchKernel = void (*)(DSparkChainArgs, int32_t, int32_t, int32_t, uint32_t);

// A build of the kernel: NB blocks a group, CTAs of W warps with registers capped for CTAS of
// them a SM, the next slice staged in shared memory (s) or loaded at its own start (n). Its
// kernels for e's 1 or 3 terms, greedy and sampling.
struct Instance {
  const char* name;
  const char* fallback;  // the build a default gives way to where it does not fit (many blocks)
  int nb, warps;
  bool staged;
  LaunchKernel k[2][2];  // [3 terms][sampling]
};

template <int NB, int CTAS, bool STAGED, int W>
Instance instance(const char* name, const char* fallback) {
  Instance x{name, fallback, NB, W, STAGED, {}};
  x.k[0][0] = dspark_launch_kernel<NB, 1, false, W, CTAS, STAGED>;
  x.k[0][1] = dspark_launch_kernel<NB, 1, true, W, CTAS, STAGED>;
  x.k[1][0] = dspark_launch_kernel<NB, 3, false, W, CTAS, STAGED>;
  x.k[1][1] = dspark_launch_kernel<NB, 3, true, W, CTAS, STAGED>;
  return x;
}

// The builds a plan can take by name (DFSEL_DSPARK_LAUNCH, to measure them); the first two are
// the defaults, for up to 8 blocks and for more. Measured on one H200 (V 163840, R 256, N 7,
// BF16, graph replay, 2026-12-04, staged builds reading the stage chunk by chunk, us): greedy
// at 1 / 4 / 8 blocks 8x2s 142.4 / 151.2 / 164.8, 8 warps at 3 CTAs a SM (80 registers,
// spilling) 151.3 / 167.1 / 170.0; at 16 blocks 16x1s16 187.6, 16x1s12 206.9, 16x2s 210.8.
// Sampling at 1 / 8 blocks: 8x2s 191.4 / 278.7, at 3 CTAs a SM 251.0 / 311.9. Earlier
// (2026-12-03, slices held whole in registers): 8x2n 186.7 / 197.8 / 209.5 greedy, 16x2n 283.6.
const Instance* find_instance(const char* name, int wide) {
  static const Instance all[] = {
      instance<8, 2, true, 8>("8x2s", "8x2n"),
      instance<16, 1, true, 16>("16x1s16", "16x1s12"),
      instance<16, 1, true, 12>("16x1s12", "16x2n"),
      instance<8, 2, false, 8>("8x2n", nullptr),
      instance<16, 2, false, 8>("16x2n", nullptr),
  };
  if (!name) return &all[wide];
  for (const Instance& x : all)
    if (std::strcmp(x.name, name) == 0) return &x;
  return nullptr;
}

// The kernels of build x (greedy, sampling) for e's terms and their grids, where they fit.
cudaError_t instance_kernels(const DSparkChainArgs& a, const Instance& x, int three, int32_t e_pitch, int optin,
                             int sms, DSparkLaunchKernel (&out)[2]) {
  for (int smp = 0; smp < 2; ++smp) {
    DSparkLaunchKernel& k = out[smp];
    k.fn = x.k[three][smp];
    k.threads = x.warps * 32;
    k.smem = launch_carve(e_pitch, three ? 3 : 1, x.nb, a.R8, a.max_blocks, x.warps, x.staged).total;
    int n = 0;
    cudaError_t e = k.smem > (size_t)optin ? cudaErrorInvalidValue
                                           : raise_shared_memory_limit((const void*)k.fn, k.smem);
    if (e == cudaSuccess) e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, k.fn, k.threads, k.smem);
    if (e == cudaSuccess && n < 1) e = cudaErrorInvalidValue;
    if (e != cudaSuccess) return e;
    k.grid = sms * n;
  }
  return cudaSuccess;
}

}  // namespace

uint32_t dspark_l2_keep(size_t w2_bytes, size_t l2_bytes, int sharers) {
  const double held = (double)w2_bytes * (sharers > 1 ? sharers : 1);
  if (held <= 0.0) return 65536u;
  const double share = kDSparkL2Fraction * (double)l2_bytes / held;
  return share >= 1.0 ? 65536u : (uint32_t)(share * 65536.0);
}

bool dspark_launch_supported(const DSparkChainArgs& a) {
  return a.v_begin % 4 == 0 && a.v_end - a.v_begin <= INT32_MAX - 16 && dspark_mma_supported(a);
}

cudaError_t dspark_launch_setup(const DSparkChainArgs& a, int device, const char* narrow, const char* wide,
                                DSparkLaunch* out) {
  if (!dspark_launch_supported(a)) return cudaErrorInvalidValue;
  const int three = a.w1_type == DFSEL_TYPE_BF16 ? 0 : 1;  // e is W1's row widened
  const char* named[2] = {narrow, wide};
  const Instance* pick[2] = {find_instance(narrow, 0), find_instance(wide, 1)};
  DSparkLaunch l{};
  l.e_pitch = dspark_mma_pitch(a.R);
  int optin = 0, sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  l.wide_from = INT32_MAX;
  for (int w = 0; w < 2; ++w) {
    if (!pick[w]) return cudaErrorNotSupported;
    // The wide kernels where a run can carry more blocks than a narrow group, and they fit.
    if (w == 1 && (pick[1]->nb <= pick[0]->nb || a.max_blocks <= pick[0]->nb)) break;
    DSparkLaunchKernel x2[2];
    e = instance_kernels(a, *pick[w], three, l.e_pitch, optin, sms, x2);
    // A default whose shared memory is short for the plan's blocks gives way to its fallbacks.
    while (e == cudaErrorInvalidValue && !named[w] && pick[w]->fallback) {
      pick[w] = find_instance(pick[w]->fallback, w);
      e = instance_kernels(a, *pick[w], three, l.e_pitch, optin, sms, x2);
    }
    if (w == 1 && e == cudaErrorInvalidValue) break;  // more groups of the narrow kernel instead
    if (e != cudaSuccess) return e;
    l.k[0][w] = x2[0], l.k[1][w] = x2[1];
    if (w == 1) l.wide_from = pick[0]->nb + 1;
  }
  *out = l;
  return cudaSuccess;
}

cudaError_t dspark_launch_run(const DSparkChainArgs& a, const DSparkLaunch& l, cudaStream_t stream) {
  const DSparkLaunchKernel& x = l.k[a.temperature > 0.0f ? 1 : 0][a.n_blocks >= l.wide_from ? 1 : 0];
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeCooperative;
  attr[0].val.cooperative = 1;
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3((unsigned)x.grid);
  cfg.blockDim = dim3((unsigned)x.threads);
  cfg.dynamicSmemBytes = x.smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, x.fn, a, l.e_pitch, (int32_t)1, a.N + (a.temperature > 0.0f ? 1 : 0), l.keep);
}

cudaError_t dspark_launch_step(const DSparkChainArgs& a, const DSparkLaunch& l, int32_t k, cudaStream_t stream) {
  const DSparkLaunchKernel& x = l.k[a.temperature > 0.0f ? 1 : 0][a.n_blocks >= l.wide_from ? 1 : 0];
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)x.grid), x.threads, x.smem, stream, 1, true, attr);
  return cudaLaunchKernelEx(&cfg, x.fn, a, l.e_pitch, k, k, l.keep);
}

}  // namespace dfsel::cuda
