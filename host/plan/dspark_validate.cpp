// Argument checks of DSpark plans and runs (dspark.h): each failure names the argument and its
// value. What both plan kinds check alike is host/plan/plan_checks.h; the buffers a run
// touches are listed here and checked by the rules of every plan (host/plan/run_buffers.h):
// required ones present, each aligned, nothing written shared.
#include <cinttypes>
#include <cmath>
#include <vector>

#include "host/backend/device_memory.h"
#include "host/plan/dspark_plan.h"
#include "host/plan/plan_checks.h"
#include "host/plan/run_buffers.h"
#include "host/plan/validate.h"
#include "host/plan/widen_weights.h"
#include "kernels/common/dspark_math.cuh"
#include "kernels/common/limits.cuh"
#include "kernels/common/numeric.cuh"

namespace dfsel {

namespace {

Status check_config(const dfsel_dspark_config& c) {
  DFSEL_TRY(check_shared_config(c));
  if (c.n_target_vocab <= 0 || c.n_target_vocab > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_target_vocab = %" PRId64 " must be in [1, 2^31)", c.n_target_vocab);
  if (c.n_embd < 0 || c.n_embd > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_embd = %" PRId64 " must be in [0, 2^31) (0: no confidence head)", c.n_embd);
  if (c.markov_rank <= 0 || c.markov_rank > kMaxMarkovRank)
    return fail(DFSEL_INVALID_ARGUMENT, "config.markov_rank = %d must be in [1, %d]", c.markov_rank, kMaxMarkovRank);
  if (c.n_draft < 1 || c.n_draft > kMaxDraftSteps)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_draft = %d must be in [1, %d]", c.n_draft, kMaxDraftSteps);
  if (c.sample_from_anchor != 0 && c.sample_from_anchor != 1)
    return fail(DFSEL_INVALID_ARGUMENT, "config.sample_from_anchor = %d must be 0 or 1", c.sample_from_anchor);
  const int64_t rows = dspark_rows_per_block(c.n_draft, c.sample_from_anchor != 0);
  if ((int64_t)c.max_blocks * rows > INT32_MAX)
    return fail(DFSEL_INVALID_ARGUMENT, "config.max_blocks = %d times %" PRId64 " rows a block exceeds 2^31 - 1",
                c.max_blocks, rows);
  return Status::success();
}

// The optional weights: markov_w2.scale and the confidence head (d2t: check_d2t).
Status check_optional(const dfsel_dspark_plan_desc& d, int64_t shard_rows) {
  const dfsel_dspark_config& c = d.config;
  if (d.w2_scale.data) {
    if (enum_value(d.w2_scale.type) != DFSEL_TYPE_F32)
      return fail(DFSEL_UNSUPPORTED, "w2_scale.type = %d must be F32 (%d)", enum_value(d.w2_scale.type), DFSEL_TYPE_F32);
    if (d.w2_scale.ne[0] != 1 && d.w2_scale.ne[0] != shard_rows)
      return fail(DFSEL_INVALID_ARGUMENT, "w2_scale.ne[0] = %" PRId64 " must be 1 (one scale) or %" PRId64
                  " (one per row of w2)", d.w2_scale.ne[0], shard_rows);
    DFSEL_TRY(check_matrix("w2_scale", d.w2_scale, false, d.w2_scale.ne[0], 1, true));
  }
  if (d.conf_w.data) {
    if (c.n_embd == 0)
      return fail(DFSEL_INVALID_ARGUMENT, "conf_w is given but config.n_embd = 0; n_embd is the width of the hidden rows it reads");
    DFSEL_TRY(check_matrix("conf_w", d.conf_w, true, c.n_embd + c.markov_rank, 1, true));
  } else if (c.n_embd != 0) {
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_embd = %" PRId64 " but conf_w is NULL; n_embd is the confidence head's "
                "width, 0 without one", c.n_embd);
  }
  if (!std::isfinite(d.conf_bias)) return fail(DFSEL_INVALID_ARGUMENT, "conf_bias = %g must be finite", d.conf_bias);
  return Status::success();
}

// d2t's target ids, read once the buffer checks have found it present and aligned.
// Every target id of d2t (ids, the shard's) in [0, n_target_vocab).
Status check_d2t(const dfsel_dspark_plan_desc& d, const int32_t* ids) {
  const int64_t shard_rows = d.shard.v_end - d.shard.v_begin;
  for (int64_t i = 0; i < shard_rows; ++i)
    if (ids[i] < 0 || ids[i] >= d.config.n_target_vocab)
      return fail(DFSEL_INVALID_ARGUMENT, "d2t[%" PRId64 "] = %d (draft id %" PRId64 ") is outside [0, config.n_target_vocab = %"
                  PRId64 ")", i, ids[i], d.shard.v_begin + i, d.config.n_target_vocab);
  return Status::success();
}

// The n values of t's first row finite: read in place (host memory) or copied from the device.
Status check_finite_row(const char* name, const dfsel_tensor& t, int64_t n, bool on_device, int32_t device) {
  const size_t bytes = row_bytes(t.type, n);
  std::vector<uint8_t> copy;
  const void* row = t.data;
  if (on_device) {
    copy.resize(bytes);
    DFSEL_TRY(device_rows_to_host(t.data, bytes, bytes, 1, device, copy.data(), "reading the scalars of w2_scale and "
                                  "conf_w from the device"));
    row = copy.data();
  }
  for (int64_t i = 0; i < n; ++i) {
    const float v = load_elem(row, t.type, i);
    if (!std::isfinite(v))
      return fail(DFSEL_INVALID_ARGUMENT, "%s[%" PRId64 "] = %g must be finite (it scales every logit of a step, or "
                  "decides every confidence)", name, i, v);
  }
  return Status::success();
}

void fill_shape(const dfsel_dspark_plan_desc& d, DSparkShape* sh) {
  const dfsel_dspark_config& c = d.config;
  sh->R = c.markov_rank;
  sh->N = c.n_draft;
  sh->sample_from_anchor = c.sample_from_anchor != 0;
  sh->rows = dspark_rows_per_block(c.n_draft, sh->sample_from_anchor);
  sh->sharded_w1 = d.placement == DFSEL_CODEBOOKS_SHARDED;
  sh->conf = d.conf_w.data != nullptr;
  sh->d2t = d.d2t != nullptr;
  sh->scale_rows = d.w2_scale.data ? (int32_t)d.w2_scale.ne[0] : 0;
  sh->n_vocab = c.n_vocab;
  sh->n_target_vocab = c.n_target_vocab;
  sh->n_embd = c.n_embd;
  sh->v_begin = d.shard.v_begin;
  sh->v_end = d.shard.v_end;
  sh->n_ranks = d.shard.n_ranks;
  sh->w1_row_bytes = row_bytes(widened_type(d.w1.type), c.markov_rank);
  sh->transform = make_transform(c.logit_scale, c.softcap);
  sh->row_map = dspark_rows(c.n_draft, sh->sample_from_anchor);
}

// Everything a run of plan reads and writes, as dspark.h counts it: the outputs (tokens and
// n_emitted required; probs and log_norm hold values only when sampling, and 0 otherwise), the
// inputs (hidden only with a confidence head), the weights and a caller-owned workspace, which
// the run writes.
void list_dspark_run_buffers(const dfsel_dspark_plan& plan, const dfsel_dspark_inputs& in,
                             const dfsel_dspark_outputs& out, RunBuffers* bufs) {
  const DSparkShape& sh = plan.shape;
  const size_t cells = (size_t)in.n_blocks * sh.N * 4;
  bufs->add("outputs.tokens", out.tokens, cells, 4, true, true);
  bufs->add("outputs.n_emitted", out.n_emitted, (size_t)in.n_blocks * 4, 4, true, true);
  bufs->add("outputs.draft_ids", out.draft_ids, cells, 4, true);
  bufs->add("outputs.logits", out.logits, cells, 4, true);
  // Given on a greedy run, probs and log_norm are written too: with 0.
  bufs->add("outputs.probs", out.probs, cells, 4, true);
  bufs->add("outputs.log_norm", out.log_norm, cells, 4, true);
  bufs->add("outputs.confidence", out.confidence, cells, 4, true);
  bufs->add_tensor("inputs.logits", in.logits);
  if (sh.conf) bufs->add_tensor("inputs.hidden", in.hidden);
  bufs->add("inputs.anchors", in.anchors, (size_t)in.n_blocks * 4, 4, false, true);
  list_dspark_plan_buffers(plan.desc, bufs);
}

// What a run checks of its outputs beyond the buffer rules: room for its blocks, and no
// confidence asked of a plan without a confidence head.
Status check_outputs(const DSparkShape& sh, const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out) {
  if (out.n_blocks < in.n_blocks)
    return fail(DFSEL_INVALID_ARGUMENT, "outputs.n_blocks = %d holds fewer blocks than inputs.n_blocks = %d", out.n_blocks,
                in.n_blocks);
  if (out.confidence && !sh.conf)
    return fail(DFSEL_INVALID_ARGUMENT, "outputs.confidence is set but the plan has no confidence head (conf_w)");
  return Status::success();
}

}  // namespace

void list_dspark_plan_buffers(const dfsel_dspark_plan_desc& d, RunBuffers* bufs) {
  bufs->add_tensor("w1", d.w1);
  bufs->add_tensor("w2", d.w2);
  if (d.w2_scale.data) bufs->add_tensor("w2_scale", d.w2_scale);
  if (d.conf_w.data) bufs->add_tensor("conf_w", d.conf_w);
  bufs->add_read("d2t", d.d2t, d.d2t ? (size_t)(d.shard.v_end - d.shard.v_begin) * 4 : 0, 4);
  bufs->add("workspace", d.workspace, d.workspace ? d.workspace_bytes : 0, 1, true);
}

Status validate_dspark_desc(const dfsel_dspark_plan_desc* desc, DSparkShape* shape) {
  if (!desc) return fail(DFSEL_INVALID_ARGUMENT, "desc is NULL");
  const dfsel_dspark_plan_desc& d = *desc;
  const dfsel_dspark_config& c = d.config;
  DFSEL_TRY(check_config(c));
  DFSEL_TRY(check_shard(d.shard, c.n_vocab));
  DFSEL_TRY(check_shared_desc(d));
  const bool sharded = d.placement == DFSEL_CODEBOOKS_SHARDED;
  if (sharded && d.d2t)
    return fail(DFSEL_INVALID_ARGUMENT, "placement = SHARDED needs the draft ids to be the target ids, but d2t is given; "
                "replicate W1 (placement = REPLICATED)");
  if (!d.d2t && c.n_target_vocab != c.n_vocab)
    return fail(DFSEL_INVALID_ARGUMENT, "config.n_target_vocab = %" PRId64 " differs from config.n_vocab = %" PRId64
                " but d2t is NULL; without a map the draft ids are the target ids", c.n_target_vocab, c.n_vocab);
  const int64_t shard_rows = d.shard.v_end - d.shard.v_begin;
  DFSEL_TRY(check_matrix("w1", d.w1, true, c.markov_rank, sharded ? shard_rows : c.n_target_vocab, true));
  DFSEL_TRY(check_matrix("w2", d.w2, true, c.markov_rank, shard_rows, true));
  DFSEL_TRY(check_optional(d, shard_rows));
  RunBuffers bufs;
  list_dspark_plan_buffers(d, &bufs);
  DFSEL_TRY(check_run_buffers(bufs));
  if (shape) fill_shape(d, shape);
  return Status::success();
}

Status check_dspark_d2t(const dfsel_dspark_plan_desc& desc, dfsel_backend kind) {
  if (!desc.d2t) return Status::success();
  if (kind != DFSEL_BACKEND_CUDA) return check_d2t(desc, desc.d2t);
  const size_t bytes = (size_t)(desc.shard.v_end - desc.shard.v_begin) * sizeof(int32_t);
  std::vector<int32_t> ids(bytes / sizeof(int32_t));
  DFSEL_TRY(device_rows_to_host(desc.d2t, bytes, bytes, 1, desc.device, ids.data(), "reading d2t from the device"));
  return check_d2t(desc, ids.data());
}

Status check_dspark_finite_weights(const dfsel_dspark_plan_desc& desc, dfsel_backend kind) {
  const bool on_device = kind == DFSEL_BACKEND_CUDA;
  if (desc.w2_scale.data)
    DFSEL_TRY(check_finite_row("w2_scale", desc.w2_scale, desc.w2_scale.ne[0], on_device, desc.device));
  if (desc.conf_w.data) DFSEL_TRY(check_finite_row("conf_w", desc.conf_w, desc.conf_w.ne[0], on_device, desc.device));
  return Status::success();
}

Status validate_dspark_run(const dfsel_dspark_plan& plan, const dfsel_dspark_inputs& in,
                           const dfsel_dspark_outputs& out) {
  const DSparkShape& sh = plan.shape;
  DFSEL_TRY(check_run_values(in, plan.desc.config.max_blocks));
  const int64_t n_rows = (int64_t)in.n_blocks * sh.rows;
  DFSEL_TRY(check_matrix("inputs.logits", in.logits, false, sh.v_end - sh.v_begin, n_rows, false));
  if (sh.conf) DFSEL_TRY(check_matrix("inputs.hidden", in.hidden, false, sh.n_embd, n_rows, false));
  if (in.p_min > 0.0f && !sh.conf)
    return fail(DFSEL_INVALID_ARGUMENT, "inputs.p_min = %g needs a confidence head, and the plan has none (conf_w)",
                in.p_min);
  DFSEL_TRY(check_outputs(sh, in, out));
  RunBuffers bufs;
  list_dspark_run_buffers(plan, in, out, &bufs);
  return check_run_buffers(bufs);
}

Status validate_dspark_group_aliasing(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                      const dfsel_dspark_outputs* out, RunBuffers* scratch) {
  return check_group_call_buffers(
      n, scratch, [&](int i, RunBuffers* bufs) { list_dspark_run_buffers(*plans[i], in[i], out[i], bufs); });
}

}  // namespace dfsel
