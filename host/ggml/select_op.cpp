// The selector as a node of a ggml graph on ggml's CPU backend (include/dfsel/ggml.h): one
// single-threaded plan per ggml thread it uses, each running a contiguous share of the
// blocks, so the node runs on the threads ggml gives it and no thread waits on another.
#include <ggml.h>

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstring>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dfsel/ggml.h"
#include "host/ggml/tensor_view.h"
#include "host/status.h"

using dfsel::Status;
using dfsel::fail;

struct dfsel_ggml_op {
  dfsel_plan_desc desc{};           // as the plans got it: CPU, one thread, block types widened
  std::vector<std::vector<uint16_t>> widened;  // BF16 copies of block-type weights, shared by the plans
  std::vector<dfsel_plan*> plans;   // plan i runs on ggml's thread ith = i
  std::vector<std::vector<int32_t>> path, n_emitted;  // each plan's walk (not part of the node's output)
  std::mutex mu;                    // guards the two below, written only on a failure
  dfsel_status pending = DFSEL_SUCCESS;
  std::string last_error;

  ~dfsel_ggml_op() {
    for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
  }
  // Keeps the first failure since the last check: several threads of one node may fail.
  void record(const Status& s) {
    std::lock_guard<std::mutex> lock(mu);
    if (pending != DFSEL_SUCCESS) return;
    pending = s.code;
    last_error = s.msg;
  }
};

