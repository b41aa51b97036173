// The candidate total order of SPEC section 3: raw logit descending, token id ascending,
// NaN below every number (-inf included). Encoded as one 64-bit key so that "better" is
// a single unsigned comparison on the CPU and the GPU alike; keys of distinct ids never tie.
#pragma once

#include <stdint.h>

#include "hd.cuh"
#include "kernels/topk/topk_order.cuh"
#include "numeric.cuh"

namespace dfsel {

// The order and its key are the vendorable top-K's (kernels/topk/topk_order.cuh), written once.
// A candidate as exchanged between ranks: the raw logit and its global token id.
using CandRec = topk::Rec;
static_assert(sizeof(CandRec) == 8, "records are exchanged as raw bytes");

// value_key: monotone map of a float to uint32 (NaN 0, below -inf's 0x007fffff; -0 and +0 share
// one key, so equal values tie on the id). value_bits_of_key: its inverse for a number's key.
// id_key / id_of_key: ids inverted, so that the lower id has the larger key. cand_key: both.
using topk::cand_key;
using topk::id_key;
using topk::id_of_key;
using topk::value_bits_of_key;
using topk::value_key;

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
