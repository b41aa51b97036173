// The C ABI of the GGUF loader (include/dfsel/gguf.h) over gguf::File and gguf::Selector.
#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "dfsel/gguf.h"
#include "host/gguf/gguf.h"
#include "host/gguf/gguf_handle.h"

using dfsel::gguf::check;
using dfsel::gguf::check_index;
using dfsel::gguf::copy_message;
using dfsel::gguf::fail;

namespace {

// Outside the extern "C" block: a name there has C linkage even in an anonymous namespace, and
// the archive would define the global C symbol open_draft (scripts/check-symbols.sh).
dfsel_status open_draft(const char* path, int64_t v_begin, int64_t v_end, bool copy, dfsel_gguf** out,
                        char* msg, size_t msg_len) {
  copy_message("", msg, msg_len);
  if (path == nullptr || out == nullptr) {
    copy_message(std::string("dfsel_gguf_open: ") + (path ? "out" : "path") + " is NULL", msg,
                 msg_len);
    return DFSEL_INVALID_ARGUMENT;
  }
  *out = nullptr;
  try {
    std::unique_ptr<dfsel_gguf> g(new dfsel_gguf);
    dfsel::Status s = dfsel::gguf::File::open(path, &g->file);
    if (s.ok()) {
      g->is_dspark = dfsel::gguf::DSparkDraft::is_dspark(g->file);
      s = g->is_dspark ? dfsel::gguf::DSparkDraft::load(g->file, v_begin, v_end, &g->dspark, copy)
                       : dfsel::gguf::Selector::load(g->file, v_begin, v_end, &g->selector, copy);
      if (!s.ok()) s.msg = std::string(path) + ": " + s.msg;
      if (s.ok() && copy) g->file.detach();
    }
    if (!s.ok()) {
      copy_message(s.msg, msg, msg_len);
      return s.code;
    }
    *out = g.release();
    return DFSEL_SUCCESS;
  } catch (const std::bad_alloc&) {
    copy_message("dfsel_gguf_open: out of memory", msg, msg_len);
    return DFSEL_OUT_OF_MEMORY;
  } catch (...) {
    copy_message("dfsel_gguf_open: unexpected internal error", msg, msg_len);
    return DFSEL_INTERNAL_ERROR;
  }
}

}  // namespace

