// The DSpark view of a parsed draft (gguf_dspark.h): checks the dflash metadata against the
// Markov head's tensors and exposes them as a DSpark plan description.
#include "host/gguf/gguf_dspark.h"

#include <cstring>
#include <limits>
#include <new>

#include "host/gguf/gguf_format.h"
#include "host/gguf/gguf_view.h"

namespace dfsel::gguf {

namespace {

constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();

// An optional bool key; absent leaves *out as it is.
Status optional_bool(const File& f, const char* key, bool* out) {
  const KeyValue* kv = f.find_key(key);
  if (kv == nullptr) return Status::success();
  if (!f.read_bool(*kv, out))
    return format_error(cat(key, " has type ", value_type_name(uint32_t(kv->type)), ", expected bool"));
  return Status::success();
}

// An optional F32 tensor of n elements (a vector: ne[1..3] are 1).
Status find_f32_vector(const File& f, const char* name, int64_t n1, int64_t n2, const TensorInfo** out) {
  const TensorInfo* t = f.find_tensor(name);
  *out = t;
  if (t == nullptr) return Status::success();
  if (t->type != DFSEL_TYPE_F32)
    return Status{DFSEL_UNSUPPORTED, cat("tensor '", name, "' has ggml type ", t->type, "; dfsel reads it as f32 (0)")};
  if (t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1 || (t->ne[0] != n1 && t->ne[0] != n2))
    return format_error(cat("tensor '", name, "' has shape ", shape_string(t->ne, t->n_dims), ", expected {", n1,
                            n2 != n1 ? cat("} or {", n2) : std::string(), "}"));
  return Status::success();
}

float f32_at(const File& f, const TensorInfo& t, int64_t i) {
  float v;
  std::memcpy(&v, f.tensor_data(t) + 4 * i, 4);
  return v;
}

// d2t's entries [v_begin, v_end) as int32 target ids, each in [0, v_target).
Status read_d2t(const File& f, const TensorInfo& t, int64_t v_draft, int64_t v_target, int64_t v_begin, int64_t v_end,
                std::vector<int32_t>* out) {
  if (t.type != 26 && t.type != 27)  // ggml's i32, i64
    return Status{DFSEL_UNSUPPORTED, cat("tensor 'd2t' has ggml type ", t.type, "; dfsel reads i64 (27) or i32 (26)")};
  if (t.ne[0] != v_draft || t.ne[1] != 1 || t.ne[2] != 1 || t.ne[3] != 1)
    return format_error(cat("tensor 'd2t' has shape ", shape_string(t.ne, t.n_dims), ", expected {", v_draft,
                            "}, one entry per row of markov_w2.weight"));
  out->resize(size_t(v_end - v_begin));
  const uint8_t* p = f.tensor_data(t);
  for (int64_t i = v_begin; i < v_end; ++i) {
    int64_t id;
    if (t.type == 27) std::memcpy(&id, p + 8 * i, 8);
    else id = int32_t(load_u32(p + 4 * i));
    if (id < 0 || id >= v_target)
      return format_error(cat("d2t[", i, "] = ", id, " is outside [0, ", v_target, "), the rows of markov_w1.weight"));
    (*out)[size_t(i - v_begin)] = int32_t(id);
  }
  return Status::success();
}

}  // namespace

Status DSparkDraft::load(const File& f, int64_t v_begin, int64_t v_end, DSparkDraft* out, bool copy) {
  try {
    DSparkDraft g;
    dfsel_dspark_config& c = g.desc_.config;
    const KeyValue* arch = f.find_key("general.architecture");
    std::string_view arch_name;
    if (arch == nullptr)
      return format_error("metadata key 'general.architecture' is missing (a DSpark draft has \"dflash\")");
    if (!f.read_string(*arch, &arch_name) || arch_name != "dflash")
      return format_error(cat("general.architecture is ", f.render(*arch), ", expected \"dflash\""));
    bool from_anchor = true, has_conf = true;
    int64_t block_size;
    DFSEL_TRY(required_int(f, "dflash.block_size", 1, kI32, &block_size));
    DFSEL_TRY(optional_bool(f, "dflash.sample_from_anchor", &from_anchor));
    DFSEL_TRY(optional_bool(f, "dflash.has_confidence_head", &has_conf));
    if (!from_anchor && block_size < 2)
      return format_error(cat("dflash.block_size = ", block_size, " leaves no drafted position after the anchor "
                              "(dflash.sample_from_anchor is false)"));
    const TensorInfo *w1, *w2, *conf = nullptr, *scale, *bias, *d2t = f.find_tensor(kD2t);
    DFSEL_TRY(find_weight_tensor(f, kW1, &w1));
    DFSEL_TRY(find_weight_tensor(f, kW2, &w2));
    const int64_t R = w1->ne[0], v_draft = w2->ne[1], v_target = w1->ne[1];
    if (R > kI32 || v_draft > kI32 || v_target > kI32)
      return format_error(cat("markov_w1.weight ", shape_string(w1->ne, w1->n_dims), " or markov_w2.weight ",
                              shape_string(w2->ne, w2->n_dims), " exceeds 2^31 - 1"));
    if (w2->ne[0] != R)
      return format_error(cat("tensor 'markov_w2.weight' has shape ", shape_string(w2->ne, w2->n_dims),
                              ", expected {R, V_draft} with R = ", R, " (markov_w1.weight's ne[0])"));
    if (!d2t && v_target != v_draft)
      return format_error(cat("markov_w1.weight has ", v_target, " rows and markov_w2.weight ", v_draft,
                              "; without a d2t map both cover the same vocabulary"));
    if (has_conf && f.find_tensor(kConf)) DFSEL_TRY(find_weight_tensor(f, kConf, &conf));
    else if (has_conf && f.find_key("dflash.has_confidence_head"))
      return format_error("dflash.has_confidence_head is true but tensor 'conf_proj.weight' is missing");
    if (v_begin == -1 && v_end == -1) {
      v_begin = 0;
      v_end = v_draft;
    } else if (v_begin < 0 || v_begin >= v_end || v_end > v_draft) {
      return Status{DFSEL_INVALID_ARGUMENT, cat("vocabulary range [v_begin, v_end) = [", v_begin, ", ", v_end,
                                                ") is not a non-empty range in [0, ", v_draft, ") (-1, -1 selects all of it)")};
    }
    int64_t n_embd = 0;
    if (conf) {
      if (conf->ne[1] != 1 || conf->ne[0] <= R)
        return format_error(cat("tensor 'conf_proj.weight' has shape ", shape_string(conf->ne, conf->n_dims),
                                ", expected {n_embd + R, 1} with R = ", R));
      n_embd = conf->ne[0] - R;
      int64_t key_embd = n_embd;
      if (f.find_key("dflash.embedding_length")) DFSEL_TRY(required_int(f, "dflash.embedding_length", 1, kI32, &key_embd));
      if (key_embd != n_embd)
        return format_error(cat("tensor 'conf_proj.weight' has ", conf->ne[0], " columns, expected dflash.embedding_length + R = ",
                                key_embd + R));
    }
    DFSEL_TRY(find_f32_vector(f, kScale, 1, v_draft, &scale));
    DFSEL_TRY(find_f32_vector(f, kConfBias, 1, 1, &bias));
    if (d2t) DFSEL_TRY(read_d2t(f, *d2t, v_draft, v_target, v_begin, v_end, &g.d2t_));
    c = dfsel_dspark_config{v_draft, v_target, n_embd, int32_t(R), int32_t(from_anchor ? block_size : block_size - 1),
                            from_anchor ? 1 : 0, 0.0f, 0.0f, 0};
    g.desc_.shard.v_begin = v_begin;
    g.desc_.shard.v_end = v_end;
    g.desc_.placement = DFSEL_CODEBOOKS_REPLICATED;
    view_rows(f, *w1, 0, v_target, &g.owned_[0], &g.desc_.w1, copy);
    view_rows(f, *w2, v_begin, v_end, &g.owned_[1], &g.desc_.w2, copy);
    if (conf) view_rows(f, *conf, 0, 1, &g.owned_[2], &g.desc_.conf_w, copy);
    if (bias) g.desc_.conf_bias = f32_at(f, *bias, 0);
    if (scale) {
      const int64_t first = scale->ne[0] == 1 ? 0 : v_begin, n = scale->ne[0] == 1 ? 1 : v_end - v_begin;
      for (int64_t i = 0; i < n; ++i) g.scale_.push_back(f32_at(f, *scale, first + i));
      g.desc_.w2_scale = dfsel_tensor_2d(g.scale_.data(), DFSEL_TYPE_F32, n, 1, size_t(n) * 4);
    }
    g.desc_.d2t = d2t ? g.d2t_.data() : nullptr;
    *out = std::move(g);
    return Status::success();
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, "out of memory while reading the Markov head's tensors"};
  }
}

void DSparkDraft::describe(dfsel_dspark_plan_desc* d) const {
  d->config = desc_.config;
  d->shard.v_begin = desc_.shard.v_begin;
  d->shard.v_end = desc_.shard.v_end;
  d->placement = desc_.placement;
  d->w1 = desc_.w1;
  d->w2 = desc_.w2;
  d->w2_scale = desc_.w2_scale;
  d->conf_w = desc_.conf_w;
  d->conf_bias = desc_.conf_bias;
  d->d2t = desc_.d2t;
}

}  // namespace dfsel::gguf
