// The checks every plan kind applies to what it is given (dfsel.h, dspark.h), written once: a
// ggml-style matrix of an accepted type and shape, a shard of a vocabulary, the fields the
// descriptions of both kinds have (vocabulary, transform, max_blocks, backend, placement,
// threads, workspace) and the values of a run (n_blocks, temperature, p_min). Each failure
// names the argument and its value. Pointers (present, aligned, not shared with what a run
// writes) are the rules of host/plan/run_buffers.h.
#pragma once

#include <stdint.h>

#include <cinttypes>
#include <cmath>
#include <cstring>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel {

// The enums of a description come from C, where any int may be stored in them, but C++ may not
// load an enum outside its enumerators' range. Checks read the stored int, so that a value is
// known to be an enumerator before anything reads it as the enum.
template <typename E>
int enum_value(const E& e) {
  static_assert(sizeof(E) == sizeof(int), "the C enums are int-sized");
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// The most bytes one tensor may span, (ne[1] - 1) * nb[1] plus a row: 128 TiB, the user
// address space of x86-64 and AArch64 with 48-bit virtual addresses (and far more memory than
// any one machine dfsel runs on has). Anything larger is a stride or count that is not real.
constexpr size_t kMaxTensorSpan = (size_t)1 << 47;

// The rule of every extent a call derives from a count and a stride (dfsel.h): `rows` rows of
// row_bytes, stride bytes apart from data, span at most kMaxTensorSpan and end inside the
// address space. A stride that wraps the product (SIZE_MAX - 3, or (size_t)-row for rows in
// reverse order) is refused here instead of shrinking the range the overlap checks compare.
// Messages name the buffer (name; its pointer is name + data_suffix, "e_prev" ".data"), the
// count (rows_name) and the stride's field (stride_name): "outputs.packed spans more than 2^47
// bytes ...: n_blocks * block_size = 20 rows of outputs.packed_row_stride = ... bytes".
Status check_rows_extent(const char* name, const char* data_suffix, const void* data, int64_t rows,
                         const char* rows_name, size_t stride, const char* stride_name, size_t row_bytes);
// The same rule for one extent of `bytes` given whole, the field bytes_name (workspace_bytes).
Status check_bytes_extent(const char* name, const void* data, size_t bytes, const char* bytes_name);

// A 2-D ggml tensor {ne0, ne1} (or {ne0, >= ne1} unless exact_ne1) of an accepted type
// (weight: kWeightTypeList of numeric.cuh; else F32, F16, BF16) with contiguous rows, data
// not NULL, its span at most kMaxTensorSpan and data + span inside the address space.
Status check_matrix(const char* name, const dfsel_tensor& t, bool weight, int64_t ne0, int64_t ne1_min,
                    bool exact_ne1);

// shard.rank of shard.n_ranks owns a non-empty part [v_begin, v_end) of [0, n_vocab).
Status check_shard(const dfsel_shard& s, int64_t n_vocab);

// What a config of either kind (dfsel_config, dfsel_dspark_config) says alike: n_vocab in
// [1, 2^31), the transform's logit_scale (0 means 1) and softcap, max_blocks at least 1.
template <class Config>
Status check_shared_config(const Config& c) {
  if (c.n_vocab <= 0 || c.n_vocab > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_vocab = %" PRId64 " must be in [1, 2^31)", c.n_vocab);
  if (!(c.logit_scale >= 0.0f) || !std::isfinite(c.logit_scale))
    return fail(DFSEL_INVALID_ARGUMENT, "config.logit_scale = %g must be finite and > 0 (0 means 1)", c.logit_scale);
  if (!std::isfinite(c.softcap)) return fail(DFSEL_INVALID_ARGUMENT, "config.softcap = %g must be finite", c.softcap);
  if (c.max_blocks < 1) return fail(DFSEL_INVALID_ARGUMENT, "config.max_blocks = %d must be at least 1", c.max_blocks);
  return Status::success();
}

// What a description of either kind says alike: backend and placement are enumerators,
// n_threads is not negative, and a caller-owned workspace has a size that memory can hold.
template <class Desc>
Status check_shared_desc(const Desc& d) {
  const int backend = enum_value(d.backend), placement = enum_value(d.placement);
  if (backend != DFSEL_BACKEND_AUTO && backend != DFSEL_BACKEND_CPU && backend != DFSEL_BACKEND_CUDA)
    return fail(DFSEL_INVALID_ARGUMENT, "backend = %d is not a dfsel_backend", backend);
  if (placement != DFSEL_CODEBOOKS_REPLICATED && placement != DFSEL_CODEBOOKS_SHARDED)
    return fail(DFSEL_INVALID_ARGUMENT, "placement = %d is not a dfsel_placement", placement);
  if (d.n_threads < 0)
    return fail(DFSEL_INVALID_ARGUMENT, "n_threads = %d must be 0 (every core) or a thread count", d.n_threads);
  if (d.workspace && d.workspace_bytes == 0)
    return fail(DFSEL_INVALID_ARGUMENT, "workspace is given with workspace_bytes = 0");
  if (d.workspace) DFSEL_TRY(check_bytes_extent("workspace", d.workspace, d.workspace_bytes, "workspace_bytes"));
  return Status::success();
}

// A communicator needs the backend that runs NCCL: the CPU backend exchanges in process only.
inline Status check_exchange(const void* nccl_comm, dfsel_backend kind) {
  if (nccl_comm && kind != DFSEL_BACKEND_CUDA)
    return fail(DFSEL_UNSUPPORTED, "nccl_comm is set but the CPU backend exchanges in process only; NCCL runs on the "
                "CUDA backend");
  return Status::success();
}

// The values of a run of either kind: n_blocks in [1, max_blocks], temperature finite, p_min
// in [0, 1].
template <class Inputs>
Status check_run_values(const Inputs& in, int32_t max_blocks) {
  if (in.n_blocks < 1 || in.n_blocks > max_blocks)
    return fail(DFSEL_INVALID_ARGUMENT, "inputs.n_blocks = %d must be in [1, config.max_blocks = %d]", in.n_blocks,
                max_blocks);
  if (!std::isfinite(in.temperature))
    return fail(DFSEL_INVALID_ARGUMENT, "inputs.temperature = %g must be finite", in.temperature);
  if (!(in.p_min >= 0.0f && in.p_min <= 1.0f))
    return fail(DFSEL_INVALID_ARGUMENT, "inputs.p_min = %g must be in [0, 1]", in.p_min);
  return Status::success();
}

}  // namespace dfsel
