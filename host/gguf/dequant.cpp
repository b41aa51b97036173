// The widened types by table: each type's values a sub-block and its unpacker (block_unpack.h);
// one loop turns an unpacked block into floats for all of them.
#include "host/gguf/dequant.h"

#include <vector>

#include "host/gguf/block_unpack.h"
#include "host/gguf/gguf_file.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

struct Format {
  dfsel_type type;
  int sub;  // values that share one scale and min
  UnpackFn unpack;
};

constexpr Format kFormats[] = {
    {DFSEL_TYPE_Q4_0, 32, unpack_q4_0}, {DFSEL_TYPE_Q4_1, 32, unpack_q4_1}, {DFSEL_TYPE_Q5_0, 32, unpack_q5_0},
    {DFSEL_TYPE_Q5_1, 32, unpack_q5_1}, {DFSEL_TYPE_Q2_K, 16, unpack_q2_k}, {DFSEL_TYPE_Q3_K, 16, unpack_q3_k},
    {DFSEL_TYPE_Q4_K, 32, unpack_q4_k}, {DFSEL_TYPE_Q5_K, 32, unpack_q5_k}, {DFSEL_TYPE_Q6_K, 16, unpack_q6_k},
};

const Format& format_of(dfsel_type type) {
  for (const Format& f : kFormats)
    if (f.type == type) return f;
  return kFormats[0];  // not reached: callers pass widened types only
}

}  // namespace

void dequantize_row(dfsel_type type, const uint8_t* src, int64_t n, float* out) {
  const Format& f = format_of(type);
  const WidenedBlock b = widened_block(type);
  Unpacked u;
  for (int64_t at = 0; at + b.elems <= n; at += b.elems, src += b.bytes) {
    f.unpack(src, &u);
    for (int s = 0; s < b.elems / f.sub; ++s) {
      const float a = u.d * float(u.scale[s]), m = u.dmin * float(u.min[s]);
      for (int i = s * f.sub; i < (s + 1) * f.sub; ++i) out[at + i] = a * float(u.q[i]) - m;
    }
  }
}

void widen_to_bf16(const uint8_t* src, dfsel_type type, int64_t rows, int64_t n, size_t src_pitch, uint16_t* dst) {
  std::vector<float> row(static_cast<size_t>(n));
  for (int64_t r = 0; r < rows; ++r) {
    dequantize_row(type, src + size_t(r) * src_pitch, n, row.data());
    uint16_t* out = dst + size_t(r) * size_t(n);
    for (int64_t e = 0; e < n; ++e) out[e] = float_to_bf16(row[size_t(e)]);
  }
}

const char* ggml_type_label(int id) {
  TypeLayout lay;
  return id >= 0 && type_layout(uint32_t(id), &lay) ? lay.name : nullptr;
}

}  // namespace dfsel::gguf
