// The DSpark chain's kernels and their launchers (kernels/dspark_chain.cuh).
//
// Built with -fmad=false (host/CMakeLists.txt): every product and sum rounds where the rules of
// kernels/common/dspark_math.cuh round it, as the host library's -ffp-contract=off has the
// reference do, so that every value is the reference's, bit for bit.
//
// A pass runs one wave of CTAs, each over the tiles blockIdx.x, blockIdx.x + grid, ... of the
// shard's rows, staged stages - 1 tiles ahead by 16-byte asynchronous copies. The best key,
// the largest l and the normaliser part of each block combine
// exactly (a maximum of keys, a maximum, an integer sum), so neither the tiles' order nor the
// CTAs' changes a bit of the records.
#include "kernels/dspark_chain.cuh"


#include "kernels/block/dspark_merge.cuh"
#include "kernels/block/dspark_mma.cuh"
#include "kernels/block/dspark_rows.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/policy.cuh"
#include "kernels/common/chain.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/warp.cuh"

namespace dfsel::cuda {

namespace {

// A word another CTA of this kernel wrote, read past the L1 cache.
__device__ __forceinline__ uint64_t ldcg_u64(const uint64_t* p) {
  return (uint64_t)__ldcg(reinterpret_cast<const unsigned long long*>(p));
}

// Per block: outputs cleared, its state, the hidden part of its confidence chains for every step,
// exchange 0's record (sharded W1 on several ranks), and where this rank has the anchor's W1 row
// (replicated W1, or one rank) e and the confidence before step 1. Launched normally: it is a
// run's first kernel; it lets the first pass stage its W2 tiles beside it.
__global__ void __launch_bounds__(kDSparkBeginThreads) dspark_begin_kernel(const DSparkChainArgs a) {
  chain_release();
  const int b = blockIdx.x, tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int32_t anchor = a.anchors[b];
  const bool valid = anchor >= 0 && anchor < a.n_target_vocab;
  for (int i = tid; i < a.N; i += blockDim.x) clear_dspark_cell(a.out, dspark_cell(b, a.N, i + 1));
  if (a.slots)  // the one-launch chain's
    for (int x = tid; x < a.N + 2; x += blockDim.x) a.slots[(size_t)x * a.max_blocks + b] = DSparkStepSlot{0, 0, 0, 0u, 0u};
  if (a.barrier && b == 0 && tid == 0) a.barrier[0] = 0;
  if (tid == 0) {
    a.out.n_emitted[b] = 0;
    a.state[b] = DSparkChainState{valid ? 1 : 0, 0, -INFINITY, 0.0f};
    if (!valid) flag_lowest_block(&a.error[0], b);
  }
  if (a.conf_w) {
    for (int i = tid; i < a.N * kDotChains; i += blockDim.x) {
      const int k0 = i / kDotChains, j = i % kDotChains;
      const uint8_t* h = a.hidden + map_row(a.row_map, (int64_t)b * a.N + k0) * a.hidden_stride;
      float c = 0.0f;
      for (int64_t r = j; r < a.n_embd; r += kDotChains)
        c = fmaf(load_elem(a.conf_w, a.conf_type, r), load_elem(h, a.hidden_type, r), c);
      a.hconf[((size_t)b * a.N + k0) * kDotChains + j] = c;
    }
  }
  // Several ranks: the inputs word of the block's records (dspark_inputs_word), the CTA's sum.
  uint32_t inputs = 0;
  if (a.n_ranks > 1) {
    __shared__ uint64_t warp_sum[kDSparkBeginThreads / 32];
    uint64_t h = 0;
    if (a.conf_w) {
      const size_t n = row_bytes(a.hidden_type, a.n_embd);
      for (int k0 = 0; k0 < a.N; ++k0)
        h += digest_row(a.hidden + map_row(a.row_map, (int64_t)b * a.N + k0) * a.hidden_stride, n, (uint64_t)k0, tid,
                        blockDim.x);
    }
    for (int off = 16; off > 0; off >>= 1) h += shfl_down_u64(h, off);
    if (lane == 0) warp_sum[warp] = h;
    __syncthreads();
    if (tid == 0) {
      for (int w = 1; w < (int)blockDim.x / 32; ++w) h += warp_sum[w];
      inputs = dspark_inputs_word(digest_scalars(a.temperature, a.p_min, a.seed, a.n_blocks), a.conf_w != nullptr, h,
                                  a.hidden_type, a.conf_w_digest);
      a.inputs[b] = inputs;
    }
  }
  const bool local_e = !a.sharded_w1 || a.n_ranks == 1;
  if (!local_e) {
    const DSparkLayout& lay = a.layout;
    const bool owns = valid && anchor >= a.v_begin && anchor < a.v_end;
    if (tid == 0) {
      DSparkRecord rec = empty_dspark_record();
      rec.flags = owns ? kRecordAnchorRow : 0;
      rec.anchor = anchor, rec.inputs = inputs;
      *dspark_record(lay, a.send, b) = rec;
    }
    if (owns) {
      const uint8_t* src = a.w1 + (size_t)(anchor - a.v_begin) * a.w1_stride;
      uint8_t* dst = dspark_record_row(lay, a.send, b);
      for (size_t i = tid; i < lay.row_bytes; i += blockDim.x) dst[i] = src[i];
    }
  } else if (valid && warp == 0) {
    dspark_set_e(a, a.e + (size_t)b * a.R8, a.w1 + (size_t)(anchor - (a.sharded_w1 ? a.v_begin : 0)) * a.w1_stride, lane);
  }
  __syncthreads();  // hconf and e written
  if (local_e && valid && warp == 0) dspark_prepare_step(a, b, 1, lane);
}

// Step k's pass over the shard (k = N + 1: step N's normaliser only). NB: blocks one reading of a
// staged row serves; the drafting blocks go through it in groups of NB. TERMS 0: the eight-chain
// product, two threads a row; 1 or 3: tensor cores (W2 BF16), a warp a slice of 16 rows, e in
// that many BF16 terms (kernels/block/dspark_mma.cuh).
template <dfsel_type W, int NB, int TERMS, int WARPS>
__global__ void __launch_bounds__(WARPS * 32, 1)
    dspark_pass_kernel(const DSparkChainArgs a, const DSparkPassShape p, const int32_t k) {
  extern __shared__ __align__(128) uint8_t smem[];
  const DSparkPassCarve sc = dspark_pass_carve(p, a.R8, a.max_blocks);
  float* e_s = reinterpret_cast<float*>(smem + sc.e);
  DSparkWarpBest* warp_best = reinterpret_cast<DSparkWarpBest*>(smem + sc.warp_best);
  unsigned long long* norm_lo = reinterpret_cast<unsigned long long*>(smem + sc.norm_lo);
  unsigned long long* norm_hi = reinterpret_cast<unsigned long long*>(smem + sc.norm_hi);
  float* last_max = reinterpret_cast<float*>(smem + sc.last_max);
  const uint8_t** z_row = reinterpret_cast<const uint8_t**>(smem + sc.z_row);
  int32_t* active = reinterpret_cast<int32_t*>(smem + sc.active);
  int32_t* emitted = reinterpret_cast<int32_t*>(smem + sc.emitted);
  uint8_t* flags = smem + sc.flags;
  int32_t* misc = reinterpret_cast<int32_t*>(smem + sc.misc);

  constexpr bool kMma = TERMS > 0;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, n_warps = blockDim.x >> 5;
  const int t = tid >> 1, h = tid & 1;  // the row of the tile and the half of it
  const int64_t vs = a.v_end - a.v_begin;
  const int64_t n_tiles = (vs + p.tile_rows - 1) / p.tile_rows;
  const int n_mine = (int64_t)blockIdx.x < n_tiles ? (int)((n_tiles - 1 - blockIdx.x) / gridDim.x + 1) : 0;
  const bool reads_w2 = k <= a.N;
  const bool sampling = a.temperature > 0.0f;
  auto row0_of = [&](int i) { return ((int64_t)blockIdx.x + (int64_t)i * gridDim.x) * p.tile_rows; };
  auto rows_of = [&](int i) { return (int)min((int64_t)p.tile_rows, vs - row0_of(i)); };
  const size_t stage_bytes = (size_t)p.tile_rows * p.pitch;
  auto stage_of = [&](int i) { return smem + (size_t)(i < p.stages ? i : i % p.stages) * stage_bytes; };
  const bool async_copy = reads_w2 && p.async_copy;
  const DSparkStageCopy copy = dspark_stage_copy(p.row_bytes, a.w2_stride, p.pitch, tid, blockDim.x);
  auto issue = [&](int i) {
    if (i < n_mine) dspark_stage_async(copy, stage_of(i), a.w2 + (size_t)row0_of(i) * a.w2_stride, rows_of(i));
    cp_async_commit();  // one group a tile, empty past the last: the waits count groups
  };

  // W2 is the plan's, written by no kernel: the first tiles are staged (tensor cores: the
  // warp's first slice loaded into registers) before the wait.
  if (async_copy)
    for (int i = 0; i < p.stages - 1; ++i) issue(i);
  const int64_t first_slice = (int64_t)blockIdx.x * n_warps + warp, slice_step = (int64_t)gridDim.x * n_warps;
  const int64_t n_slices = (vs + 15) / 16;
  uint4 wa[kDSparkMmaChunks], wb[kDSparkMmaChunks];
  if (kMma && reads_w2 && first_slice < n_slices)
    dspark_slice_loads(a.w2, a.w2_stride, first_slice * 16 + (lane >> 2), first_slice * 16 + (lane >> 2) + 8, vs,
                       a.R / 32, lane, wa, wb);
  chain_release();
  chain_wait();

  // The blocks that draft this step (with their base-logits rows) and those whose last step's
  // normaliser is pending, in block order.
  for (int i = tid; i < n_warps * a.n_blocks; i += blockDim.x) warp_best[i] = DSparkWarpBest{0, 0.0f, 0u};
  for (int b = tid; b < a.n_blocks; b += blockDim.x) {
    norm_lo[b] = 0, norm_hi[b] = 0;
    last_max[b] = a.state[b].last_max;
  }
  if (warp == 0) dspark_step_lists(a, a.state, k, reads_w2, sampling, lane, active, z_row, emitted, flags, misc);
  __syncthreads();
  const int n_act = misc[0], n_emit = misc[1];
  const int n_groups = (n_act + NB - 1) / NB;
  auto load_e = [&](int g) {
    for (int i = tid; i < NB * a.R8; i += blockDim.x) {
      const int j = i / a.R8, r = i % a.R8, gi = g * NB + j;
      e_s[i] = gi < n_act ? a.e[(size_t)active[gi] * a.R8 + r] : 0.0f;
    }
  };
  if constexpr (kMma) dspark_fill_e_terms<NB, TERMS>(smem + sc.e, p.e_pitch, a.e, a.R8, a.R, active, n_act);
  else if (n_groups == 1) load_e(0);
  __syncthreads();

  // This thread's best key (with its l) and largest l of each of its slots of the group: the
  // chains, blocks h, h + 2, ...; tensor cores, blocks 2t, 2t + 1, 8 + 2t, 9 + 2t (t = lane % 4,
  // the columns mma gives the lane). Lanes l and l + kSpread share their slots' blocks.
  constexpr int kSlots = kMma ? NB / 4 : (NB + 1) / 2;
  constexpr int kSpread = kMma ? 4 : 2;
  auto slot_block = [](int q, int l) { return kMma ? dspark_mma_column(q, l) : 2 * q + (l & 1); };
  uint64_t bk[kSlots];
  float bl[kSlots];
  uint32_t bm[kSlots];
  auto reset = [&] {
#pragma unroll
    for (int q = 0; q < kSlots; ++q) bk[q] = 0, bl[q] = 0.0f, bm[q] = 0;
  };
  // Into the warp's bests: a maximum over the lanes that share a slot, kept by lanes
  // 0 .. kSpread - 1, each the only writer of its entries.
  auto flush = [&](int g) {
#pragma unroll
    for (int q = 0; q < kSlots; ++q) {
      const int col = slot_block(q, lane), gi = g * NB + col;
      const bool keeps = lane < kSpread && col < NB && gi < n_act;
      dspark_meet_slot<kSpread>(bk[q], bl[q], bm[q], keeps, keeps ? &warp_best[warp * a.n_blocks + active[gi]] : nullptr);
    }
  };
  reset();

  const bool need_w2 = reads_w2 && n_act > 0;
  const size_t slot = (size_t)a.max_blocks * (size_t)vs;
  const float* l_prev = a.l_store + (size_t)((k - 1) & 1) * slot;
  // l, the key, slot q's best and largest l, and the stored l of row v of the shard for the
  // block in column gi of the active list, from its dot product.
  auto take = [&](int q, int64_t v, int gi, float z, float dot, float s) {
    const int b = active[gi];
    const int32_t id = (int32_t)(a.v_begin + v);
    const float l = markov_logit(a.transform, z, dot, s);
    const float key = sampling ? markov_sample_key(l, a.temperature, markov_gumbel(a.seed, (uint32_t)b, (uint32_t)k, id)) : l;
    const uint64_t ck = cand_key(key, id);
    if (ck > bk[q]) bk[q] = ck, bl[q] = l;
    bm[q] = max(bm[q], value_key(l));
    if (sampling) a.l_store[(size_t)(k & 1) * slot + (size_t)b * vs + v] = l;
  };
  // The chains: row t of the staged tile, this half's blocks of group g.
  auto chains_tile = [&](const uint8_t* stage, int g, bool in, int64_t v, float s) {
    if constexpr (!kMma) {
      float z[NB];
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const int gi = g * NB + j;
        z[j] = (j & 1) == h && in && gi < n_act ? load_elem(z_row[gi], a.logits_type, v) : 0.0f;
      }
      float acc[NB][4];
      if (in) {
        dspark_row_dots<W, NB>(stage + (size_t)t * p.pitch, e_s, a.R8, a.R, h, acc);
      } else {
#pragma unroll
        for (int j = 0; j < NB; ++j) acc[j][0] = acc[j][1] = acc[j][2] = acc[j][3] = 0.0f;
      }
      float dot[NB];
      dspark_meet_halves<NB>(acc, h, dot);
#pragma unroll
      for (int j = 0; j < NB; ++j) {
        const int gi = g * NB + j;
        if ((j & 1) == h && in && gi < n_act) take(j / 2, v, gi, z[j], dot[j], s);
      }
    }
  };
  // Tensor cores: the warps stream the shard's slices of 16 rows, slice blockIdx.x * n_warps +
  // warp, then a grid's warps further on, each W2 row read into registers once for every group
  // of blocks (kernels/block/dspark_mma.cuh); the lane's elements are rows g8 and g8 + 8 of the
  // slice, columns slot_block(q, lane) of each group. Then step k - 1's normaliser over the
  // slice's rows: lanes 0-15 and 16-31 each a pending block, a row a lane.
  auto mma_slices = [&] {
    if constexpr (kMma) {
      constexpr int kTiles = TERMS * NB / 8;
      const int g8 = lane >> 2, nr = lane & 15, hh = lane >> 4;
      for (int64_t sl = first_slice; sl < n_slices; sl += slice_step) {
        const int64_t r0 = sl * 16, va = r0 + g8, vb = va + 8, vn = r0 + nr;
        if (need_w2 && sl != first_slice) dspark_slice_loads(a.w2, a.w2_stride, va, vb, vs, a.R / 32, lane, wa, wb);
        float lp[kDSparkNormAhead];  // the first pending blocks' last l, before the wait
#pragma unroll
        for (int q = 0; q < kDSparkNormAhead; ++q) {
          const int ei = 2 * q + hh;
          lp[q] = vn < vs && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + vn] : 0.0f;
        }
        for (int g = 0; g < n_groups; ++g) {
          float z[2][kSlots], sc2[2];
          dspark_slice_inputs<NB>(a, z_row, n_act, g, va, vs, lane, z, sc2);
          float acc[kTiles][4];
          dspark_slice_mma<kTiles>(wa, wb, smem + sc.e + (size_t)g * kTiles * 8 * p.e_pitch, p.e_pitch, a.R / 32,
                                   lane, acc);
#pragma unroll
          for (int ri = 0; ri < 2; ++ri) {
            const int64_t v = ri ? vb : va;
#pragma unroll
            for (int q = 0; q < kSlots; ++q) {
              const int gi = g * NB + slot_block(q, lane);
              if (v < vs && gi < n_act) take(q, v, gi, z[ri][q], dspark_slice_dot<NB, TERMS>(acc, ri, q), sc2[ri]);
            }
          }
          if (n_groups > 1) {
            flush(g);
            reset();
          }
        }
        auto norm16 = [&](int base, float l) {
          const int ei = base + hh;
          uint64_t u = 0;
          if (vn < vs && ei < n_emit) u = (uint64_t)(norm_weight(l, last_max[emitted[ei]], a.temperature) * kNormOne);
#pragma unroll
          for (int off = 1; off < 16; off <<= 1) u += shfl_xor_u64(u, off);
          if (nr == 0 && ei < n_emit) add_norm(&norm_lo[emitted[ei]], &norm_hi[emitted[ei]], u);
        };
#pragma unroll
        for (int q = 0; q < kDSparkNormAhead; ++q)
          if (2 * q < n_emit) norm16(2 * q, lp[q]);
        for (int base = 2 * kDSparkNormAhead; base < n_emit; base += 2) {
          const int ei = base + hh;
          norm16(base, vn < vs && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + vn] : 0.0f);
        }
      }
    }
  };
  if constexpr (kMma) mma_slices();
  else
  for (int i = 0, stage_i = 0; i < n_mine; ++i, stage_i = stage_i + 1 == p.stages ? 0 : stage_i + 1) {
    const int64_t row0 = row0_of(i);
    const int rows = rows_of(i);
    const uint8_t* stage = smem + (size_t)stage_i * stage_bytes;
    const bool in = t < rows;
    const int64_t v = row0 + t;
    // Loads that do not wait for the stage, issued first: the scale, the last step's l.
    const float s = !kMma && in && a.scale ? a.scale[a.scale_rows == 1 ? 0 : v] : 1.0f;
    float lp[kDSparkNormAhead];
#pragma unroll
    for (int q = 0; q < kDSparkNormAhead; ++q) {
      const int ei = 2 * q + h;
      lp[q] = in && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + v] : 0.0f;
    }
    if (async_copy) {
      cp_async_wait(p.stages - 2);  // this thread's copies of tile i are done
      __syncthreads();              // everyone's are, and everyone is done with tile i - 1
      if (need_w2 && i + p.stages - 1 < n_mine)  // into tile i - 1's stage
        dspark_stage_async(copy, smem + (size_t)(stage_i == 0 ? p.stages - 1 : stage_i - 1) * stage_bytes,
                           a.w2 + (size_t)row0_of(i + p.stages - 1) * a.w2_stride, rows_of(i + p.stages - 1));
      cp_async_commit();
    } else if (need_w2) {
      __syncthreads();  // everyone is done with the stage
      dspark_stage_threads(smem + (size_t)stage_i * stage_bytes, p.pitch, a.w2, a.w2_stride, p.row_bytes, row0, rows,
                           p.unit);
      __syncthreads();
    }
    for (int g = 0; g < n_groups; ++g) {
      if (n_groups > 1) {
        __syncthreads();
        load_e(g);
        __syncthreads();
      }
      chains_tile(stage, g, in, v, s);
      if (n_groups > 1) {
        flush(g);
        reset();
      }
    }
    // Step k - 1's normaliser: this half's pending blocks, summed over the lanes of the half;
    // the first pairs from the loads issued above.
    auto norm_pair = [&](int base, float l) {
      const int ei = base + h;
      uint64_t u = 0;
      if (in && ei < n_emit) u = (uint64_t)(norm_weight(l, last_max[emitted[ei]], a.temperature) * kNormOne);
#pragma unroll
      for (int off = 2; off < 32; off <<= 1) u += shfl_xor_u64(u, off);
      if (lane < 2 && base + lane < n_emit) add_norm(&norm_lo[emitted[base + lane]], &norm_hi[emitted[base + lane]], u);
    };