namespace {

void copy_msg(const Status& s, char* msg, size_t len) {
  if (msg && len) std::snprintf(msg, len, "%s", s.msg.c_str());
}

// A weight of a block type other than Q8_0 (the types a plan widens) widened to BF16 once for
// every plan, by ggml's own decoder and round-to-nearest-even conversion: bit for bit what
// each plan would widen it to itself (tests/ggml: dfsel's decoders are ggml's to_float, its
// rounding ggml's), at 1/P the memory.
// The op uses dfsel's public API only, so it links against a shared libdfsel too.
void widen_block_type(dfsel_tensor* t, std::vector<std::vector<uint16_t>>* keep) {
  if (ggml_blck_size((ggml_type)t->type) == 1 || t->type == DFSEL_TYPE_Q8_0) return;
  const int64_t cols = t->ne[0], rows = t->ne[1];
  std::vector<uint16_t>& out = keep->emplace_back((size_t)(rows * cols));
  std::vector<float> row((size_t)cols);
  const ggml_type_traits* traits = ggml_get_type_traits((ggml_type)t->type);
  for (int64_t r = 0; r < rows; ++r) {
    traits->to_float(static_cast<const uint8_t*>(t->data) + (size_t)r * t->nb[1], row.data(), cols);
    ggml_fp32_to_bf16_row_ref(row.data(), reinterpret_cast<ggml_bf16_t*>(&out[(size_t)(r * cols)]), cols);
  }
  t->data = out.data();
  t->type = DFSEL_TYPE_BF16;
  t->nb[0] = 2;
  t->nb[1] = (size_t)cols * 2;
  t->nb[2] = t->nb[3] = t->nb[1] * (size_t)rows;
}

Status create(const dfsel_plan_desc* in, dfsel_ggml_op* op) {
  if (!in) return fail(DFSEL_INVALID_ARGUMENT, "desc is NULL");
  if (in->backend == DFSEL_BACKEND_CUDA) {
    return fail(DFSEL_UNSUPPORTED,
                "desc.backend = CUDA: the graph node runs on ggml's CPU backend; with ggml-cuda, call "
                "dfsel_plan_run or dfsel_run_group on the device tensors (docs/ggml.md)");
  }
  if (in->shard.n_ranks != 1) {
    return fail(DFSEL_UNSUPPORTED, "desc.shard.n_ranks = %d: a CPU graph node holds the whole vocabulary (1 shard)",
                in->shard.n_ranks);
  }
  if (in->workspace) {
    return fail(DFSEL_INVALID_ARGUMENT, "desc.workspace is set: the op gives each of its plans its own workspace");
  }
  if (in->n_threads < 0) return fail(DFSEL_INVALID_ARGUMENT, "desc.n_threads = %d is negative", in->n_threads);
  dfsel_plan_desc d = *in;
  d.backend = DFSEL_BACKEND_CPU;
  d.n_threads = 1;  // the worker is the ggml thread that runs the plan
  size_t bytes = 0;
  char msg[512] = "";
  const dfsel_status vs = dfsel_workspace_size(&d, &bytes, msg, sizeof msg);  // validates d
  if (vs != DFSEL_SUCCESS) return Status{vs, msg};
  for (dfsel_tensor* w : {&d.e_prev, &d.e_next, &d.w_h}) widen_block_type(w, &op->widened);
  int64_t n = in->n_threads > 0 ? in->n_threads : (int64_t)std::max(1u, std::thread::hardware_concurrency());
  n = std::min<int64_t>(n, d.config.max_blocks);  // a thread without a block has nothing to do
  const size_t L = (size_t)d.config.block_size - 1;
  for (int64_t i = 0; i < n; ++i) {
    dfsel_plan* p = nullptr;
    const dfsel_status cs = dfsel_plan_create(&d, &p, msg, sizeof msg);
    if (cs != DFSEL_SUCCESS) return Status{cs, msg};
    op->plans.push_back(p);
    op->path.emplace_back((size_t)d.config.max_blocks * L);
    op->n_emitted.emplace_back((size_t)d.config.max_blocks);
  }
  op->desc = d;
  return Status::success();
}

bool reads_float(ggml_type t) { return t == GGML_TYPE_F32 || t == GGML_TYPE_F16 || t == GGML_TYPE_BF16; }

// logits or hidden: a float tensor of width `width` and n_tokens rows.
Status check_input(const ggml_tensor* t, const char* role, int64_t width, const char* width_name) {
  if (!t) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", role);
  DFSEL_TRY(dfsel::ggml::check_layout(t));
  const std::string nm = dfsel::ggml::display_name(t);
  if (!reads_float(t->type)) {
    return fail(DFSEL_UNSUPPORTED, "%s tensor %s: type %s; the selector reads f32, f16 or bf16 %s", role,
                nm.c_str(), ggml_type_name(t->type), role);
  }
  if (t->ne[0] != width) {
    return fail(DFSEL_INVALID_ARGUMENT, "%s tensor %s: ne[0] = %" PRId64 ", the plan's %s is %" PRId64, role,
                nm.c_str(), t->ne[0], width_name, width);
  }
  // Where its address is known already, a misaligned view is refused now, not at compute.
  return dfsel::ggml::check_alignment(t, dfsel::ggml::element_alignment(t));
}

Status check_select(const dfsel_ggml_op* op, const ggml_tensor* logits, const ggml_tensor* hidden,
                    const ggml_tensor* anchors) {
  const dfsel_config& c = op->desc.config;
  DFSEL_TRY(check_input(logits, "logits", c.n_vocab, "vocabulary"));
  DFSEL_TRY(check_input(hidden, "hidden", c.n_embd, "n_embd"));
  const std::string ln = dfsel::ggml::display_name(logits), hn = dfsel::ggml::display_name(hidden);
  const int64_t n_tokens = logits->ne[1];
  if (n_tokens % c.block_size != 0 || n_tokens / c.block_size > c.max_blocks) {
    return fail(DFSEL_INVALID_ARGUMENT,
                "logits tensor %s: ne[1] = %" PRId64 " tokens is not 1 to max_blocks = %d blocks of %d", ln.c_str(),
                n_tokens, c.max_blocks, c.block_size);
  }
  if (hidden->ne[1] != n_tokens) {
    return fail(DFSEL_INVALID_ARGUMENT, "hidden tensor %s: ne[1] = %" PRId64 ", logits %s has %" PRId64 " tokens",
                hn.c_str(), hidden->ne[1], ln.c_str(), n_tokens);
  }
  if (!anchors) return fail(DFSEL_INVALID_ARGUMENT, "anchors is NULL");
  const std::string an = dfsel::ggml::display_name(anchors);
  const int64_t n_blocks = n_tokens / c.block_size;
  if (anchors->type != GGML_TYPE_I32) {
    return fail(DFSEL_UNSUPPORTED, "anchors tensor %s: type %s, expected i32", an.c_str(),
                ggml_type_name(anchors->type));
  }
  if (anchors->ne[0] != n_blocks || anchors->ne[1] != 1 || anchors->ne[2] != 1 || anchors->ne[3] != 1 ||
      anchors->nb[0] != sizeof(int32_t)) {
    return fail(DFSEL_INVALID_ARGUMENT,
                "anchors tensor %s: {%" PRId64 ", %" PRId64 ", %" PRId64 ", %" PRId64 "} with nb[0] = %zu, expected "
                "contiguous {%" PRId64 "} (one per block of logits %s)",
                an.c_str(), anchors->ne[0], anchors->ne[1], anchors->ne[2], anchors->ne[3], anchors->nb[0], n_blocks,
                ln.c_str());
  }
  return dfsel::ggml::check_alignment(anchors, sizeof(int32_t));
}

// Tensor t's view restricted to token rows [r0, r0 + n).
dfsel_tensor rows_of(dfsel_tensor v, int64_t r0, int64_t n) {
  v.data = static_cast<const uint8_t*>(v.data) + (size_t)r0 * v.nb[1];
  v.ne[1] = n;
  return v;
}

Status run_share(dfsel_ggml_op* op, ggml_tensor* dst, int ith, int64_t b0, int64_t b1) {
  const ggml_tensor* anchors = dst->src[2];
  const int64_t block = op->desc.config.block_size;
  dfsel_tensor lv, hv;
  DFSEL_TRY(dfsel::ggml::to_view(dst->src[0], &lv));
  DFSEL_TRY(dfsel::ggml::to_view(dst->src[1], &hv));
  if (!anchors->data || !dst->data) {
    return fail(DFSEL_INVALID_ARGUMENT, "tensor %s has no data (not allocated)",
                dfsel::ggml::display_name(anchors->data ? dst : anchors).c_str());
  }
  DFSEL_TRY(dfsel::ggml::check_alignment(anchors, sizeof(int32_t)));
  // Checked here, by the index the engine wrote: the plan sees this thread's blocks alone, and
  // would name anchor b0 + i as its own anchors[i].
  const int32_t* ids = static_cast<const int32_t*>(anchors->data);
  for (int64_t b = b0; b < b1; ++b) {
    if (ids[b] < 0 || ids[b] >= op->desc.config.n_vocab) {
      return fail(DFSEL_INVALID_ARGUMENT, "anchors tensor %s: anchors[%" PRId64 "] = %d is outside [0, %" PRId64 ")",
                  dfsel::ggml::display_name(anchors).c_str(), b, ids[b], op->desc.config.n_vocab);
    }
  }
  dfsel_inputs in{};
  in.logits = rows_of(lv, b0 * block, (b1 - b0) * block);
  in.hidden = rows_of(hv, b0 * block, (b1 - b0) * block);
  in.anchors = ids + b0;
  in.n_blocks = (int32_t)(b1 - b0);
  dfsel_outputs out{};
  out.packed = reinterpret_cast<float*>(static_cast<uint8_t*>(dst->data) + (size_t)(b0 * block) * dst->nb[1]);
  out.packed_row_stride = dst->nb[1];
  out.path = op->path[(size_t)ith].data();
  out.n_emitted = op->n_emitted[(size_t)ith].data();
  dfsel_plan* plan = op->plans[(size_t)ith];
  const dfsel_status s = dfsel_plan_run(plan, &in, &out, nullptr);
  if (s != DFSEL_SUCCESS) return Status{s, dfsel_plan_last_error(plan)};
  return Status::success();
}

// ggml's custom-op callback, called by each of nth threads with its index ith. The node's
// n_tasks may not bound nth (ggml's CPU backend calls every node on every graph thread), so
// the first min(nth, plans) threads share the blocks and the others return at once.
void run_node(ggml_tensor* dst, int ith, int nth, void* userdata) {
  dfsel_ggml_op* op = static_cast<dfsel_ggml_op*>(userdata);
  const int64_t workers = std::min<int64_t>(nth, (int64_t)op->plans.size());
  if (ith >= workers) return;
  const int64_t n_blocks = dst->ne[1] / op->desc.config.block_size;
  const int64_t b0 = n_blocks * ith / workers, b1 = n_blocks * (ith + 1) / workers;
  if (b0 == b1) return;
  Status s;
  try {
    s = run_share(op, dst, ith, b0, b1);
  } catch (...) {
    s = fail(DFSEL_INTERNAL_ERROR, "unexpected exception in the selector node");
  }
  if (s.ok()) return;
  s.msg = "node " + dfsel::ggml::display_name(dst) + " (logits " + dfsel::ggml::display_name(dst->src[0]) +
          "): " + s.msg;
  op->record(s);
  if (!dst->data) return;
  const int64_t block = op->desc.config.block_size;
  for (int64_t r = b0 * block; r < b1 * block; ++r) {  // no silent answer: this share's rows are NaN
    float* row = reinterpret_cast<float*>(static_cast<uint8_t*>(dst->data) + (size_t)r * dst->nb[1]);
    std::fill(row, row + dst->ne[0], NAN);
  }
}

}  // namespace

