#include "host/plan/validate.h"

#include <cinttypes>
#include <cmath>
#include <cstring>

#include "host/plan/widen_weights.h"
#include "kernels/common/digest.cuh"
#include "kernels/common/numeric.cuh"
#include "host/plan/plan_limits.h"
#include "kernels/common/limits.cuh"
#include "kernels/common/packed_row.cuh"
#include "kernels/common/row_map.cuh"
#include "kernels/common/selector_math.cuh"

namespace dfsel {

namespace {

// Everything a run of plan reads and writes, as dfsel.h counts it: the outputs (path and
// n_emitted required; q only when sampling), the inputs, the weights and a caller-owned
// workspace, which the run writes.
void list_run_buffers(const dfsel_plan& plan, const dfsel_inputs& in, const dfsel_outputs& out, RunBuffers* bufs) {
  const PlanShape& sh = plan.shape;
  const size_t nd = (size_t)in.n_blocks * sh.L, k = (size_t)sh.k;
  const size_t n_tokens = (size_t)in.n_blocks * sh.block_size;
  const size_t stride = packed_stride(out.packed_row_stride, sh.n_embd);
  bufs->add("outputs.cand_ids", out.cand_ids, nd * k * 4, 4, true);
  bufs->add("outputs.unary", out.unary, nd * k * 4, 4, true);
  bufs->add("outputs.scores", out.scores, nd * k * k * 4, 4, true);
  bufs->add("outputs.q", in.temperature > 0.0f ? out.q : nullptr, nd * k * 4, 4, true);
  bufs->add("outputs.path", out.path, nd * 4, 4, true, true);
  bufs->add("outputs.n_emitted", out.n_emitted, (size_t)in.n_blocks * 4, 4, true, true);
  bufs->add("outputs.packed", out.packed, out.packed ? (n_tokens - 1) * stride + (size_t)sh.n_embd * 4 : 0, 4, true);
  bufs->add_tensor("inputs.logits", in.logits);
  bufs->add_tensor("inputs.hidden", in.hidden);
  bufs->add("inputs.anchors", in.anchors, (size_t)in.n_blocks * 4, 4, false, true);
  list_plan_buffers(plan.desc, bufs);
}

}  // namespace

void list_plan_buffers(const dfsel_plan_desc& d, RunBuffers* bufs) {
  bufs->add_tensor("e_prev", d.e_prev);
  bufs->add_tensor("e_next", d.e_next);
  bufs->add_tensor("w_h", d.w_h);
  bufs->add("workspace", d.workspace, d.workspace ? d.workspace_bytes : 0, 1, true);
}

Status validate_desc(const dfsel_plan_desc* desc, PlanShape* shape) {
  if (!desc) return fail(DFSEL_INVALID_ARGUMENT, "desc is NULL");
  const dfsel_config& c = desc->config;
  const dfsel_shard& s = desc->shard;
  DFSEL_TRY(check_shared_config(c));
  if (c.n_embd <= 0 || c.n_embd > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_embd = %" PRId64 " must be in [1, 2^31)", c.n_embd);
  if (c.codebook_rank <= 0 || c.codebook_rank > kMaxCodebookRank)
    return fail(DFSEL_INVALID_ARGUMENT, "config.codebook_rank = %d must be in [1, %d]", c.codebook_rank, kMaxCodebookRank);
  if (c.top_k < 1 || c.top_k > kMaxTopK)
    return fail(DFSEL_INVALID_ARGUMENT, "config.top_k = %d must be in [1, %d]", c.top_k, kMaxTopK);
  if (c.block_size < 2 || c.block_size > kMaxBlockSize)
    return fail(DFSEL_INVALID_ARGUMENT, "config.block_size = %d must be in [2, %d]", c.block_size, kMaxBlockSize);
  // Drafted rows are counted in 32 bits (exchange layout, kernels' grids).
  if ((int64_t)c.max_blocks * (c.block_size - 1) > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.max_blocks = %d times block_size - 1 = %d drafted rows exceeds 2^31 - 1",
                c.max_blocks, c.block_size - 1);
  DFSEL_TRY(check_shard(s, c.n_vocab));
  if (c.top_k > s.v_end - s.v_begin)
    return fail(DFSEL_INVALID_ARGUMENT, "config.top_k = %d is larger than the shard's %" PRId64 " tokens [%" PRId64 ", %" PRId64 ")",
                c.top_k, s.v_end - s.v_begin, s.v_begin, s.v_end);
  DFSEL_TRY(check_shared_desc(*desc));
  const bool sharded = desc->placement == DFSEL_CODEBOOKS_SHARDED;
  const int64_t cb_rows = sharded ? s.v_end - s.v_begin : c.n_vocab;
  DFSEL_TRY(check_matrix("e_prev", desc->e_prev, true, c.codebook_rank, cb_rows, true));
  DFSEL_TRY(check_matrix("e_next", desc->e_next, true, c.codebook_rank, cb_rows, true));
  DFSEL_TRY(check_matrix("w_h", desc->w_h, true, c.n_embd, c.codebook_rank, true));
  if (desc->e_prev.type != desc->e_next.type)
    return fail(DFSEL_UNSUPPORTED, "e_prev.type = %s and e_next.type = %s differ; both codebooks must share a type",
                dfsel_type_name(desc->e_prev.type), dfsel_type_name(desc->e_next.type));
  if (desc->e_prev.nb[1] != desc->e_next.nb[1])
    return fail(DFSEL_INVALID_ARGUMENT, "e_prev.nb[1] = %zu and e_next.nb[1] = %zu differ; the plan reads a token's rows "
                "of both codebooks with one row stride, so e_next's rows must be as far apart as e_prev's",
                desc->e_prev.nb[1], desc->e_next.nb[1]);
  RunBuffers bufs;
  list_plan_buffers(*desc, &bufs);
  DFSEL_TRY(check_run_buffers(bufs));
  if (shape) {
    shape->k = c.top_k;
    shape->R = c.codebook_rank;
    shape->block_size = c.block_size;
    shape->L = c.block_size - 1;
    shape->n_vocab = c.n_vocab;
    shape->n_embd = c.n_embd;
    shape->v_begin = s.v_begin;
    shape->v_end = s.v_end;
    shape->cb_row_bytes = row_bytes(widened_type(desc->e_prev.type), c.codebook_rank);
    shape->sharded = sharded;
    shape->n_ranks = s.n_ranks;
    shape->transform = make_transform(c.logit_scale, c.softcap);
  }
  return Status::success();
}

Status validate_run(const dfsel_plan& plan, const dfsel_inputs& in, const dfsel_outputs& out) {
  const PlanShape& sh = plan.shape;
  DFSEL_TRY(check_run_values(in, plan.desc.config.max_blocks));
  const int64_t n_tokens = (int64_t)in.n_blocks * sh.block_size;
  DFSEL_TRY(check_matrix("inputs.logits", in.logits, false, sh.v_end - sh.v_begin, n_tokens, false));
  DFSEL_TRY(check_matrix("inputs.hidden", in.hidden, false, sh.n_embd, n_tokens, false));
  if (out.packed) {
    if (sh.n_embd < (int64_t)sh.k + (int64_t)sh.k * sh.k)
      return fail(DFSEL_INVALID_ARGUMENT, "outputs.packed needs n_embd >= K + K*K = %d, config.n_embd = %" PRId64,
                  sh.k + sh.k * sh.k, sh.n_embd);
    const size_t stride = packed_stride(out.packed_row_stride, sh.n_embd);
    if (stride < (size_t)sh.n_embd * 4 || stride % 4 != 0)
      return fail(DFSEL_INVALID_ARGUMENT, "outputs.packed_row_stride = %zu must be a multiple of 4 and at least n_embd * 4 = %zu",
                  out.packed_row_stride, (size_t)sh.n_embd * 4);
    // The rows the run writes, by the rule of tensor strides: a stride that wraps (rows in
    // reverse order, SIZE_MAX - 3) would write before outputs.packed.
    DFSEL_TRY(check_rows_extent("outputs.packed", "", out.packed, n_tokens, "n_blocks * block_size", stride,
                                "outputs.packed_row_stride", (size_t)sh.n_embd * 4));
  }
  RunBuffers bufs;
  list_run_buffers(plan, in, out, &bufs);
  return check_run_buffers(bufs);
}

Status validate_group_aliasing(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                               RunBuffers* scratch) {
  return check_group_call_buffers(
      n, scratch, [&](int i, RunBuffers* bufs) { list_run_buffers(*plans[i], in[i], out[i], bufs); });
}

namespace {

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

const char* const kSameInputs =
    "; the ranks of an in-process group must be given the same anchors, hidden rows, temperature, p_min and seed "
    "(each rank its own slice of the logits)";

}  // namespace

uint64_t weight_digest(const dfsel_tensor& t) {
  return matrix_digest(static_cast<const uint8_t*>(t.data), row_bytes(t.type, t.ne[0]), t.ne[1], t.nb[1]);
}

Status validate_group_weights(int n, const dfsel_plan* const* plans) {
  for (int i = 1; i < n; ++i)
    if (plans[i]->w_h_digest != plans[0]->w_h_digest)
      return fail(DFSEL_INVALID_ARGUMENT,
                  "plans[%d]'s w_h holds other values than plans[0]'s (a digest of its bytes taken at plan creation); "
                  "every rank of a group must hold the same W_h",
                  i);
  return Status::success();
}

Status validate_group_inputs(int n, const dfsel_plan* const* plans, const dfsel_inputs* in) {
  const PlanShape& sh = plans[0]->shape;
  const dfsel_inputs& a = in[0];
  const RowMap rows = drafted_rows(sh.block_size);
  const int64_t n_drafted = (int64_t)a.n_blocks * sh.L;
  const size_t hidden_row = row_bytes(a.hidden.type, sh.n_embd);
  for (int i = 1; i < n; ++i) {
    const dfsel_inputs& b = in[i];
    // Scalars bit for bit, as the group rule compares logit_scale: -0 and 0 are not the same input.
    if (float_bits(b.temperature) != float_bits(a.temperature))
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].temperature = %.9g differs from inputs[0].temperature = %.9g%s", i,
                  b.temperature, a.temperature, kSameInputs);
    if (float_bits(b.p_min) != float_bits(a.p_min))
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].p_min = %.9g differs from inputs[0].p_min = %.9g%s", i, b.p_min,
                  a.p_min, kSameInputs);
    if (b.seed != a.seed)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].seed = %" PRIu64 " differs from inputs[0].seed = %" PRIu64 "%s", i,
                  b.seed, a.seed, kSameInputs);
    if (b.anchors != a.anchors)
      for (int32_t k = 0; k < a.n_blocks; ++k)
        if (b.anchors[k] != a.anchors[k])
          return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].anchors[%d] = %d differs from inputs[0].anchors[%d] = %d%s", i,
                      k, b.anchors[k], k, a.anchors[k], kSameInputs);
    if (b.hidden.type != a.hidden.type)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].hidden.type = %s differs from inputs[0].hidden.type = %s%s", i,
                  dfsel_type_name(b.hidden.type), dfsel_type_name(a.hidden.type), kSameInputs);
    if (b.hidden.data == a.hidden.data && b.hidden.nb[1] == a.hidden.nb[1]) continue;
    // Only the rows a run reads (not the anchor position's, SPEC section 1).
    for (int64_t d = 0; d < n_drafted; ++d) {
      const int64_t t = map_row(rows, d);
      const uint8_t* row0 = static_cast<const uint8_t*>(a.hidden.data) + (size_t)t * a.hidden.nb[1];
      const uint8_t* rowi = static_cast<const uint8_t*>(b.hidden.data) + (size_t)t * b.hidden.nb[1];
      if (std::memcmp(row0, rowi, hidden_row) != 0)
        return fail(DFSEL_INVALID_ARGUMENT,
                    "inputs[%d].hidden row %" PRId64 " (block %" PRId64 ", position %" PRId64
                    ") differs from inputs[0].hidden row %" PRId64 "%s",
                    i, t, t / sh.block_size, t % sh.block_size, t, kSameInputs);
    }
  }
  return Status::success();
}

}  // namespace dfsel
