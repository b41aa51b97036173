// One warp's part of the DSpark chain for one block between two passes (docs/dspark.md): the
// merge of every rank's record of an exchange into the winner and the outputs, the next step's
// W1 row widened into e, and the confidence head before that step. Every rank runs the same
// code on the same records, so every rank writes the same bits. The pass's last CTA calls it on
// one rank, the merge kernel after the exchange on several.
#pragma once

#include <stdint.h>

#include "kernels/common/dspark_args.cuh"
#include "kernels/common/dspark_math.cuh"
#include "kernels/common/dspark_record.cuh"
#include "kernels/common/error_flag.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/common/order.cuh"
#include "kernels/common/warp.cuh"

namespace dfsel::cuda {

constexpr unsigned kFullWarp = 0xffffffffu;

// The largest l of a row from the largest value_key (0: nothing but NaN, -inf as the reference
// leaves it).
__device__ __forceinline__ float row_max_of(uint32_t vk) {
  return vk == 0u ? -INFINITY : cand_from_key((uint64_t)vk << 32).z;
}

// Adds u to a 128-bit sum held as two words (shared or global memory), exactly.
__device__ __forceinline__ void add_norm(unsigned long long* lo, unsigned long long* hi, uint64_t u) {
  const unsigned long long old = atomicAdd(lo, (unsigned long long)u);
  if (old + u < old) atomicAdd(hi, 1ull);
}

template <dfsel_type T>
__device__ __forceinline__ void dspark_widen_lanes(const uint8_t* row, int R, int R8, float* e, int lane) {
#pragma unroll 4
  for (int r = lane; r < R8; r += 32) e[r] = r < R ? load_elem(row, T, r) : 0.0f;
}

// e = the W1 row `row` (stored as a.w1_type) widened, zeros past R to R8. Lanes split it,
// the type known in the loop so that each lane's loads are in flight together; a BF16 row
// 16 bytes aligned, R a multiple of 8, as one 16-byte load a lane for each 256 elements.
__device__ __forceinline__ void dspark_set_e(const DSparkChainArgs& a, float* e, const uint8_t* row, int lane) {
  if (a.w1_type == DFSEL_TYPE_BF16 && a.R % 8 == 0 && (reinterpret_cast<uintptr_t>(row) & 15) == 0) {
    for (int r = 8 * lane; r < a.R; r += 256) {
      const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + 2 * (size_t)r));
      const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        e[r + 2 * j] = __uint_as_float(w[j] << 16);
        e[r + 2 * j + 1] = __uint_as_float(w[j] & 0xffff0000u);
      }
    }
    return;
  }
  switch (a.w1_type) {
    case DFSEL_TYPE_F32: dspark_widen_lanes<DFSEL_TYPE_F32>(row, a.R, a.R8, e, lane); break;
    case DFSEL_TYPE_F16: dspark_widen_lanes<DFSEL_TYPE_F16>(row, a.R, a.R8, e, lane); break;
    case DFSEL_TYPE_BF16: dspark_widen_lanes<DFSEL_TYPE_BF16>(row, a.R, a.R8, e, lane); break;
    default: dspark_widen_lanes<DFSEL_TYPE_Q8_0>(row, a.R, a.R8, e, lane); break;
  }
}

// Warp 0 of a pass's CTA, before step k (states: each block's, as the step before left them):
// the blocks that draft it (with their base-logits rows) and those whose step k - 1
// normaliser is pending (sampling), each list in block order, their counts in counts[0] and
// counts[1], and with `flags` each block's kFlag* bits.
constexpr uint8_t kFlagActive = 1, kFlagEmitted = 2;
__device__ __forceinline__ void dspark_step_lists(const DSparkChainArgs& a, const DSparkChainState* states, int k,
                                                  bool reads_w2, bool sampling, int lane, int32_t* active,
                                                  const uint8_t** z_row, int32_t* emitted, uint8_t* flags,
                                                  int32_t* counts) {
  int na = 0, ne = 0;
  for (int b0 = 0; b0 < a.n_blocks; b0 += 32) {
    const int b = b0 + lane;
    DSparkChainState st{0, 0, 0.0f, 0.0f};
    if (b < a.n_blocks) st = states[b];
    const bool act = b < a.n_blocks && reads_w2 && st.drafting;
    const bool emi = b < a.n_blocks && sampling && k >= 2 && st.emitted;
    const unsigned ma = __ballot_sync(kFullWarp, act), me = __ballot_sync(kFullWarp, emi);
    const unsigned below = (1u << lane) - 1u;
    if (act) {
      active[na + __popc(ma & below)] = b;
      z_row[na + __popc(ma & below)] = a.logits + map_row(a.row_map, (int64_t)b * a.N + (k - 1)) * a.logits_stride;
    }
    if (emi) emitted[ne + __popc(me & below)] = b;
    if (flags && b < a.n_blocks) flags[b] = (act ? kFlagActive : 0) | (emi ? kFlagEmitted : 0);
    na += __popc(ma), ne += __popc(me);
  }
  if (lane == 0) counts[0] = na, counts[1] = ne;
}

