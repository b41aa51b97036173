#include "host/plan/plan_checks.h"

#include <cinttypes>
#include <cstddef>
#include <cstdio>

#include "host/gguf/dequant.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

namespace {

// Every dfsel_type is a weight type.
bool is_type_id(int t) { return t >= 0 && t <= DFSEL_TYPE_BF16 && is_weight_type((dfsel_type)t); }

// A type id as messages name it: dfsel's name, or ggml's for a ggml type dfsel does not read
// (an IQ or TQ type, say).
const char* type_label(int t) {
  if (is_type_id(t)) return dfsel_type_name((dfsel_type)t);
  const char* ggml = gguf::ggml_type_label(t);
  return ggml ? ggml : "not a dfsel_type";
}

}  // namespace

Status check_matrix(const char* name, const dfsel_tensor& t, bool weight, int64_t ne0,
                    int64_t ne1_min, bool exact_ne1) {
  if (!t.data) return fail(DFSEL_INVALID_ARGUMENT, "%s.data is NULL", name);
  const int type = enum_value(t.type);
  if (!is_type_id(type) || (weight ? !is_weight_type(t.type) : !is_float_type(t.type)))
    return fail(DFSEL_UNSUPPORTED, "%s.type = %d (%s) is not supported here; use %s", name, type, type_label(type),
                weight ? kWeightTypeList : "F32, F16 or BF16");
  if (t.ne[0] != ne0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.ne[0] = %" PRId64 ", expected %" PRId64, name, t.ne[0], ne0);
  if (exact_ne1 ? t.ne[1] != ne1_min : t.ne[1] < ne1_min)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.ne[1] = %" PRId64 ", expected %s%" PRId64, name, t.ne[1],
                exact_ne1 ? "" : "at least ", ne1_min);
  // A 2-D view: the outer axes hold one element each (0 would be an empty tensor).
  if (t.ne[2] != 1 || t.ne[3] != 1)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.ne[2..3] = {%" PRId64 ", %" PRId64 "}, expected {1, 1}", name,
                t.ne[2], t.ne[3]);
  if (t.type == DFSEL_TYPE_Q8_0 && ne0 % kQ8Block != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s is Q8_0 but ne[0] = %" PRId64 " is not a multiple of 32",
                name, ne0);
  if (is_widened_type(t.type) && ne0 % widened_block(t.type).elems != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s is %s but ne[0] = %" PRId64 " is not a multiple of %d", name,
                dfsel_type_name(t.type), ne0, widened_block(t.type).elems);
  if (t.nb[0] != type_block_bytes(t.type))
    return fail(DFSEL_INVALID_ARGUMENT, "%s.nb[0] = %zu, expected %zu for %s (rows must be contiguous)",
                name, t.nb[0], type_block_bytes(t.type), dfsel_type_name(t.type));
  const size_t rb = row_bytes(t.type, ne0);
  if (t.nb[1] < rb)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.nb[1] = %zu is smaller than one row (%zu bytes)", name, t.nb[1], rb);
  if (is_float_type(t.type) && t.nb[1] % type_block_bytes(t.type) != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.nb[1] = %zu is not a multiple of the element size %zu", name,
                t.nb[1], type_block_bytes(t.type));
  // Every Q8_0 block starts with an f16 scale, read in place.
  if (t.type == DFSEL_TYPE_Q8_0 && t.nb[1] % 2 != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s.nb[1] = %zu is odd; Q8_0 rows must start at even addresses", name,
                t.nb[1]);
  // The rows must fit in memory a process can address, from where the data starts: a larger
  // span (a stride that is garbage, a count that is) would be read past the end of memory.
  return check_rows_extent(name, ".data", t.data, t.ne[1], "ne[1]", t.nb[1], "nb[1]", rb);
}

namespace {

// The extent rule: a span (overflowed: its count did not fit in 64 bits) that memory can hold,
// from data; what(buf, len) says what the bytes are made of, written only for a message.
template <class What>
Status check_extent(const char* name, const char* data_suffix, const void* data, size_t span, bool overflowed,
                    What what) {
  uintptr_t end;
  const bool too_long = overflowed || span > kMaxTensorSpan;
  if (!too_long && !__builtin_add_overflow((uintptr_t)data, span, &end)) return Status::success();
  char made_of[160];
  what(made_of, sizeof made_of);
  if (too_long)
    return fail(DFSEL_INVALID_ARGUMENT, "%s spans more than 2^47 bytes (what a process can address): %s", name, made_of);
  return fail(DFSEL_INVALID_ARGUMENT, "%s%s = %p plus its %zu bytes (%s) passes the end of the address space", name,
              data_suffix, data, span, made_of);
}

}  // namespace

Status check_rows_extent(const char* name, const char* data_suffix, const void* data, int64_t rows, const char* rows_name,
                         size_t stride, const char* stride_name, size_t row_bytes) {
  size_t span = 0;
  const bool overflowed = rows < 1 || __builtin_mul_overflow((size_t)(rows - 1), stride, &span) ||
                          __builtin_add_overflow(span, row_bytes, &span);
  return check_extent(name, data_suffix, data, span, overflowed, [&](char* buf, size_t len) {
    std::snprintf(buf, len, "%s = %" PRId64 " rows of %s = %zu bytes", rows_name, rows, stride_name, stride);
  });
}

Status check_bytes_extent(const char* name, const void* data, size_t bytes, const char* bytes_name) {
  return check_extent(name, "", data, bytes, false,
                      [&](char* buf, size_t len) { std::snprintf(buf, len, "%s = %zu", bytes_name, bytes); });
}

Status check_shard(const dfsel_shard& s, int64_t n_vocab) {
  if (s.n_ranks < 1) return fail(DFSEL_INVALID_ARGUMENT, "shard.n_ranks = %d must be at least 1", s.n_ranks);
  if (s.rank < 0 || s.rank >= s.n_ranks)
    return fail(DFSEL_INVALID_ARGUMENT, "shard.rank = %d is outside [0, %d)", s.rank, s.n_ranks);
  if (s.v_begin < 0 || s.v_end > n_vocab || s.v_begin >= s.v_end)
    return fail(DFSEL_INVALID_ARGUMENT, "shard vocabulary range [%" PRId64 ", %" PRId64 ") is not a non-empty part of [0, %" PRId64 ")",
                s.v_begin, s.v_end, n_vocab);
  return Status::success();
}

}  // namespace dfsel