extern "C" {

dfsel_status dfsel_ggml_op_create(const dfsel_plan_desc* desc, dfsel_ggml_op** op, char* msg, size_t msg_len) {
  Status s;
  if (!op) {
    s = fail(DFSEL_INVALID_ARGUMENT, "op (the output pointer) is NULL");
  } else {
    *op = nullptr;
    dfsel_ggml_op* o = nullptr;
    try {
      o = new dfsel_ggml_op;
      s = create(desc, o);
    } catch (const std::bad_alloc&) {
      s = fail(DFSEL_OUT_OF_MEMORY, "allocation failed while creating the ggml op");
    }
    if (s.ok()) *op = o;
    else delete o;
  }
  copy_msg(s, msg, msg_len);
  return s.code;
}

dfsel_status dfsel_ggml_op_destroy(dfsel_ggml_op* op) {
  delete op;
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_ggml_select(ggml_context* ctx, dfsel_ggml_op* op, ggml_tensor* logits, ggml_tensor* hidden,
                               ggml_tensor* anchors, ggml_tensor** out) {
  if (!op) return DFSEL_INVALID_ARGUMENT;
  if (out) *out = nullptr;
  Status s;
  if (!ctx) s = fail(DFSEL_INVALID_ARGUMENT, "ctx is NULL");
  else if (!out) s = fail(DFSEL_INVALID_ARGUMENT, "out (the output pointer) is NULL");
  else s = check_select(op, logits, hidden, anchors);
  if (!s.ok()) {
    std::lock_guard<std::mutex> lock(op->mu);
    op->last_error = s.msg;  // a refused call returns its status; dfsel_ggml_op_check is for nodes
    return s.code;
  }
  ggml_tensor* args[3] = {logits, hidden, anchors};
  ggml_tensor* dst = ggml_custom_4d(ctx, GGML_TYPE_F32, op->desc.config.n_embd, logits->ne[1], 1, 1, args, 3,
                                    run_node, (int)op->plans.size(), op);
  ggml_set_name(dst, "dfsel_select");
  *out = dst;
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_ggml_op_check(dfsel_ggml_op* op) {
  if (!op) return DFSEL_INVALID_ARGUMENT;
  std::lock_guard<std::mutex> lock(op->mu);
  const dfsel_status s = op->pending;
  op->pending = DFSEL_SUCCESS;
  return s;
}

const char* dfsel_ggml_op_last_error(const dfsel_ggml_op* op) { return op ? op->last_error.c_str() : "op is NULL"; }

}  // extern "C"
