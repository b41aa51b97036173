// A step of dfsel plans on tensors ggml computed, between graph computes (include/dfsel/ggml.h):
// each ggml tensor becomes a dfsel view after its layout and its memory are checked, then one
// dfsel_run_group. The memory check is what an engine would otherwise write itself: ggml's
// buffer says host or not, and the plan says whether it can read the pointer (a GPU other than
// its own is refused there). Public API only, like the graph node.
#include <ggml-backend.h>
#include <ggml.h>

#include <cinttypes>
#include <cstdio>
#include <string>
#include <vector>

#include "dfsel/ggml.h"
#include "host/ggml/tensor_view.h"
#include "host/status.h"

using dfsel::Status;
using dfsel::fail;

namespace {

// Where t's bytes are, against what the plan reads: a host buffer is refused by a CUDA plan,
// a device buffer by a CPU plan, and the pointer itself is put to the plan (which GPU).
Status check_memory(dfsel_plan* plan, bool cuda, const ggml_tensor* t, const char* field) {
  const std::string name = dfsel::ggml::display_name(t);
  if (t->buffer) {
    const bool host = ggml_backend_buffer_is_host(t->buffer);
    if (cuda && host)
      return fail(DFSEL_INVALID_ARGUMENT,
                  "%s: tensor %s is in host memory (ggml buffer %s); a CUDA plan reads its GPU's memory: "
                  "compute it on the plan's ggml-cuda device",
                  field, name.c_str(), ggml_backend_buffer_name(t->buffer));
    if (!cuda && !host)
      return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s is in ggml buffer %s, not host memory; a CPU plan reads "
                  "host memory", field, name.c_str(), ggml_backend_buffer_name(t->buffer));
  }
  char msg[512];
  const std::string what = std::string(field) + ": tensor " + name + " (data)";
  const dfsel_status s = dfsel_plan_check_memory(plan, t->data, what.c_str(), msg, sizeof msg);
  if (s != DFSEL_SUCCESS) return fail(s, "%s", msg);
  return Status::success();
}

// An I32 tensor of ne0 x ne1 elements or more whose rows hold ne0 contiguous values.
Status check_i32(const ggml_tensor* t, const char* field, int64_t ne0, int64_t ne1, bool exact_ne0) {
  if (!t) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", field);
  const std::string name = dfsel::ggml::display_name(t);
  const char* nm = name.c_str();
  if (t->type != GGML_TYPE_I32)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s is %s, expected i32", field, nm, ggml_type_name(t->type));
  if (t->ne[2] != 1 || t->ne[3] != 1 || t->nb[0] != sizeof(int32_t))
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s must be 1-D or 2-D with contiguous rows (ne[2] = %" PRId64
                ", ne[3] = %" PRId64 ", nb[0] = %zu)", field, nm, t->ne[2], t->ne[3], t->nb[0]);
  if (exact_ne0 ? t->ne[0] != ne0 : t->ne[0] < ne0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s has ne[0] = %" PRId64 ", expected %s%" PRId64, field, nm,
                t->ne[0], exact_ne0 ? "" : "at least ", ne0);
  if (t->ne[1] < ne1)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s has ne[1] = %" PRId64 ", expected at least %" PRId64, field,
                nm, t->ne[1], ne1);
  if (ne1 > 1 && t->nb[1] != (size_t)t->ne[0] * sizeof(int32_t))
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s: rows are not contiguous (nb[1] = %zu)", field, nm, t->nb[1]);
  if (!t->data) return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s has no data (not allocated yet)", field, nm);
  if ((uintptr_t)t->data % sizeof(int32_t) != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s: data %p is not aligned to 4 bytes", field, nm, t->data);
  return Status::success();
}

