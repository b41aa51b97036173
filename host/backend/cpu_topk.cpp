// A threshold top-K. The K best keys seen so far are kept sorted; the K-th of them is the
// threshold. A block of 64 logits is compared with it at once, and only the elements that may
// beat it (AVX2), or every element of a block that holds one (SSE2), get the exact candidate
// key (kernels/common/order.cuh). On random rows few blocks pass, so the cost is one read of the
// row. The filter may let through a value that does not beat the threshold (NaN, an equal
// zero); it must never hold back one that does:
// - ids grow along the row, so a value equal to the threshold loses on the id and is skipped;
// - F32: "not x <= t" is true for x > t and for NaN;
// - F16 / BF16: the bits of a sign-magnitude value, folded to a signed integer that orders
//   numbers as their values (-0 just below +0, NaN at the ends), compared with the
//   threshold's fold;
// - a NaN threshold (fewer than K numbers so far): every element is looked at.
#include "host/backend/cpu_topk.h"

#include <cstring>

#include "kernels/common/limits.cuh"
#include "kernels/common/numeric.cuh"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif
#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace dfsel {

namespace {

constexpr int kBlock = 64;

struct Best {
  uint64_t key[kMaxTopK];
  int32_t k;
  uint64_t last() const { return key[k - 1]; }
  // key beats the K-th: insert it in order, dropping the K-th.
  void insert(uint64_t x) {
    int32_t j = k - 1;
    while (j > 0 && key[j - 1] < x) {
      key[j] = key[j - 1];
      --j;
    }
    key[j] = x;
  }
};

int16_t fold16(uint16_t bits) {
  const int16_t s = (int16_t)bits;
  return (int16_t)(s ^ ((s >> 15) & 0x7fff));
}

// The threshold in the filter's terms, from the K-th key (never NaN here).
struct Threshold {
  float f;      // F32
  int16_t h;    // F16 / BF16 fold
};

Threshold threshold_of(uint64_t key, dfsel_type t) {
  const float z = cand_from_key(key).z;
  Threshold th{z, 0};
  if (t == DFSEL_TYPE_BF16) th.h = fold16((uint16_t)(float_to_bits(z) >> 16));
  if (t == DFSEL_TYPE_F16) th.h = fold16(float_to_f16(z));
  return th;
}

#if defined(__x86_64__)
// Even bits of a byte mask of 16-bit lanes: one bit per lane.
uint32_t lanes16(uint32_t m) {
  m &= 0x55555555u;
  m = (m | (m >> 1)) & 0x33333333u;
  m = (m | (m >> 2)) & 0x0f0f0f0fu;
  m = (m | (m >> 4)) & 0x00ff00ffu;
  return (m | (m >> 8)) & 0x0000ffffu;
}

// Bit i set: element i of the kBlock from p may beat the threshold (32-byte loads, AVX2).
__attribute__((target("avx2"))) uint64_t block_mask_avx2(const uint8_t* p, dfsel_type t, const Threshold& th) {
  uint64_t mask = 0;
  if (t == DFSEL_TYPE_F32) {
    const __m256 tv = _mm256_set1_ps(th.f);
    const float* f = reinterpret_cast<const float*>(p);
    __m256 any = _mm256_setzero_ps();
    for (int i = 0; i < kBlock; i += 8) any = _mm256_or_ps(any, _mm256_cmp_ps(_mm256_loadu_ps(f + i), tv, _CMP_NLE_UQ));
    if (_mm256_movemask_ps(any) == 0) return 0;  // the common case: nothing in the block
    for (int i = 0; i < kBlock; i += 8)
      mask |= (uint64_t)_mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(f + i), tv, _CMP_NLE_UQ)) << i;
    return mask;
  }
  const __m256i tv = _mm256_set1_epi16(th.h), low = _mm256_set1_epi16(0x7fff);
  for (int i = 0; i < kBlock; i += 16) {
    const __m256i v = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 2 * i));
    const __m256i folded = _mm256_xor_si256(v, _mm256_and_si256(_mm256_srai_epi16(v, 15), low));
    const uint32_t bytes = (uint32_t)_mm256_movemask_epi8(_mm256_cmpgt_epi16(folded, tv));
    if (bytes) mask |= (uint64_t)lanes16(bytes) << i;
  }
  return mask;
}
#endif

