// A digest of values that the ranks of a group must hold alike (a run's hidden rows and
// scalars, a plan's W_h or conf_w): a sum (mod 2^64) of one mixed term per 8-byte word, each
// keyed by its position, so that any order of summation (a host loop, a device reduction)
// gives the same bits, and equal words at equal positions give equal digests.
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "hd.cuh"

namespace dfsel {

DFSEL_HD uint64_t digest_mix(uint64_t x) {  // the splitmix64 finaliser
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

DFSEL_HD uint64_t digest_term(uint64_t position, uint64_t word) {
  return digest_mix(word ^ digest_mix(position + 0x9e3779b97f4a7c15ull));
}

// Word w (8 bytes, zero-padded past n_bytes) of one stored row.
DFSEL_HD uint64_t digest_row_word(const uint8_t* row, size_t n_bytes, size_t w) {
  uint64_t x = 0;
  const size_t at = w * 8, n = n_bytes - at < 8 ? n_bytes - at : 8;
  memcpy(&x, row + at, n);
  return x;
}

DFSEL_HD uint32_t digest_fold(uint64_t h) { return (uint32_t)(h ^ (h >> 32)); }

// Positions past every row word's (a row index is below 2^31): the run's scalars, a type, the
// digest of a plan's weights.
constexpr uint64_t kDigestScalars = 0xffffffff00000000ull;
constexpr uint64_t kDigestType = kDigestScalars + 4;
constexpr uint64_t kDigestWeights = kDigestScalars + 5;

// A run's scalars: temperature and p_min bits (-0 is not 0), seed, n_blocks.
DFSEL_HD uint64_t digest_scalars(float temperature, float p_min, uint64_t seed, int32_t n_blocks) {
  uint32_t t, p;
  memcpy(&t, &temperature, 4);
  memcpy(&p, &p_min, 4);
  return digest_term(kDigestScalars, t) + digest_term(kDigestScalars + 1, p) + digest_term(kDigestScalars + 2, seed) +
         digest_term(kDigestScalars + 3, (uint32_t)n_blocks);
}

// One hidden row's terms, word w of the row read k-th at position k * 2^32 + w, summed over the
// words w0, w0 + step, ... (a thread's share; step 1 for all of them).
DFSEL_HD uint64_t digest_row(const uint8_t* row, size_t n_bytes, uint64_t k, size_t w0, size_t step) {
  uint64_t h = 0;
  const size_t words = (n_bytes + 7) / 8;
  const bool aligned = ((uintptr_t)row & 7) == 0;
  for (size_t w = w0; w < words; w += step) {
    uint64_t x;
    if (aligned && w * 8 + 8 <= n_bytes) {  // one 8-byte load (little-endian, as the copy)
#ifdef __CUDA_ARCH__
      x = *reinterpret_cast<const uint64_t*>(row + w * 8);
#else
      memcpy(&x, row + w * 8, 8);
#endif
    } else {
      x = digest_row_word(row, n_bytes, w);
    }
    h += digest_term((k << 32) + w, x);
  }
  return h;
}

// A digest of `rows` rows of n_bytes each, stride bytes apart (never 0), for weights every
// rank of a group holds whole (W_h, conf_w): row r's words at positions r * 2^32 + w, the row
// length as one more term. Equal bytes give equal digests.
DFSEL_HD uint64_t matrix_digest(const uint8_t* data, size_t n_bytes, int64_t rows, size_t stride) {
  uint64_t h = digest_term(~0ull, (uint64_t)n_bytes);
  for (int64_t r = 0; r < rows; ++r) h += digest_row(data + (size_t)r * stride, n_bytes, (uint64_t)r, 0, 1);
  return h ? h : 1;
}

}  // namespace dfsel
