#include "ggml_support.h"

#include <cstring>
#include <stdexcept>

namespace dfsel::test {

GgmlContext::GgmlContext(size_t bytes, bool no_alloc) {
  ggml_init_params p{};
  p.mem_size = bytes;
  p.mem_buffer = nullptr;
  p.no_alloc = no_alloc;
  ctx_ = ggml_init(p);
  if (!ctx_) throw std::runtime_error("ggml_init failed");
}

std::vector<float> uniform(std::mt19937_64& rng, size_t n, float amp) {
  std::uniform_real_distribution<float> u(-amp, amp);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void store_rows(ggml_tensor* t, const float* x) {
  const int64_t ne0 = t->ne[0];
  for (int64_t r = 0; r < t->ne[1]; ++r) {
    void* row = static_cast<uint8_t*>(t->data) + (size_t)r * t->nb[1];
    const float* src = x + (size_t)r * ne0;
    switch (t->type) {
      case GGML_TYPE_F32: std::memcpy(row, src, (size_t)ne0 * 4); break;
      case GGML_TYPE_F16: ggml_fp32_to_fp16_row(src, static_cast<ggml_fp16_t*>(row), ne0); break;
      case GGML_TYPE_BF16: ggml_fp32_to_bf16_row(src, static_cast<ggml_bf16_t*>(row), ne0); break;
      default: ggml_quantize_chunk(t->type, src, row, 0, 1, ne0, nullptr); break;
    }
  }
}

ggml_tensor* new_filled(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, const float* x,
                        const char* name) {
  ggml_tensor* t = ggml_new_tensor_2d(ctx, type, ne0, ne1);
  ggml_set_name(t, name);
  store_rows(t, x);
  return t;
}

ggml_tensor* new_padded(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t pad,
                        const float* x, const char* name) {
  ggml_tensor* wide = ggml_new_tensor_2d(ctx, type, ne0 + pad, ne1);
  ggml_set_name(wide, (std::string(name) + " (wide)").c_str());
  std::memset(wide->data, 0x7f, ggml_nbytes(wide));  // padding that would show if read
  ggml_tensor* v = ggml_view_2d(ctx, wide, ne0, ne1, wide->nb[1], 0);
  ggml_set_name(v, name);
  store_rows(v, x);
  return v;
}

std::vector<float> ggml_row_to_float(const ggml_tensor* t, int64_t r) {
  std::vector<float> out((size_t)t->ne[0]);
  const void* row = static_cast<const uint8_t*>(t->data) + (size_t)r * t->nb[1];
  if (t->type == GGML_TYPE_F32) std::memcpy(out.data(), row, out.size() * 4);
  else ggml_get_type_traits(t->type)->to_float(row, out.data(), t->ne[0]);
  return out;
}

long first_bit_diff(const float* a, const float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) return (long)i;
  }
  return -1;
}

const std::vector<ggml_type> kDfselTypes = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q8_0, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
    GGML_TYPE_Q5_1, GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K};

bool widened_by_dfsel(ggml_type t) { return ggml_blck_size(t) > 1 && t != GGML_TYPE_Q8_0; }

const std::vector<ggml_type> kRefusedTypes = {
    GGML_TYPE_Q8_1,   GGML_TYPE_Q8_K,  GGML_TYPE_IQ2_XXS, GGML_TYPE_IQ2_XS, GGML_TYPE_IQ3_XXS, GGML_TYPE_IQ1_S,
    GGML_TYPE_IQ4_NL, GGML_TYPE_IQ3_S, GGML_TYPE_IQ2_S,   GGML_TYPE_IQ4_XS, GGML_TYPE_IQ1_M,   GGML_TYPE_TQ1_0,
    GGML_TYPE_TQ2_0,  GGML_TYPE_MXFP4, GGML_TYPE_NVFP4,   GGML_TYPE_Q1_0,   GGML_TYPE_Q2_0};

ggml_backend_meta_split_state split_output_weight(const ggml_tensor* t, void* rows) {
  ggml_backend_meta_split_state s{};
  s.n_segments = 1;
  s.nr[0] = 1;
  s.axis = GGML_BACKEND_SPLIT_AXIS_MIRRORED;
  if (std::strcmp(t->name, "output.weight") == 0) {
    s.axis = GGML_BACKEND_SPLIT_AXIS_1;
    s.ne[0] = static_cast<const int64_t*>(rows)[0];
    s.ne[1] = static_cast<const int64_t*>(rows)[1];
  }
  return s;
}

}  // namespace dfsel::test