// A lane's best key (with l at it) and largest l met with those of the lanes that share its
// slot (lanes kSpread apart), into the entry of the warp's bests that one of them keeps.
template <int kSpread>
__device__ __forceinline__ void dspark_meet_slot(uint64_t kk, float lg, uint32_t mm, bool keeps, DSparkWarpBest* w) {
#pragma unroll
  for (int off = kSpread; off < 32; off <<= 1) {
    const uint64_t ok = shfl_xor_u64(kk, off);
    const float ol = __shfl_xor_sync(kFullWarp, lg, off);
    if (ok > kk) kk = ok, lg = ol;
    mm = max(mm, __shfl_xor_sync(kFullWarp, mm, off));
  }
  if (keeps) {
    if (kk > w->key) w->key = kk, w->logit = lg;
    w->row_max = max(w->row_max, mm);
  }
}

// The chains lanes 0..7 hold, met in chained_dot's order, in lane 0.
__device__ __forceinline__ float dspark_meet_chains(float c) {
  float v[kDotChains];
#pragma unroll
  for (int j = 0; j < kDotChains; ++j) v[j] = __shfl_sync(kFullWarp, c, j);
  return meet_chains(v);
}

// The confidence head before step k: lanes 0..7 carry chain j of w . [h_k ; e_k] on from where
// begin left it after h (element n_embd + r joins chain (n_embd + r) % 8), lane 0 meets them;
// the block stops (*drafting = 0) when c_k < p_min; `write`: c_k is written to the outputs. e
// (e_k widened) must be visible to the warp.
__device__ __forceinline__ void dspark_confidence_gate(const DSparkChainArgs& a, int b, int k, const float* e, int lane,
                                                       int32_t* drafting, bool write) {
  if (!a.conf_w) return;
  float c = 0.0f;
  if (lane < kDotChains) {
    c = a.hconf[((size_t)b * a.N + (k - 1)) * kDotChains + lane];
    const int first = (int)((lane - a.n_embd % kDotChains + kDotChains) % kDotChains);
    for (int r = first; r < a.R; r += kDotChains) c = fmaf(load_elem(a.conf_w, a.conf_type, a.n_embd + r), e[r], c);
  }
  const float x = dspark_meet_chains(c);
  if (lane == 0) {
    const float conf = confidence_of(x, a.conf_bias);
    if (write && a.out.confidence) a.out.confidence[dspark_cell(b, a.N, k)] = conf;
    if (a.p_min > 0.0f && conf < a.p_min) *drafting = 0;
  }
}

// The confidence before step k from the block's e in the workspace, into its state (__syncwarp
// after e).
__device__ __forceinline__ void dspark_prepare_step(const DSparkChainArgs& a, int b, int k, int lane) {
  dspark_confidence_gate(a, b, k, a.e + (size_t)b * a.R8, lane, &a.state[b].drafting, true);
}

// Whether this CTA is the last of the grid to finish its part of a pass (every thread calls it,
// after its writes of that part): a ticket in the workspace counts the CTAs, the answer goes
// through *flag (shared memory), and the last CTA, which sees every CTA's writes, resets it.
__device__ __forceinline__ bool dspark_last_cta(uint32_t* ticket, int32_t* flag) {
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) *flag = atomicAdd(ticket, 1u) == gridDim.x - 1 ? 1 : 0;
  __syncthreads();
  if (!*flag) return false;
  __threadfence();
  if (threadIdx.x == 0) *ticket = 0;
  return true;
}

// This rank's record of block b for a step (the warp calls it together; kk the same in every
// lane): the shard's best key kk with l at it (lg, lane 0), its largest l (mm, a value_key) and
// its part of the last step's normaliser, kept as `flags` (the block's kFlag* bits at the step)
// say; anchor and inputs (lane 0) what this rank was given; with sharded W1 the winner's W1 row
// beside it.
__device__ __forceinline__ void dspark_send_record(const DSparkChainArgs& a, int b, uint8_t flags, uint64_t kk, float lg,
                                                   uint32_t mm, const NormSum& ns, int32_t anchor, uint32_t inputs,
                                                   int lane) {
  const DSparkLayout& lay = a.layout;
  const bool won = (flags & kFlagActive) && kk != 0;
  const CandRec c = cand_from_key(kk);
  const int64_t local = c.id - a.v_begin;
  if (lane == 0) {
    DSparkRecord rec = empty_dspark_record();
    rec.anchor = anchor, rec.inputs = inputs;
    if (flags & kFlagEmitted) rec.norm_lo = ns.lo, rec.norm_hi = ns.hi;
    if (won) {
      rec.key = c.z;
      rec.draft_id = c.id;
      rec.target_id = a.d2t ? a.d2t[local] : c.id;
      rec.logit = lg;
      rec.row_max = row_max_of(mm);
    }
    *dspark_record(lay, a.send, b) = rec;
  }
  if (won && lay.row_bytes) {  // the next step's W1 row travels with the record
    const uint8_t* src = a.w1 + (size_t)local * a.w1_stride;
    uint8_t* dst = dspark_record_row(lay, a.send, b);
    for (size_t i = lane; i < lay.row_bytes; i += 32) dst[i] = src[i];
  }
}

