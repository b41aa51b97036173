// The candidate total order of SPEC section 3: raw logit descending, token id ascending,
// NaN below every number (-inf included). Encoded as one 64-bit key so that "better" is
// a single unsigned comparison on the CPU and the GPU alike; keys of distinct ids never tie.
#pragma once

#include <stdint.h>

#include "hd.cuh"
#include "numeric.cuh"

namespace dfsel {

// A candidate as exchanged between ranks: the raw logit and its global token id.
struct CandRec {
  float z;
  int32_t id;
};
static_assert(sizeof(CandRec) == 8, "records are exchanged as raw bytes");

// Monotone map of a float to uint32: larger value, larger key. NaN maps to 0, below -inf
// (whose key is 0x007fffff); -0 and +0 share one key so that equal values tie on the id.
DFSEL_HD uint32_t value_key(float z) {
  uint32_t u = float_to_bits(z);
  if ((u & 0x7fffffffu) > 0x7f800000u) return 0u;
  if (u == 0x80000000u) u = 0u;
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// The inverse of value_key for a number's key (not 0, NaN's): the float's bits (+0 for both
// zeros). The top-K's bound (block/select.cuh, key_value_floor) writes the same expression out.
DFSEL_HD uint32_t value_bits_of_key(uint32_t vk) { return (vk & 0x80000000u) ? (vk & 0x7fffffffu) : ~vk; }

// Ids are stored inverted, so that the lower id has the larger key.
DFSEL_HD uint32_t id_key(int32_t id) { return 0xffffffffu - (uint32_t)id; }
DFSEL_HD int32_t id_of_key(uint64_t key) { return (int32_t)(0xffffffffu - (uint32_t)key); }

DFSEL_HD uint64_t cand_key(float z, int32_t id) {
  return ((uint64_t)value_key(z) << 32) | (uint64_t)id_key(id);
}

DFSEL_HD uint64_t cand_key(CandRec c) { return cand_key(c.z, c.id); }

// Inverse of cand_key for valid keys (id >= 0); z of a NaN key comes back as a quiet NaN.
DFSEL_HD CandRec cand_from_key(uint64_t key) {
  const uint32_t vk = (uint32_t)(key >> 32);
  CandRec c;
  c.id = id_of_key(key);
  if (vk == 0u) {
    c.z = bits_to_float(kF32NaNBits);
  } else {
    c.z = bits_to_float(value_bits_of_key(vk));
  }
  return c;
}

// Merge: the rank of record i among n records is the number of records that precede it;
// the K records of rank < K are the global top-K, in order. Every rank computes the same
// ranks from the same records, so the merged lists are bitwise identical (SPEC section 4.5).
DFSEL_HD int cand_rank(const CandRec* recs, int n, int i) {
  const uint64_t ki = cand_key(recs[i]);
  int r = 0;
  for (int j = 0; j < n; ++j) r += cand_key(recs[j]) > ki ? 1 : 0;
  return r;
}

}  // namespace dfsel
