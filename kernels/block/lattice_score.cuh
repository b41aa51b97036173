// Phases 4 and 5 of the lattice CTA: S = u + (E_prev[P] * g) . E_next[C]^T over R, a small
// GEMM per drafted row on BF16 tensor cores (gate_mma.cuh). The staged rows are read as stored;
// a = e_prev * g is rounded to float as the reference rounds it, then split into three BF16
// terms, and each E_next value into terms_of(T), so every product is within float rounding of
// a * e_next. The tensor cores sum one k-step (16 elements) at a time; the k-steps are added in
// F32 on the CUDA cores, as the tensor cores' own long sums drift further. Warps take fixed
// k-steps of R and their partial tiles are summed in warp order, so every row is summed in
// one order whatever the shard count, the placement or the chunking of R: results are bitwise
// identical across them (SPEC section 4.8). One instance per codebook type T.
#pragma once

#include <stddef.h>

#include "kernels/block/gate_mma.cuh"
#include "kernels/block/lattice_cta.cuh"
#include "kernels/common/bulk_copy.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel::cuda {

// Elements e and e + 1 (e even) of a staged row as floats, exactly load_elem's values (its
// conversions, on two elements read at once from shared memory).
template <dfsel_type T>
__device__ __forceinline__ float2 staged_pair(const uint8_t* row, int e) {
  if constexpr (T == DFSEL_TYPE_F32) {
    return *(const float2*)(row + (size_t)e * 4);
  } else if constexpr (T == DFSEL_TYPE_Q8_0) {
    const uint8_t* blk = row + (size_t)(e / kQ8Block) * sizeof(BlockQ8_0);
    const uint16_t d = *(const uint16_t*)(blk + offsetof(BlockQ8_0, d));
    const uint16_t q = *(const uint16_t*)(blk + offsetof(BlockQ8_0, qs) + e % kQ8Block);
    return make_float2(q8_value(d, (int8_t)(q & 0xffu)), q8_value(d, (int8_t)(q >> 8)));
  } else {
    const uint32_t w = *(const uint32_t*)(row + (size_t)e * 2);
    const uint16_t lo = (uint16_t)(w & 0xffffu), hi = (uint16_t)(w >> 16);
    if constexpr (T == DFSEL_TYPE_F16) return make_float2(f16_to_float(lo), f16_to_float(hi));
    else return make_float2(bf16_to_float(lo), bf16_to_float(hi));
  }
}

// Elements o, o + 1 of a k-step from a staged row (null: zeros), zero from lim on.
template <dfsel_type T>
__device__ __forceinline__ float2 fragment_pair(const uint8_t* row, int e, int o, int lim) {
  float2 v = row ? staged_pair<T>(row, e + o) : make_float2(0.0f, 0.0f);
  if (o >= lim) v.x = 0.0f;
  if (o + 1 >= lim) v.y = 0.0f;
  return v;
}

// Copies elements [c0, c1) of every noted row (s.rowp) into its slot, by bulk copies counted
// on s.bar (returns after the phase completes) or by the threads (returns after a barrier).
template <int KP>
__device__ void copy_chunk(const LatticeSmem& sm, const LatticeShared<KP>& s, int R, dfsel_type t, int c0, int c1,
                           uint32_t& phase) {
  const size_t off = row_bytes(t, c0);
  const size_t bytes = (c1 >= R ? (size_t)sm.copy_bytes : row_bytes(t, c1)) - off;
  const int tid = threadIdx.x;
  if (sm.bulk) {
    for (int r = tid; r < 2 * KP; r += kLatticeThreads)
      if (s.rowp[r]) {
        mbar_expect(&s.bar[0], (uint32_t)bytes);
        bulk_copy(s.slots + (size_t)r * sm.pitch, s.rowp[r] + off, (uint32_t)bytes, &s.bar[0]);
      }
    __syncthreads();
    if (tid == 0) mbar_arrive(&s.bar[0]);
    mbar_wait(&s.bar[0], phase);
    phase ^= 1u;
    return;
  }
  auto run = [&](auto unit) {
    using U = decltype(unit);
    const int n = (int)(bytes / sizeof(U));
    for (int e = tid; e < 2 * KP * n; e += kLatticeThreads) {
      const int r = e / n, i = e % n;
      if (s.rowp[r]) ((U*)(s.slots + (size_t)r * sm.pitch))[i] = ((const U*)(s.rowp[r] + off))[i];
    }
  };
  switch (sm.unit) {
    case 16: run(uint4{}); break;
    case 8: run(uint2{}); break;
    case 4: run(uint32_t{}); break;
    default: run(uint16_t{}); break;
  }
  __syncthreads();
}