// Lane 0: exchange x's merged records of block b (m, recv) into st and, with out, the outputs
// and error flags: a winner whose target id d2t now maps outside W1 stops the block (d2t
// changed after creation: no W1 row is read; the first such entry is reported, error[2..6]:
// flag, draft id, target id, block, step). Whether the block emitted a step whose W1 row is next.
__device__ __forceinline__ bool dspark_take_merged(const DSparkChainArgs& a, const DSparkMerged& m,
                                                   const DSparkLayout& lay, const uint8_t* recv, int b, int x,
                                                   DSparkChainState* st, const dfsel_dspark_outputs* out) {
  const DSparkRecord* w = m.winner >= 0 ? dspark_record(lay, (void*)(recv + (size_t)m.winner * lay.bytes), b) : nullptr;
  if (x <= a.N && st->drafting && w && !dspark_target_in_range(w->target_id, a.n_target_vocab)) {
    if (out && atomicCAS(&a.error[2], 0, 1) == 0) {
      a.error[3] = w->draft_id, a.error[4] = w->target_id, a.error[5] = b, a.error[6] = x;
    }
    st->drafting = 0, st->emitted = 0;
    return false;
  }
  return take_dspark_exchange(m, lay, recv, b, x, a.N, a.temperature, st, out) != nullptr;
}

// Exchange x's records of block b merged (the warp calls it together; records visible). At a
// group's first exchange the ranks' records must say they were given the same inputs: where
// they do not, every rank stops the block and flags it (error[7]), and the wait reports it.
__device__ __forceinline__ void dspark_merge_block(const DSparkChainArgs& a, int x, int b, int lane) {
  const DSparkLayout& lay = a.layout;
  int other = 0;
  if (a.n_ranks > 1 && x == (a.sharded_w1 ? 0 : 1) && !dspark_inputs_agree(lay, a.recv, a.n_ranks, b, &other)) {
    if (lane == 0) {
      a.state[b] = DSparkChainState{0, 0, -INFINITY, 0.0f};
      // Replicated W1: begin gave step 1 a confidence from this rank's own anchor; cleared, so
      // that every rank's outputs are the same bits.
      if (a.out.confidence) a.out.confidence[dspark_cell(b, a.N, 1)] = 0.0f;
      flag_lowest_block(&a.error[7], b);
    }
    return;
  }
  const DSparkMerged m = merge_dspark_records(lay, a.recv, a.n_ranks, b);
  DSparkChainState st = a.state[b];
  __syncwarp();  // every lane has read the state before lane 0 writes it
  if (x == 0) {  // the anchors' W1 rows, sharded W1
    if (!st.drafting) return;  // its anchor was out of range (begin flagged it)
    if (m.anchor_rank < 0) {
      if (lane == 0) {
        atomicCAS(&a.error[1], 0, b + 1);
        a.state[b].drafting = 0;
      }
      return;
    }
    dspark_set_e(a, a.e + (size_t)b * a.R8, dspark_record_row(lay, (void*)(a.recv + (size_t)m.anchor_rank * lay.bytes), b), lane);
    __syncwarp();
    dspark_prepare_step(a, b, 1, lane);
    return;
  }
  int won = 0;
  if (lane == 0) {  // the outputs and the state, as every backend takes an exchange
    won = dspark_take_merged(a, m, lay, a.recv, b, x, &st, &a.out);
    a.state[b] = st;
  }
  if (!__shfl_sync(kFullWarp, won, 0)) return;
  const uint8_t* from = a.recv + (size_t)m.winner * lay.bytes;
  const uint8_t* row = lay.row_bytes ? dspark_record_row(lay, (void*)from, b)
                                     : a.w1 + (size_t)dspark_record(lay, (void*)from, b)->target_id * a.w1_stride;
  dspark_set_e(a, a.e + (size_t)b * a.R8, row, lane);
  __syncwarp();
  if (x < a.N) dspark_prepare_step(a, b, x + 1, lane);
}

}  // namespace dfsel::cuda
