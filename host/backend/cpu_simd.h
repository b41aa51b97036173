// The CPU backend's arithmetic kernels: the gate and the lattice, vectorised across
// independent sums so that every sum keeps the reference's order (host/reference): each
// g[s][r] and each S[i][j] is the same chain of fused multiply-adds, one term at a time, so
// the results are bitwise those of the reference. Vector code runs only where the CPU has
// AVX2 and FMA (asked at plan creation); elsewhere the same sums run one by one with std::fma.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel {

constexpr int32_t kGateLanes = 32;  // gate sums per chunk: four vectors of eight

// Whether this CPU runs the vector kernels (AVX2 and FMA).
bool cpu_has_avx2_fma();

// n elements of a row stored as type (F32, F16, BF16, Q8_0) as floats: numeric.cuh's
// load_elems, under the name the CPU backends call it by.
void widen_row(const void* row, dfsel_type type, int64_t n, float* out);

// W_h widened and transposed once, at plan creation, in chunks of kGateLanes sums:
// wt[((r / 32) * n_embd + e) * 32 + r % 32]; rp = R rounded up to kGateLanes, the padding zero.
struct GateWeights {
  std::vector<float> wt;
  int64_t n_embd = 0;
  int32_t R = 0, rp = 0;
  bool simd = false;
};
void prepare_gate(const dfsel_tensor& w_h, bool simd, GateWeights* w);  // may throw bad_alloc

// g[s * rp + r] = sum_e w_h[r][e] * h[s * n_embd + e] for rows s in [s0, s1) and r in chunk
// (lanes [chunk * kGateLanes, + kGateLanes)), e in order from +0.
void gate_chunk(const GateWeights& w, const float* h, int32_t s0, int32_t s1, int32_t chunk, float* g);

// S[i][j] = u[j] + sum_r eprev[i][r] * g[r] * enext[j][r] for i < n_prev, as
// ref::score_lattice. enext_t: the successor rows transposed, [R][kp], kp = K rounded up to
// 16 (padding ignored); t: scratch of 4 * R floats.
void lattice_rows(const float* eprev, int32_t n_prev, const float* g, const float* enext_t, int32_t kp,
                  const float* u, int32_t k, int32_t R, bool simd, float* t, float* s);

}  // namespace dfsel