// Leaves each warp group kg's partial products in s.red + kg * KP * kRedPitch, ends with a
// barrier. kWhole: the instance knows the carve is spec (every row staged whole as its record
// landed), so the chunk copies are not in its code.
template <int KP, dfsel_type T, bool kWhole = false>
__device__ void product_partials(const LatticeSmem& sm, const LatticeShared<KP>& s, int R, uint32_t& phase) {
  using W = LatticeWarps<KP>;
  constexpr int kTb = terms_of(T);
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32, gq = lane / 4, t = lane % 4;
  const int mt = warp % W::kMt, kg = warp / W::kMt;
  const int i0 = mt * 16 + gq, i1 = i0 + 8;
  const int sa0 = i0 < KP ? s.pslot[i0] : -1, sa1 = i1 < KP ? s.pslot[i1] : -1;
  int sb[W::kNt];
#pragma unroll
  for (int n = 0; n < W::kNt; ++n) sb[n] = s.nslot[n * 8 + gq];
  float acc[W::kNt][4];
#pragma unroll
  for (int n = 0; n < W::kNt; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;

  const int r16 = padded_rank(R);
  for (int c0 = 0; c0 < R; c0 += sm.rc) {
    const int c1 = min(c0 + sm.rc, r16);
    if (kWhole || sm.spec) {
      mbar_wait(&s.bar[0], phase);
      phase ^= 1u;
    } else {
      copy_chunk<KP>(sm, s, R, T, c0, min(c1, R), phase);
    }
    auto slot = [&](int x) { return x >= 0 ? s.slots + (size_t)x * sm.pitch : nullptr; };
    const uint8_t* pa0 = slot(sa0);
    const uint8_t* pa1 = slot(sa1);
    const uint8_t* pb[W::kNt];
#pragma unroll
    for (int n = 0; n < W::kNt; ++n) pb[n] = slot(sb[n]);
    // Global k-steps ks with ks % kKg == kg, in increasing order, whatever the chunks.
    int ks = c0 / 16;
    ks += (kg - ks % W::kKg + W::kKg) % W::kKg;
    for (; ks * 16 < c1; ks += W::kKg) {
      const int r = ks * 16, e = r - c0, lim = R - r;
      const float2 g0 = *(const float2*)&s.gs[r + 2 * t], g1 = *(const float2*)&s.gs[r + 8 + 2 * t];
      uint32_t a0[3], a1[3], a2[3], a3[3];
      {
        float2 v = fragment_pair<T>(pa0, e, 2 * t, lim);
        to_terms(v.x * g0.x, v.y * g0.y, a0);
        v = fragment_pair<T>(pa1, e, 2 * t, lim);
        to_terms(v.x * g0.x, v.y * g0.y, a1);
        v = fragment_pair<T>(pa0, e, 8 + 2 * t, lim);
        to_terms(v.x * g1.x, v.y * g1.y, a2);
        v = fragment_pair<T>(pa1, e, 8 + 2 * t, lim);
        to_terms(v.x * g1.x, v.y * g1.y, a3);
      }
#pragma unroll
      for (int n = 0; n < W::kNt; ++n) {
        uint32_t b0[kTb], b1[kTb];
        float2 v = fragment_pair<T>(pb[n], e, 2 * t, lim);
        to_terms(v.x, v.y, b0);
        v = fragment_pair<T>(pb[n], e, 8 + 2 * t, lim);
        to_terms(v.x, v.y, b1);
        float part[4] = {0.0f, 0.0f, 0.0f, 0.0f};
#pragma unroll
        for (int x = 0; x < 3; ++x)
#pragma unroll
          for (int y = 0; y < kTb; ++y)
            if (x + y < kTermBits) mma_bf16(part, a0[x], a1[x], a2[x], a3[x], b0[y], b1[y]);
#pragma unroll
        for (int c = 0; c < 4; ++c) acc[n][c] += part[c];
      }
    }
    if (kWhole) break;  // one chunk: rc is R rounded up to 16
    if (c0 + sm.rc < R) __syncthreads();  // the next chunk overwrites the slots
  }

  constexpr int P = W::kRedPitch;
  float* red = s.red + (size_t)kg * KP * P;
#pragma unroll
  for (int n = 0; n < W::kNt; ++n) {
    const int j = n * 8 + 2 * t;
    if (i0 < KP) red[i0 * P + j] = acc[n][0], red[i0 * P + j + 1] = acc[n][1];
    if (i1 < KP) red[i1 * P + j] = acc[n][2], red[i1 * P + j + 1] = acc[n][3];
  }
  __syncthreads();
}

// S[i][j] = u[j] + the partial products of warp groups 0, 1, ... in that order, from s.red.
// Every instance sums here, so the bits are the same whichever one scores a row.
template <int KP>
__device__ __forceinline__ float summed_score(const LatticeShared<KP>& s, int i, int j) {
  using W = LatticeWarps<KP>;
  float v = 0.0f;
#pragma unroll
  for (int g = 0; g < W::kKg; ++g) v += s.red[(size_t)g * KP * W::kRedPitch + i * W::kRedPitch + j];
  return s.u[j] + v;
}

// Leaves S[i][j] = u[j] + the products in s.red (pitch kRedPitch). Ends with a barrier.
template <int KP, dfsel_type T>
__device__ void score_rows(const LatticeSmem& sm, const LatticeShared<KP>& s, int R, uint32_t& phase) {
  product_partials<KP, T>(sm, s, R, phase);
  for (int o = threadIdx.x; o < KP * KP; o += kLatticeThreads) {
    const int i = o / KP, j = o % KP;  // (i, j) of group 0 is read and written by this thread alone
    s.red[i * LatticeWarps<KP>::kRedPitch + j] = summed_score<KP>(s, i, j);
  }
  __syncthreads();
}

}  // namespace dfsel::cuda