// steps[i] as plans[i]'s inputs and outputs.
Status convert(dfsel_plan* plan, const dfsel_ggml_step& st, int i, dfsel_inputs* in, dfsel_outputs* out) {
  char field[64];
  dfsel_config cfg{};
  if (dfsel_plan_config(plan, &cfg) != DFSEL_SUCCESS)
    return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] is not a live dfsel plan", i);
  const bool cuda = dfsel_plan_backend(plan) == DFSEL_BACKEND_CUDA;
  auto name = [&](const char* f) {
    std::snprintf(field, sizeof field, "steps[%d].%s", i, f);
    return field;
  };
  if (!st.anchors) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", name("anchors"));
  const int64_t n_blocks = st.anchors->ne[0];
  if (n_blocks < 1 || n_blocks > cfg.max_blocks)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s has %" PRId64 " anchors; the plan takes 1 to %d blocks",
                name("anchors"), dfsel::ggml::display_name(st.anchors).c_str(), n_blocks, (int)cfg.max_blocks);
  DFSEL_TRY(check_i32(st.anchors, name("anchors"), n_blocks, 1, true));
  if (st.anchors->ne[1] != 1)
    return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s must be 1-D {n_blocks}", field,
                dfsel::ggml::display_name(st.anchors).c_str());
  DFSEL_TRY(check_memory(plan, cuda, st.anchors, field));
  const int64_t L = cfg.block_size - 1, n_tokens = n_blocks * cfg.block_size;

  struct Src {
    const ggml_tensor* t;
    const char* field;
    dfsel_tensor* view;
  } srcs[2] = {{st.logits, "logits", &in->logits}, {st.hidden, "hidden", &in->hidden}};
  for (const Src& s : srcs) {
    if (!s.t) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", name(s.field));
    const Status v = dfsel::ggml::to_view(s.t, s.view);
    if (!v.ok()) return fail(v.code, "%s: %s", name(s.field), v.msg.c_str());
    DFSEL_TRY(check_memory(plan, cuda, s.t, field));
  }
  if (st.packed) {
    const ggml_tensor* p = st.packed;
    const std::string nm = dfsel::ggml::display_name(p);
    name("packed");
    if (p->type != GGML_TYPE_F32 || p->nb[0] != sizeof(float) || p->ne[2] != 1 || p->ne[3] != 1)
      return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s must be a 2-D F32 tensor with contiguous rows", field,
                  nm.c_str());
    if (p->ne[0] != cfg.n_embd || p->ne[1] < n_tokens)
      return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s is {%" PRId64 ", %" PRId64 "}, expected {%" PRId64
                  ", at least %" PRId64 "} (n_embd, n_tokens)", field, nm.c_str(), p->ne[0], p->ne[1], cfg.n_embd,
                  n_tokens);
    if (!p->data) return fail(DFSEL_INVALID_ARGUMENT, "%s: tensor %s has no data (not allocated yet)", field, nm.c_str());
    DFSEL_TRY(check_memory(plan, cuda, p, field));
    out->packed = static_cast<float*>(p->data);
    out->packed_row_stride = p->nb[1];
  }
  DFSEL_TRY(check_i32(st.path, name("path"), L, n_blocks, true));
  DFSEL_TRY(check_memory(plan, cuda, st.path, field));
  DFSEL_TRY(check_i32(st.n_emitted, name("n_emitted"), n_blocks, 1, false));
  DFSEL_TRY(check_memory(plan, cuda, st.n_emitted, field));
  out->path = static_cast<int32_t*>(st.path->data);
  out->n_emitted = static_cast<int32_t*>(st.n_emitted->data);
  in->anchors = static_cast<const int32_t*>(st.anchors->data);
  in->n_blocks = (int32_t)n_blocks;
  in->temperature = st.temperature;
  in->p_min = st.p_min;
  in->seed = st.seed;
  return Status::success();
}

void copy_msg(const std::string& m, char* msg, size_t len) {
  if (msg && len) std::snprintf(msg, len, "%s", m.c_str());
}

}  // namespace

extern "C" dfsel_status dfsel_ggml_run_group(int n, dfsel_plan* const* plans, const dfsel_ggml_step* steps,
                                             void* const* streams, char* msg, size_t msg_len) {
  Status s = Status::success();
  std::vector<dfsel_inputs> in;
  std::vector<dfsel_outputs> out;
  try {
    if (n < 1 || !plans || !steps || !streams) {
      s = fail(DFSEL_INVALID_ARGUMENT, "n = %d, plans, steps and streams: n >= 1 and none NULL", n);
    } else {
      in.assign((size_t)n, dfsel_inputs{});
      out.assign((size_t)n, dfsel_outputs{});
      for (int i = 0; i < n && s.ok(); ++i) {
        if (!plans[i]) s = fail(DFSEL_INVALID_ARGUMENT, "plans[%d] is NULL", i);
        else s = convert(plans[i], steps[i], i, &in[(size_t)i], &out[(size_t)i]);
      }
    }
  } catch (...) {
    s = fail(DFSEL_OUT_OF_MEMORY, "allocation failed while converting the step's tensors");
  }
  if (!s.ok()) {
    copy_msg(s.msg, msg, msg_len);
    return s.code;
  }
  const dfsel_status r = dfsel_run_group(n, plans, in.data(), out.data(), streams);
  if (r == DFSEL_SUCCESS) {
    copy_msg(std::string(), msg, msg_len);
    return r;
  }
  // dfsel's message names its own fields (inputs.logits, outputs.packed): say which ggml
  // tensors they were.
  std::string m = dfsel_plan_last_error(plans[0]);
  try {
    m += " (ggml tensors:";
    for (int i = 0; i < n; ++i) {
      const dfsel_ggml_step& st = steps[i];
      auto nm = [](const ggml_tensor* t) { return t ? dfsel::ggml::display_name(t) : std::string("none"); };
      m += (i ? "; steps[" : " steps[") + std::to_string(i) + "]: inputs.logits " + nm(st.logits) + ", inputs.hidden " +
           nm(st.hidden) + ", inputs.anchors " + nm(st.anchors) + ", outputs.packed " + nm(st.packed) +
           ", outputs.path " + nm(st.path) + ", outputs.n_emitted " + nm(st.n_emitted);
    }
    m += ")";
  } catch (...) {
  }
  copy_msg(m, msg, msg_len);
  return r;
}

extern "C" dfsel_status dfsel_ggml_run(dfsel_plan* plan, const dfsel_ggml_step* step, void* stream, char* msg,
                                       size_t msg_len) {
  void* streams[1] = {stream};
  return dfsel_ggml_run_group(1, &plan, step, streams, msg, msg_len);
}