// Whether any of the kBlock elements from p may beat the threshold.
bool block_may_pass(const uint8_t* p, dfsel_type t, const Threshold& th) {
#if defined(__SSE2__)
  if (t == DFSEL_TYPE_F32) {
    const __m128 tv = _mm_set1_ps(th.f);
    const float* f = reinterpret_cast<const float*>(p);
    __m128 m = _mm_setzero_ps();
    for (int i = 0; i < kBlock; i += 8) {
      m = _mm_or_ps(m, _mm_cmpnle_ps(_mm_loadu_ps(f + i), tv));
      m = _mm_or_ps(m, _mm_cmpnle_ps(_mm_loadu_ps(f + i + 4), tv));
    }
    return _mm_movemask_ps(m) != 0;
  }
  const __m128i tv = _mm_set1_epi16(th.h), low = _mm_set1_epi16(0x7fff);
  __m128i m = _mm_setzero_si128();
  for (int i = 0; i < kBlock; i += 8) {
    const __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2 * i));
    const __m128i folded = _mm_xor_si128(v, _mm_and_si128(_mm_srai_epi16(v, 15), low));
    m = _mm_or_si128(m, _mm_cmpgt_epi16(folded, tv));
  }
  return _mm_movemask_epi8(m) != 0;
#else
  for (int i = 0; i < kBlock; ++i) {
    if (t == DFSEL_TYPE_F32) {
      float x;
      std::memcpy(&x, p + 4 * i, 4);
      if (!(x <= th.f)) return true;
    } else {
      uint16_t b;
      std::memcpy(&b, p + 2 * i, 2);
      if (fold16(b) > th.h) return true;
    }
  }
  return false;
#endif
}

}  // namespace

void row_topk(const void* row_v, dfsel_type type, int64_t n, int32_t k, int64_t id_offset, bool simd, CandRec* out) {
  const uint8_t* row = static_cast<const uint8_t*>(row_v);
  const size_t es = type == DFSEL_TYPE_F32 ? 4 : 2;
  Best best;
  best.k = k;
  // The first K elements, in order.
  for (int32_t c = 0; c < k; ++c) {
    const uint64_t key = cand_key(load_elem(row, type, c), (int32_t)(id_offset + c));
    int32_t j = c;
    while (j > 0 && best.key[j - 1] < key) {
      best.key[j] = best.key[j - 1];
      --j;
    }
    best.key[j] = key;
  }
  // A NaN K-th (value key 0): every number beats it, so nothing is filtered.
  bool nan_threshold = (best.last() >> 32) == 0;
  Threshold th = threshold_of(best.last(), type);
  auto visit = [&](int64_t c) {
    const uint64_t key = cand_key(load_elem(row, type, c), (int32_t)(id_offset + c));
    if (key <= best.last()) return;
    best.insert(key);
    nan_threshold = (best.last() >> 32) == 0;
    th = threshold_of(best.last(), type);
  };
  int64_t c = k;
  while (c + kBlock <= n) {
    const uint8_t* at = row + (size_t)c * es;
#if defined(__x86_64__)
    if (simd && !nan_threshold) {
      // Only the elements the filter lets through get their exact key.
      for (uint64_t m = block_mask_avx2(at, type, th); m != 0; m &= m - 1) visit(c + __builtin_ctzll(m));
      c += kBlock;
      continue;
    }
#endif
    if (nan_threshold || block_may_pass(at, type, th)) {
      for (int64_t e = c + kBlock; c < e; ++c) visit(c);
    } else {
      c += kBlock;
    }
  }
  for (; c < n; ++c) visit(c);
  // The logit comes back from the row so that NaN payloads and -0 are returned as stored.
  for (int32_t j = 0; j < k; ++j) {
    const int32_t id = cand_from_key(best.key[j]).id;
    out[j] = CandRec{load_elem(row, type, id - id_offset), id};
  }
}

}  // namespace dfsel

namespace dfsel {

void merge_top_k(const CandRec* recs, int32_t n, int32_t k, CandRec* out, int32_t* src) {
  // Keys of distinct ids never tie, so the K best keys are the records of rank < K.
  uint64_t key[kMaxTopK];
  int32_t at[kMaxTopK];
  int32_t have = 0;
  for (int32_t q = 0; q < n; ++q) {
    const uint64_t x = cand_key(recs[q]);
    if (have == k && x <= key[k - 1]) continue;
    int32_t j = have < k ? have++ : k - 1;
    while (j > 0 && key[j - 1] < x) {
      key[j] = key[j - 1];
      at[j] = at[j - 1];
      --j;
    }
    key[j] = x;
    at[j] = q;
  }
  for (int32_t r = 0; r < have; ++r) {
    out[r] = recs[at[r]];
    src[r] = at[r];
  }
}

}  // namespace dfsel
