// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC 2011).
// The sampling walk draws one uniform per (seed, block, position), so the CPU reference and
// the GPU kernels reproduce the same draws bit for bit.
#pragma once

#include <stdint.h>

#include "hd.cuh"

namespace dfsel {

struct Philox4 {
  uint32_t v[4];
};

DFSEL_HD void philox_mulhilo(uint32_t a, uint32_t b, uint32_t* hi, uint32_t* lo) {
  const uint64_t p = (uint64_t)a * (uint64_t)b;
  *hi = (uint32_t)(p >> 32);
  *lo = (uint32_t)p;
}

DFSEL_HD Philox4 philox4x32_10(Philox4 ctr, uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    uint32_t hi0, lo0, hi1, lo1;
    philox_mulhilo(0xD2511F53u, ctr.v[0], &hi0, &lo0);
    philox_mulhilo(0xCD9E8D57u, ctr.v[2], &hi1, &lo1);
    Philox4 next;
    next.v[0] = hi1 ^ ctr.v[1] ^ k0;
    next.v[1] = lo1;
    next.v[2] = hi0 ^ ctr.v[3] ^ k1;
    next.v[3] = lo0;
    ctr = next;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return ctr;
}

// Uniform in [0, 1) with 24 random bits: exact in float on both sides.
DFSEL_HD float philox_uniform(uint64_t seed, uint32_t block, uint32_t position) {
  Philox4 ctr;
  ctr.v[0] = block;
  ctr.v[1] = position;
  ctr.v[2] = 0x64667365u;  // "dfse": separates these draws from other uses of the seed
  ctr.v[3] = 0u;
  const Philox4 r = philox4x32_10(ctr, (uint32_t)seed, (uint32_t)(seed >> 32));
  return (float)(r.v[0] >> 8) * (1.0f / 16777216.0f);
}

}  // namespace dfsel
