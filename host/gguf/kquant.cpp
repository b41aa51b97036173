// K-quant rows widened to floats, laid out as ggml stores them.
//
// Q4_K, 144 bytes per 256 values: f16 d, f16 dmin, 12 bytes holding eight 6-bit scales and
// eight 6-bit mins, 128 bytes of 4-bit quants. Sub-block s (32 values) is
// d * scale[s] * q - dmin * min[s]; sub-blocks 2g and 2g+1 share quant bytes 32g..32g+31,
// low nibbles first. Scale/min j < 4 are the low 6 bits of bytes j / j+4; j >= 4 take their
// low 4 bits from byte j+4 (scale low nibble, min high nibble) and their top 2 bits from the
// top bits of bytes j-4 (scale) and j (min).
//
// Q6_K, 210 bytes per 256 values: 128 bytes of low 4 bits, 64 bytes of high 2 bits, 16 int8
// scales (one per 16 values), f16 d. Value = d * scale * (q - 32), q in [0, 64).
#include "host/gguf/kquant.h"

#include <vector>

#include "host/gguf/gguf_format.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

void q4_k_scale_min(const uint8_t* s, int j, int* scale, int* min) {
  if (j < 4) {
    *scale = s[j] & 63;
    *min = s[j + 4] & 63;
  } else {
    *scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    *min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

}  // namespace

void dequantize_q4_k(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQKBlock; ++b, src += kQ4KBytes, out += kQKBlock) {
    const float d = f16_to_float(load_u16(src));
    const float dmin = f16_to_float(load_u16(src + 2));
    const uint8_t* scales = src + 4;
    const uint8_t* qs = src + 16;
    for (int g = 0; g < 4; ++g) {
      int sc0, m0, sc1, m1;
      q4_k_scale_min(scales, 2 * g, &sc0, &m0);
      q4_k_scale_min(scales, 2 * g + 1, &sc1, &m1);
      const float d0 = d * float(sc0), o0 = dmin * float(m0);
      const float d1 = d * float(sc1), o1 = dmin * float(m1);
      for (int l = 0; l < 32; ++l) {
        out[64 * g + l] = d0 * float(qs[32 * g + l] & 0x0f) - o0;
        out[64 * g + 32 + l] = d1 * float(qs[32 * g + l] >> 4) - o1;
      }
    }
  }
}

void dequantize_q6_k(const uint8_t* src, int64_t n, float* out) {
  for (int64_t b = 0; b < n / kQKBlock; ++b, src += kQ6KBytes, out += kQKBlock) {
    const float d = f16_to_float(load_u16(src + 208));
    for (int h = 0; h < 2; ++h) {  // two halves of 128 values
      const uint8_t* ql = src + 64 * h;
      const uint8_t* qh = src + 128 + 32 * h;
      const int8_t* sc = reinterpret_cast<const int8_t*>(src + 192 + 8 * h);
      float* y = out + 128 * h;
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q0 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q1 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q2 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q3 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * float(sc[is]) * float(q0);
        y[l + 32] = d * float(sc[is + 2]) * float(q1);
        y[l + 64] = d * float(sc[is + 4]) * float(q2);
        y[l + 96] = d * float(sc[is + 6]) * float(q3);
      }
    }
  }
}

void widen_to_bf16(const uint8_t* src, int type, int64_t rows, int64_t n, size_t src_pitch, uint16_t* dst) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    const uint8_t* in = src + size_t(r) * src_pitch;
    if (type == DFSEL_TYPE_Q4_K) dequantize_q4_k(in, n, row.data());
    else dequantize_q6_k(in, n, row.data());
    uint16_t* out = dst + size_t(r) * size_t(n);
    for (int64_t e = 0; e < n; ++e) out[e] = float_to_bf16(row[size_t(e)]);
  }
}

}  // namespace dfsel::gguf
