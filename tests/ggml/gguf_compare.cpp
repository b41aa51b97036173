#include "gguf_compare.h"

#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace dfsel::test {

namespace {

std::string escaped(const char* s) {
  std::string out = "\"";
  for (const char* p = s; *p; ++p) {
    const unsigned char c = (unsigned char)*p;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += (char)c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += (char)c;
    }
  }
  return out + "\"";
}

std::string number(const void* p, gguf_type t) {
  char buf[48];
  switch (t) {
    case GGUF_TYPE_UINT8: return std::to_string(*(const uint8_t*)p);
    case GGUF_TYPE_INT8: return std::to_string(*(const int8_t*)p);
    case GGUF_TYPE_UINT16: return std::to_string(*(const uint16_t*)p);
    case GGUF_TYPE_INT16: return std::to_string(*(const int16_t*)p);
    case GGUF_TYPE_UINT32: return std::to_string(*(const uint32_t*)p);
    case GGUF_TYPE_INT32: return std::to_string(*(const int32_t*)p);
    case GGUF_TYPE_UINT64: return std::to_string(*(const uint64_t*)p);
    case GGUF_TYPE_INT64: return std::to_string(*(const int64_t*)p);
    case GGUF_TYPE_BOOL: return *(const uint8_t*)p ? "true" : "false";
    case GGUF_TYPE_FLOAT32: std::snprintf(buf, sizeof buf, "%.9g", (double)*(const float*)p); return buf;
    case GGUF_TYPE_FLOAT64: std::snprintf(buf, sizeof buf, "%.17g", *(const double*)p); return buf;
    default: return "?";
  }
}

size_t value_size(gguf_type t) {
  switch (t) {
    case GGUF_TYPE_UINT8: case GGUF_TYPE_INT8: case GGUF_TYPE_BOOL: return 1;
    case GGUF_TYPE_UINT16: case GGUF_TYPE_INT16: return 2;
    case GGUF_TYPE_UINT32: case GGUF_TYPE_INT32: case GGUF_TYPE_FLOAT32: return 4;
    default: return 8;
  }
}

}  // namespace

std::string render_ggml_value(const gguf_context* g, int64_t id) {
  const gguf_type t = gguf_get_kv_type(g, id);
  if (t == GGUF_TYPE_STRING) return escaped(gguf_get_val_str(g, id));
  if (t != GGUF_TYPE_ARRAY) return number(gguf_get_val_data(g, id), t);
  const gguf_type et = gguf_get_arr_type(g, id);
  const size_t n = gguf_get_arr_n(g, id);
  std::string out = "[";
  for (size_t i = 0; i < n; ++i) {
    if (i == 8) {
      out += ", ... " + std::to_string(n) + " items";
      break;
    }
    if (i) out += ", ";
    if (et == GGUF_TYPE_STRING) {
      out += escaped(gguf_get_arr_str(g, id, i));
    } else {
      const size_t sz = value_size(et);
      out += number(static_cast<const uint8_t*>(gguf_get_arr_data(g, id)) + i * sz, et);
    }
  }
  return out + "]";
}

std::string compare_gguf(const dfsel_gguf* d, const gguf_context* g, const std::vector<uint8_t>& file,
                         ggml_context* data, bool offsets) {
  int64_t n_kv = 0, n_t = 0;
  dfsel_gguf_metadata_count(d, &n_kv);
  dfsel_gguf_tensor_count(d, &n_t);
  if (n_kv != gguf_get_n_kv(g)) return "metadata count " + std::to_string(n_kv) + " vs ggml's " + std::to_string(gguf_get_n_kv(g));
  for (int64_t i = 0; i < n_kv; ++i) {
    const char* key = nullptr;
    dfsel_gguf_kv_type kt{};
    char value[4096];
    dfsel_gguf_metadata_key(d, i, &key);
    dfsel_gguf_metadata_type(d, i, &kt);
    dfsel_gguf_metadata_value_string(d, i, value, sizeof value);
    const std::string k = key ? key : "(null)";
    if (k != gguf_get_key(g, i)) return "key " + std::to_string(i) + ": " + k + " vs ggml's " + gguf_get_key(g, i);
    const gguf_type gt = gguf_get_kv_type(g, i);
    if ((int)kt.type != (int)gt) return k + ": type " + std::to_string(kt.type) + " vs ggml's " + std::to_string(gt);
    if (gt == GGUF_TYPE_ARRAY &&
        ((int)kt.elem_type != (int)gguf_get_arr_type(g, i) || kt.n_elems != gguf_get_arr_n(g, i))) {
      return k + ": array of " + std::to_string(kt.n_elems) + " differs from ggml's";
    }
    const std::string theirs = render_ggml_value(g, i);
    if (theirs != value) return k + ": " + value + " vs ggml's " + theirs;
  }
  if (n_t != gguf_get_n_tensors(g)) return "tensor count " + std::to_string(n_t) + " vs ggml's " + std::to_string(gguf_get_n_tensors(g));
  for (int64_t i = 0; i < n_t; ++i) {
    dfsel_gguf_tensor_desc td{};
    dfsel_gguf_tensor_info(d, i, &td);
    const std::string name = td.name;
    if (name != gguf_get_tensor_name(g, i)) return "tensor " + std::to_string(i) + ": " + name + " vs ggml's " + gguf_get_tensor_name(g, i);
    if (td.ggml_type != (int32_t)gguf_get_tensor_type(g, i)) return name + ": type differs from ggml's";
    if (std::string(td.type_name) != ggml_type_name(gguf_get_tensor_type(g, i))) return name + ": type name " + td.type_name;
    for (int k = 0; k < 4; ++k) {
      if (td.ne[k] != gguf_get_tensor_ne(g, i)[k]) return name + ": ne[" + std::to_string(k) + "] differs from ggml's";
    }
    const uint64_t offset = gguf_get_data_offset(g) + gguf_get_tensor_offset(g, i);
    if (offsets && td.file_offset != offset) return name + ": offset " + std::to_string(td.file_offset) + " vs ggml's " + std::to_string(offset);
    if (td.n_bytes != gguf_get_tensor_size(g, i)) return name + ": size differs from ggml's";
    if (offset + td.n_bytes > file.size()) return name + ": data past the end of the file";
    if (data) {
      const ggml_tensor* t = ggml_get_tensor(data, name.c_str());
      if (!t || ggml_nbytes(t) != td.n_bytes) return name + ": not in ggml's loaded context";
      if (std::memcmp(t->data, &file[offset], td.n_bytes) != 0) return name + ": ggml loaded other bytes";
    }
  }
  return "";
}

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

namespace {
void quiet(ggml_log_level, const char*, void*) {}
}  // namespace

QuietGgmlLog::QuietGgmlLog() { ggml_log_set(quiet, nullptr); }
QuietGgmlLog::~QuietGgmlLog() { ggml_log_set(nullptr, nullptr); }

}  // namespace dfsel::test