#pragma unroll
    for (int q = 0; q < kDSparkNormAhead; ++q)
      if (2 * q < n_emit) norm_pair(2 * q, lp[q]);
    for (int base = 2 * kDSparkNormAhead; base < n_emit; base += 2) {
      const int ei = base + h;
      norm_pair(base, in && ei < n_emit ? l_prev[(size_t)emitted[ei] * vs + v] : 0.0f);
    }
  }
  if (async_copy) cp_async_wait(0);  // nothing may land in shared memory after the CTA exits
  if (n_groups == 1) flush(0);
  __syncthreads();

  // The CTA's part: its warps' bests met (a maximum of keys, exact), its normaliser parts.
  for (int b = tid; b < a.n_blocks; b += blockDim.x) {
    DSparkPartial q{0, norm_lo[b], norm_hi[b], 0u, 0.0f};
    for (int w = 0; w < n_warps; ++w) {
      const DSparkWarpBest& x = warp_best[w * a.n_blocks + b];
      if (x.key > q.key) q.key = x.key, q.logit = x.logit;
      q.row_max = max(q.row_max, x.row_max);
    }
    a.partials[(size_t)blockIdx.x * a.max_blocks + b] = q;
  }
  if (!dspark_last_cta(a.ticket, &misc[2])) return;

  // The last CTA: every CTA's parts into the records, a warp a block; on one rank the merge.
  for (int b = warp; b < a.n_blocks; b += n_warps) {
    uint64_t kk = 0;
    float lg = 0.0f;
    uint32_t mm = 0;
    NormSum ns{0, 0};
    // Several ranks: what this rank was given for the block travels in every record, loaded
    // beside the parts (begin wrote the inputs word).
    int32_t anchor = 0;
    uint32_t inputs = 0;
    if (a.n_ranks > 1 && lane == 0) anchor = a.anchors[b], inputs = __ldcg(a.inputs + b);
    for (int c0 = lane; c0 < (int)gridDim.x; c0 += 32 * kDSparkPartsAhead) {
      DSparkPartial q[kDSparkPartsAhead];
#pragma unroll
      for (int u = 0; u < kDSparkPartsAhead; ++u) {
        const int c = c0 + 32 * u;
        q[u] = DSparkPartial{0, 0, 0, 0u, 0.0f};
        if (c < (int)gridDim.x) {
          const DSparkPartial* src = a.partials + (size_t)c * a.max_blocks + b;
          q[u].key = ldcg_u64(&src->key);
          q[u].norm_lo = ldcg_u64(&src->norm_lo);
          q[u].norm_hi = ldcg_u64(&src->norm_hi);
          q[u].row_max = __ldcg(&src->row_max);
          q[u].logit = __ldcg(&src->logit);
        }
      }
#pragma unroll
      for (int u = 0; u < kDSparkPartsAhead; ++u) {
        if (q[u].key > kk) kk = q[u].key, lg = q[u].logit;
        mm = max(mm, q[u].row_max);
        norm_add(&ns, q[u].norm_lo, q[u].norm_hi);
      }
    }
#pragma unroll
    for (int off = 16; off > 0; off >>= 1) {
      const uint64_t ok = shfl_down_u64(kk, off);
      const float ol = __shfl_down_sync(kFullWarp, lg, off);
      if (ok > kk) kk = ok, lg = ol;
      mm = max(mm, __shfl_down_sync(kFullWarp, mm, off));
      const uint64_t lo = shfl_down_u64(ns.lo, off), hi = shfl_down_u64(ns.hi, off);
      norm_add(&ns, lo, hi);
    }
    kk = (uint64_t)__shfl_sync(kFullWarp, (unsigned)(kk >> 32), 0) << 32 | __shfl_sync(kFullWarp, (unsigned)kk, 0);
    dspark_send_record(a, b, flags[b], kk, lg, mm, ns, anchor, inputs, lane);
    if (a.n_ranks == 1) {
      __syncwarp();
      dspark_merge_block(a, k, b, lane);
    }
  }
}

