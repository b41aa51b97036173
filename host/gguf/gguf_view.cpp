// What the draft views share (gguf_view.h): typed metadata reads with their messages, and
// tensor rows as dfsel_tensor views into the mapping, or widened into buffers the view owns.
#include "host/gguf/gguf_view.h"

#include <cmath>
#include <cstring>
#include <limits>

#include "host/gguf/gguf_format.h"
#include "host/gguf/dequant.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

Status format_error(std::string what) { return Status{DFSEL_FORMAT_ERROR, std::move(what)}; }

// A required integer key within [lo, hi].
Status required_int(const File& f, const char* key, int64_t lo, int64_t hi, int64_t* out) {
  const KeyValue* kv = f.find_key(key);
  if (kv == nullptr) return format_error(cat("metadata key '", key, "' is missing"));
  if (!f.read_int(*kv, out)) {
    if (kv->type == ValueType::U64)
      return format_error(cat(key, " = ", f.render(*kv), " is outside [", lo, ", ", hi, "]"));
    return format_error(
        cat(key, " has type ", value_type_name(uint32_t(kv->type)), ", expected an integer"));
  }
  if (*out < lo || *out > hi)
    return format_error(cat(key, " = ", *out, " is outside [", lo, ", ", hi, "]"));
  return Status::success();
}

// An optional float key, left as is when absent.
Status optional_float(const File& f, const char* key, double* out) {
  const KeyValue* kv = f.find_key(key);
  if (kv == nullptr) return Status::success();
  if (!f.read_float(*kv, out))
    return format_error(
        cat(key, " has type ", value_type_name(uint32_t(kv->type)), ", expected f32 or f64"));
  if (!std::isfinite(*out) || std::fabs(*out) > double(std::numeric_limits<float>::max()))
    return format_error(cat(key, " = ", f.render(*kv), " is not a finite float"));
  // dfsel_config holds a float: a value that is not 0 must stay a normal one (a tiny f64 would
  // become 0, which dfsel_config reads as "no scale" or "no softcap").
  if (*out != 0 && std::fabs(*out) < double(std::numeric_limits<float>::min()))
    return format_error(cat(key, " = ", f.render(*kv), " is not 0 but below the smallest normal float, ",
                            std::numeric_limits<float>::min()));
  return Status::success();
}

bool weight_type(uint32_t t) { return t <= uint32_t(DFSEL_TYPE_BF16) && is_weight_type(dfsel_type(t)); }

Status find_weight_tensor(const File& f, const char* name, const TensorInfo** out) {
  const TensorInfo* t = f.find_tensor(name);
  if (t == nullptr) return format_error(cat("tensor '", name, "' is missing"));
  if (!weight_type(t->type)) {
    TypeLayout lay;
    type_layout(t->type, &lay);  // parsing accepted known types only
    return Status{DFSEL_UNSUPPORTED,
                  cat("tensor '", name, "' has ggml type ", t->type, " (", lay.name, "); dfsel reads ",
                      kWeightTypeList)};
  }
  if (t->ne[2] != 1 || t->ne[3] != 1)
    return format_error(cat("tensor '", name, "' has shape ", shape_string(t->ne, t->n_dims),
                            ", expected two dimensions"));
  *out = t;
  return Status::success();
}

// Rows [r0, r1) of a two-dimensional tensor as a view: into the file where the selector reads
// the stored type directly and the data is aligned for it, else into *owned.
void view_rows(const File& f, const TensorInfo& t, int64_t r0, int64_t r1,
               std::vector<uint16_t>* owned, dfsel_tensor* v, bool copy) {
  const int64_t n = t.ne[0];
  const int64_t rows = r1 - r0;
  TypeLayout lay;
  type_layout(t.type, &lay);
  const size_t src_row = size_t(n / lay.block_elems) * lay.block_bytes;
  const uint8_t* src = f.tensor_data(t) + size_t(r0) * src_row;
  *v = dfsel_tensor{};
  if (is_widened_type(dfsel_type(t.type))) {
    owned->resize(size_t(rows) * size_t(n));
    widen_to_bf16(src, dfsel_type(t.type), rows, n, src_row, owned->data());
    v->data = owned->data();
    v->type = DFSEL_TYPE_BF16;
    v->nb[0] = 2;
    v->nb[1] = row_bytes(DFSEL_TYPE_BF16, n);
  } else {
    const dfsel_type type = static_cast<dfsel_type>(t.type);
    const size_t bytes = size_t(rows) * row_bytes(type, n);
    const size_t align = type == DFSEL_TYPE_F32 ? 4 : 2;
    if (copy || reinterpret_cast<uintptr_t>(src) % align != 0) {  // or general.alignment 1 or 2
      owned->resize(bytes / 2);
      memcpy(owned->data(), src, bytes);
      src = reinterpret_cast<const uint8_t*>(owned->data());
    }
    v->data = src;
    v->type = type;
    v->nb[0] = lay.block_bytes;
    v->nb[1] = row_bytes(type, n);
  }
  v->ne[0] = n;
  v->ne[1] = rows;
  v->ne[2] = 1;
  v->ne[3] = 1;
  v->nb[2] = v->nb[1] * size_t(rows);
  v->nb[3] = v->nb[2];
}

}  // namespace dfsel::gguf
