// ggml tensors as dfsel_tensor views. ggml's tensor struct already is dfsel's description
// (ne[0] contiguous, nb[] in bytes, ggml's type ids), so the view copies the fields; what is
// here is the refusal of everything dfsel cannot read, in ggml's own terms.
#include "host/ggml/tensor_view.h"

#include <ggml.h>

#include <cinttypes>
#include <cstring>

#include "dfsel/ggml.h"

namespace dfsel::ggml {

namespace {

bool dfsel_reads(ggml_type t) {
  switch (t) {
    case GGML_TYPE_F32: case GGML_TYPE_F16: case GGML_TYPE_BF16: case GGML_TYPE_Q8_0:
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_0: case GGML_TYPE_Q5_1:
    case GGML_TYPE_Q2_K: case GGML_TYPE_Q3_K: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q6_K:
      return true;
    default:
      return false;
  }
}

bool is_block_type(ggml_type t) { return ggml_blck_size(t) > 1; }

// The view passes ggml's type ids on as dfsel_type: they must be the same numbers.
static_assert(GGML_TYPE_F32 == (int)DFSEL_TYPE_F32 && GGML_TYPE_F16 == (int)DFSEL_TYPE_F16 &&
                  GGML_TYPE_BF16 == (int)DFSEL_TYPE_BF16 && GGML_TYPE_Q8_0 == (int)DFSEL_TYPE_Q8_0 &&
                  GGML_TYPE_Q4_0 == (int)DFSEL_TYPE_Q4_0 && GGML_TYPE_Q4_1 == (int)DFSEL_TYPE_Q4_1 &&
                  GGML_TYPE_Q5_0 == (int)DFSEL_TYPE_Q5_0 && GGML_TYPE_Q5_1 == (int)DFSEL_TYPE_Q5_1 &&
                  GGML_TYPE_Q2_K == (int)DFSEL_TYPE_Q2_K && GGML_TYPE_Q3_K == (int)DFSEL_TYPE_Q3_K &&
                  GGML_TYPE_Q4_K == (int)DFSEL_TYPE_Q4_K && GGML_TYPE_Q5_K == (int)DFSEL_TYPE_Q5_K &&
                  GGML_TYPE_Q6_K == (int)DFSEL_TYPE_Q6_K,
              "ggml's type ids are dfsel_type's");

}  // namespace

std::string display_name(const ggml_tensor* t) {
  const size_t n = strnlen(t->name, sizeof t->name);
  return n ? "'" + std::string(t->name, n) + "'" : std::string("(unnamed)");
}

Status check_layout(const ggml_tensor* t) {
  if (!t) return fail(DFSEL_INVALID_ARGUMENT, "tensor is NULL");
  const std::string name = display_name(t);
  const char* nm = name.c_str();
  if ((int)t->type < 0 || (int)t->type >= GGML_TYPE_COUNT) {
    return fail(DFSEL_UNSUPPORTED, "tensor %s: type id %d is not a ggml type", nm, (int)t->type);
  }
  if (!dfsel_reads(t->type)) {
    return fail(DFSEL_UNSUPPORTED,
                "tensor %s: ggml type %s (%d) is not read by dfsel (f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, "
                "q5_1, q2_K, q3_K, q4_K, q5_K, q6_K)",
                nm, ggml_type_name(t->type), (int)t->type);
  }
  if (t->ne[2] != 1 || t->ne[3] != 1) {
    return fail(DFSEL_INVALID_ARGUMENT,
                "tensor %s is {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64
                "}: dfsel reads 2-D tensors (ne[2] = ne[3] = 1)",
                nm, t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
  }
  if (t->ne[0] < 1 || t->ne[1] < 1) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s is empty: ne = {%" PRId64 ", %" PRId64 "}", nm,
                t->ne[0], t->ne[1]);
  }
  const size_t elem = ggml_type_size(t->type);
  if (t->nb[0] != elem) {
    return fail(DFSEL_INVALID_ARGUMENT,
                "tensor %s is not contiguous along ne[0]: nb[0] = %zu, a %s %s is %zu bytes "
                "(a transposed or permuted view: ggml_cont it)",
                nm, t->nb[0], ggml_type_name(t->type), is_block_type(t->type) ? "block" : "element",
                elem);
  }
  const int64_t blck = ggml_blck_size(t->type);
  if (t->ne[0] % blck != 0) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s: ne[0] = %" PRId64 " is not a multiple of the %s block (%" PRId64 ")",
                nm, t->ne[0], ggml_type_name(t->type), blck);
  }
  const size_t row = ggml_row_size(t->type, t->ne[0]);
  if (t->ne[1] > 1 && t->nb[1] < row) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s: nb[1] = %zu is less than one row (%zu bytes)", nm,
                t->nb[1], row);
  }
  // Rows start where an element can be read: float rows on their element, Q8_0 rows (f16
  // scales) on even bytes, the other block types anywhere (they are widened byte by byte).
  const size_t row_align = !is_block_type(t->type) ? elem : t->type == GGML_TYPE_Q8_0 ? 2 : 1;
  if (t->ne[1] > 1 && t->nb[1] % row_align != 0) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s: nb[1] = %zu is not a multiple of %zu bytes (%s rows)", nm,
                t->nb[1], row_align, ggml_type_name(t->type));
  }
  return Status::success();
}

size_t element_alignment(const ggml_tensor* t) {
  return t->type == GGML_TYPE_F32 || t->type == GGML_TYPE_I32 ? 4 : 2;
}

Status check_alignment(const ggml_tensor* t, size_t align) {
  if (t->data) {
    if ((uintptr_t)t->data % align == 0) return Status::success();
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s: data %p is not aligned to %zu bytes", display_name(t).c_str(),
                t->data, align);
  }
  if (t->view_src && !t->view_src->data && t->view_offs % align != 0) {
    return fail(DFSEL_INVALID_ARGUMENT,
                "tensor %s: a view at offset %zu into %s, so its data will not be aligned to %zu bytes",
                display_name(t).c_str(), t->view_offs, display_name(t->view_src).c_str(), align);
  }
  return Status::success();
}

Status to_view(const ggml_tensor* t, dfsel_tensor* out) {
  DFSEL_TRY(check_layout(t));
  const std::string name = display_name(t);
  if (!t->data) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s has no data (not allocated yet)", name.c_str());
  }
  DFSEL_TRY(check_alignment(t, t->type == GGML_TYPE_F32 ? 4 : 2));
  dfsel_tensor v{};
  v.data = t->data;
  v.type = static_cast<dfsel_type>(t->type);  // ggml's ids are dfsel's (include/dfsel/dfsel.h)
  for (int i = 0; i < 4; ++i) {
    v.ne[i] = t->ne[i];
    v.nb[i] = t->nb[i];
  }
  // A single row's nb[1] may be anything in ggml; dfsel reads it, so make it one row.
  if (v.ne[1] == 1) v.nb[1] = ggml_row_size(t->type, t->ne[0]);
  *out = v;
  return Status::success();
}

}  // namespace dfsel::ggml

extern "C" dfsel_status dfsel_ggml_tensor(const ggml_tensor* t, dfsel_tensor* out, char* msg, size_t msg_len) {
  dfsel::Status s = out ? dfsel::ggml::to_view(t, out)
                        : dfsel::fail(DFSEL_INVALID_ARGUMENT, "out (the view pointer) is NULL");
  if (msg && msg_len) {
    std::snprintf(msg, msg_len, "%s", s.msg.c_str());
  }
  return s.code;
}