// Exchange x's records of every rank merged, a warp a block.
__global__ void __launch_bounds__(kDSparkMergeWarps * 32) dspark_merge_kernel(const DSparkChainArgs a, const int32_t x) {
  chain_release();
  chain_wait();
  const int b = blockIdx.x * kDSparkMergeWarps + (threadIdx.x >> 5);
  if (b < a.n_blocks) dspark_merge_block(a, x, b, threadIdx.x & 31);
}

template <dfsel_type W>
void pass_instances(DSparkPassKernel (&k)[4]) {
  k[0] = dspark_pass_kernel<W, 1, 0, kMaxPassWarps>;
  k[1] = dspark_pass_kernel<W, 2, 0, kMaxPassWarps>;
  k[2] = dspark_pass_kernel<W, 4, 0, kMaxPassWarps>;
  k[3] = dspark_pass_kernel<W, 8, 0, kMaxPassWarps>;
}

// Tensor cores: groups of 8 blocks, and of 16 where a run may carry more than 8; CTAs of up to
// WARPS warps.
template <int TERMS, int WARPS>
void mma_instances(DSparkPassKernel (&k)[4], int mma_blocks) {
  k[0] = dspark_pass_kernel<DFSEL_TYPE_BF16, 8, TERMS, WARPS>;
  k[1] = k[2] = k[3] = mma_blocks > 8 ? dspark_pass_kernel<DFSEL_TYPE_BF16, 16, TERMS, WARPS> : k[0];
}

