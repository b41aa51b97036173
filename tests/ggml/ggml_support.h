// What the ggml tests share: a ggml context that frees itself, tensors filled through ggml's
// own converters and quantisers, and ggml's own decoding back to floats.
#pragma once

#include <ggml-backend.h>
#include <ggml.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace dfsel::test {

// A ggml context of `bytes` (tensor data included unless no_alloc).
class GgmlContext {
 public:
  explicit GgmlContext(size_t bytes, bool no_alloc = false);
  ~GgmlContext() { ggml_free(ctx_); }
  GgmlContext(const GgmlContext&) = delete;
  GgmlContext& operator=(const GgmlContext&) = delete;
  ggml_context* get() const { return ctx_; }

 private:
  ggml_context* ctx_;
};

// Uniform values in [-amp, amp).
std::vector<float> uniform(std::mt19937_64& rng, size_t n, float amp);

// Stores rows x rows of ne0 floats into t (of any type ggml converts or quantises to), row r
// at t->data + r * t->nb[1]: F32 copied, F16 / BF16 by ggml_fp32_to_*_row, quantised types by
// ggml_quantize_chunk.
void store_rows(ggml_tensor* t, const float* x);

// A new 2-D tensor {ne0, ne1} of `type` named `name` holding x (ne0 * ne1 floats) as stored
// by store_rows.
ggml_tensor* new_filled(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, const float* x,
                        const char* name);

// A {ne0, ne1} view into a new {ne0 + pad, ne1} tensor of `type` (rows nb[1] wider than
// one row, as a view into a wider tensor gives), holding x.
ggml_tensor* new_padded(ggml_context* ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t pad,
                        const float* x, const char* name);

// Row r of t decoded by ggml's own to_float (ggml_get_type_traits).
std::vector<float> ggml_row_to_float(const ggml_tensor* t, int64_t r);

// The first index where a and b differ bit for bit, or -1.
long first_bit_diff(const float* a, const float* b, size_t n);

// The ggml types dfsel reads, and whether dfsel widens one to BF16 (every block type of them
// but Q8_0, which it reads as stored).
extern const std::vector<ggml_type> kDfselTypes;
bool widened_by_dfsel(ggml_type t);

// The split rule of llama.cpp's split-mode tensor for ggml's meta backend over two devices:
// output.weight {n_embd, V} split along the vocabulary (ggml's axis 1), rows[0] of it on device
// 0 and rows[1] on device 1; every other tensor mirrored. rows: a const int64_t[2].
ggml_backend_meta_split_state split_output_weight(const ggml_tensor* t, void* rows);

// The types dfsel refuses though ggml has them: the IQ, TQ and FP4 types, Q8_1, Q8_K.
extern const std::vector<ggml_type> kRefusedTypes;

}  // namespace dfsel::test