extern "C" {

dfsel_status dfsel_gguf_open(const char* path, int64_t v_begin, int64_t v_end, dfsel_gguf** out,
                             char* msg, size_t msg_len) {
  return open_draft(path, v_begin, v_end, false, out, msg, msg_len);
}

dfsel_status dfsel_gguf_open_copy(const char* path, int64_t v_begin, int64_t v_end, dfsel_gguf** out,
                                  char* msg, size_t msg_len) {
  return open_draft(path, v_begin, v_end, true, out, msg, msg_len);
}

dfsel_status dfsel_gguf_close(dfsel_gguf* gguf) {
  delete gguf;  // NULL does nothing, as the plan destroys (dfsel.h, NULL handles)
  return DFSEL_SUCCESS;
}

const char* dfsel_gguf_last_error(const dfsel_gguf* gguf) {
  return gguf == nullptr ? "" : gguf->last_error.c_str();
}

dfsel_status dfsel_gguf_config(const dfsel_gguf* gguf, dfsel_config* cfg) {
  if (dfsel_status s = check(gguf, "dfsel_gguf_config", cfg, "cfg")) return s;
  if (dfsel_status s = dfsel::gguf::check_kind(gguf, "dfsel_gguf_config", false)) return s;
  *cfg = gguf->selector.config();
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_tensors(const dfsel_gguf* gguf, dfsel_tensor* e_prev, dfsel_tensor* e_next,
                                dfsel_tensor* w_h) {
  dfsel_status s;
  if ((s = check(gguf, "dfsel_gguf_tensors", e_prev, "e_prev")) ||
      (s = check(gguf, "dfsel_gguf_tensors", e_next, "e_next")) ||
      (s = check(gguf, "dfsel_gguf_tensors", w_h, "w_h")) ||
      (s = dfsel::gguf::check_kind(gguf, "dfsel_gguf_tensors", false)))
    return s;
  *e_prev = gguf->selector.e_prev();
  *e_next = gguf->selector.e_next();
  *w_h = gguf->selector.w_h();
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_shard(const dfsel_gguf* gguf, int64_t* v_begin, int64_t* v_end) {
  dfsel_status s;
  if ((s = check(gguf, "dfsel_gguf_shard", v_begin, "v_begin")) ||
      (s = check(gguf, "dfsel_gguf_shard", v_end, "v_end")))
    return s;
  *v_begin = gguf->is_dspark ? gguf->dspark.v_begin() : gguf->selector.v_begin();
  *v_end = gguf->is_dspark ? gguf->dspark.v_end() : gguf->selector.v_end();
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_version(const dfsel_gguf* gguf, uint32_t* version) {
  if (dfsel_status s = check(gguf, "dfsel_gguf_version", version, "version")) return s;
  *version = gguf->file.version();
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_metadata_count(const dfsel_gguf* gguf, int64_t* count) {
  if (dfsel_status s = check(gguf, "dfsel_gguf_metadata_count", count, "count")) return s;
  *count = static_cast<int64_t>(gguf->file.metadata().size());
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_metadata_key(const dfsel_gguf* gguf, int64_t i, const char** key) {
  constexpr const char* fn = "dfsel_gguf_metadata_key";
  dfsel_status s;
  if ((s = check(gguf, fn, key, "key")) ||
      (s = check_index(gguf, fn, i, gguf->file.metadata().size())))
    return s;
  *key = gguf->file.metadata()[size_t(i)].key.c_str();
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_metadata_type(const dfsel_gguf* gguf, int64_t i, dfsel_gguf_kv_type* type) {
  constexpr const char* fn = "dfsel_gguf_metadata_type";
  dfsel_status s;
  if ((s = check(gguf, fn, type, "type")) ||
      (s = check_index(gguf, fn, i, gguf->file.metadata().size())))
    return s;
  const dfsel::gguf::KeyValue& kv = gguf->file.metadata()[size_t(i)];
  type->type = static_cast<dfsel_gguf_value_type>(kv.type);
  type->elem_type = static_cast<dfsel_gguf_value_type>(kv.elem_type);
  type->n_elems = kv.count;
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_metadata_value_string(const dfsel_gguf* gguf, int64_t i, char* buf,
                                              size_t len) {
  constexpr const char* fn = "dfsel_gguf_metadata_value_string";
  dfsel_status s;
  if ((s = check(gguf, fn, buf, "buf")) ||
      (s = check_index(gguf, fn, i, gguf->file.metadata().size())))
    return s;
  if (len == 0) return fail(gguf, DFSEL_INVALID_ARGUMENT, std::string(fn) + ": len is 0");
  try {
    copy_message(gguf->file.render(gguf->file.metadata()[size_t(i)], len), buf, len);
  } catch (const std::bad_alloc&) {
    buf[0] = '\0';
    return fail(gguf, DFSEL_OUT_OF_MEMORY, std::string(fn) + ": out of memory");
  }
  return DFSEL_SUCCESS;
}

const char* dfsel_gguf_value_type_name(dfsel_gguf_value_type type) {
  return dfsel::gguf::value_type_name(static_cast<uint32_t>(type));
}

dfsel_status dfsel_gguf_tensor_count(const dfsel_gguf* gguf, int64_t* count) {
  if (dfsel_status s = check(gguf, "dfsel_gguf_tensor_count", count, "count")) return s;
  *count = static_cast<int64_t>(gguf->file.tensors().size());
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_gguf_tensor_info(const dfsel_gguf* gguf, int64_t i,
                                    dfsel_gguf_tensor_desc* info) {
  constexpr const char* fn = "dfsel_gguf_tensor_info";
  dfsel_status s;
  if ((s = check(gguf, fn, info, "info")) ||
      (s = check_index(gguf, fn, i, gguf->file.tensors().size())))
    return s;
  const dfsel::gguf::TensorInfo& t = gguf->file.tensors()[size_t(i)];
  dfsel::gguf::TypeLayout lay{};
  dfsel::gguf::type_layout(t.type, &lay);
  info->name = t.name.c_str();
  info->ggml_type = static_cast<int32_t>(t.type);
  info->type_name = lay.name;
  info->n_dims = t.n_dims;
  for (int d = 0; d < 4; ++d) info->ne[d] = t.ne[d];
  info->file_offset = t.file_offset;
  info->n_bytes = t.n_bytes;
  return DFSEL_SUCCESS;
}

}  // extern "C"