template <int TERMS>
void mma_instances(DSparkPassKernel (&k)[4], int mma_blocks, int warps) {
  if (warps > kMaxPassWarps) mma_instances<TERMS, kMaxMmaWarps>(k, mma_blocks);
  else mma_instances<TERMS, kMaxPassWarps>(k, mma_blocks);
}

// The largest power of two up to 16 that divides x.
int pow2_unit(uint64_t x) {
  int u = 16;
  while (u > 1 && x % (uint64_t)u != 0) u /= 2;
  return u;
}

}  // namespace

bool dspark_mma_supported(const DSparkChainArgs& a) {
  const bool aligned = (reinterpret_cast<uintptr_t>(a.w2) | a.w2_stride) % 16 == 0;
  return a.w2_type == DFSEL_TYPE_BF16 && a.R % 32 == 0 && a.R <= 32 * kDSparkMmaChunks && aligned;
}

cudaError_t dspark_pass_setup(const DSparkChainArgs& a, int device, DSparkTile asked, bool mma, DSparkPassLaunch* out) {
  DSparkPassLaunch l{};
  if (mma && !dspark_mma_supported(a)) return cudaErrorInvalidValue;
  if (mma) {
    l.shape.e_terms = a.w1_type == DFSEL_TYPE_BF16 ? 1 : 3;  // e is W1's row widened
    l.shape.mma_blocks = a.max_blocks > 8 ? 16 : 8;
    l.shape.e_pitch = dspark_mma_pitch(a.R);
    const int warps = (asked.rows ? asked.rows : 16 * kDSparkMmaWarps) / 16;
    if (warps > kMaxMmaWarps) return cudaErrorInvalidValue;
    if (l.shape.e_terms == 1) mma_instances<1>(l.kernels, l.shape.mma_blocks, warps);
    else mma_instances<3>(l.kernels, l.shape.mma_blocks, warps);
  } else switch (a.w2_type) {
    case DFSEL_TYPE_F32: pass_instances<DFSEL_TYPE_F32>(l.kernels); break;
    case DFSEL_TYPE_F16: pass_instances<DFSEL_TYPE_F16>(l.kernels); break;
    case DFSEL_TYPE_BF16: pass_instances<DFSEL_TYPE_BF16>(l.kernels); break;
    case DFSEL_TYPE_Q8_0: pass_instances<DFSEL_TYPE_Q8_0>(l.kernels); break;
    default: return cudaErrorInvalidValue;  // K-quants are widened at plan creation
  }
  const size_t rb = row_bytes(a.w2_type, a.R);
  if (rb == 0 || rb > UINT32_MAX) return cudaErrorInvalidValue;
  int optin = 0, sms = 0;
  cudaError_t e = cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  l.shape.row_bytes = (uint32_t)rb;
  l.shape.pitch = dspark_pitch(rb);
  const uint64_t mix = reinterpret_cast<uintptr_t>(a.w2) | a.w2_stride | rb;
  l.shape.unit = pow2_unit(mix);
  l.shape.async_copy = l.shape.unit == 16 ? 1 : 0;
  // The tile asked for alone, else the first of kDSparkTiles that fits beside the rest. Tensor
  // cores stage nothing: the tile's rows are the CTA's (16 a warp), the largest unless asked.
  bool fits = false;
  if (!mma && asked.rows > kDSparkTiles[0].rows) return cudaErrorInvalidValue;
  for (int i = asked.rows ? -1 : 0; i < (asked.rows ? 0 : kDSparkTileCount) && !fits; ++i) {
    const DSparkTile tile = i < 0 ? asked : mma ? DSparkTile{16 * kDSparkMmaWarps, 0} : kDSparkTiles[i];
    l.shape.tile_rows = tile.rows;
    l.shape.stages = mma ? 0 : tile.stages;
    if (mma) l.shape.async_copy = 0;
    fits = dspark_pass_carve(l.shape, a.R8, a.max_blocks).total <= (size_t)optin;
  }
  if (!fits) return cudaErrorInvalidValue;
  l.smem = dspark_pass_carve(l.shape, a.R8, a.max_blocks).total;
  l.threads = 2 * l.shape.tile_rows;
  int per_sm = 0;
  for (DSparkPassKernel k : l.kernels) {
    e = raise_shared_memory_limit((const void*)k, l.smem);
    if (e != cudaSuccess) return e;
  }
  e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, l.kernels[3], l.threads, l.smem);
  if (e != cudaSuccess) return e;
  l.grid = sms * (per_sm > 0 ? per_sm : 1);
  *out = l;
  return cudaSuccess;
}

