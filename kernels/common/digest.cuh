// A digest of values that the ranks of a group must hold alike (anchors and hidden rows of a
// DSpark run, a DFlash2 plan's W_h): a sum (mod 2^64) of one mixed term per 8-byte word, each
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

}  // namespace dfsel