cudaError_t dspark_begin(const DSparkChainArgs& a, cudaStream_t stream) {
  dspark_begin_kernel<<<a.n_blocks, kDSparkBeginThreads, 0, stream>>>(a);
  return cudaGetLastError();
}

cudaError_t dspark_pass(const DSparkChainArgs& a, int32_t k, const DSparkPassLaunch& l, cudaStream_t stream) {
  const int which = l.shape.e_terms ? (a.n_blocks <= 8 ? 0 : 1)
                                    : a.n_blocks <= 1 ? 0 : a.n_blocks <= 2 ? 1 : a.n_blocks <= 4 ? 2 : 3;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(dim3((unsigned)l.grid), l.threads, l.smem, stream, 1, true, attr);
  return cudaLaunchKernelEx(&cfg, l.kernels[which], a, l.shape, k);
}

cudaError_t dspark_merge(const DSparkChainArgs& a, int32_t x, cudaStream_t stream) {
  cudaLaunchAttribute attr[2];
  const unsigned grid = (unsigned)((a.n_blocks + kDSparkMergeWarps - 1) / kDSparkMergeWarps);
  const cudaLaunchConfig_t cfg = launch_config(dim3(grid), kDSparkMergeWarps * 32, 0, stream, 1, true, attr);
  return cudaLaunchKernelEx(&cfg, dspark_merge_kernel, a, x);
}

}  // namespace dfsel::cuda
