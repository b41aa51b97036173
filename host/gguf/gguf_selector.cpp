// The DFlash2 selector view of a parsed draft (SPEC section 6.6): checks the dflash metadata
// against the three selector tensors and exposes them as dfsel_tensor views.
#include "host/gguf/gguf_selector.h"
#include "host/gguf/gguf_view.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <new>

#include "host/gguf/gguf_format.h"
#include "kernels/common/numeric.cuh"

namespace dfsel::gguf {

namespace {

// Checks the metadata and the selector tensors against each other; fills cfg and range.
Status check_selector(const File& f, int64_t v_begin, int64_t v_end, dfsel_config* cfg,
                      int64_t* range) {
  const KeyValue* arch = f.find_key("general.architecture");
  std::string_view arch_name;
  if (arch == nullptr)
    return format_error(
        "metadata key 'general.architecture' is missing (a DFlash2 draft has \"dflash\")");
  if (!f.read_string(*arch, &arch_name) || arch_name != "dflash")
    return format_error(cat("general.architecture is ", f.render(*arch), ", expected \"dflash\""));
  constexpr int64_t kI32 = std::numeric_limits<int32_t>::max();
  int64_t rank, top_k, block_size, n_embd;
  DFSEL_TRY(required_int(f, "dflash.selector_rank", 1, kI32, &rank));
  DFSEL_TRY(required_int(f, "dflash.selector_top_k", 1, kI32, &top_k));
  DFSEL_TRY(required_int(f, "dflash.block_size", 2, kI32, &block_size));
  DFSEL_TRY(required_int(f, "dflash.embedding_length", 1, kI32, &n_embd));
  double scale = 1.0, softcap = 0.0;
  DFSEL_TRY(optional_float(f, "dflash.logit_scale", &scale));
  DFSEL_TRY(optional_float(f, "dflash.final_logit_softcapping", &softcap));
  if (!(scale > 0)) return format_error(cat("dflash.logit_scale = ", scale, " is not positive"));

  const TensorInfo *prev, *next, *hidden;
  DFSEL_TRY(find_weight_tensor(f, Selector::kPredecessor, &prev));
  DFSEL_TRY(find_weight_tensor(f, Selector::kSuccessor, &next));
  DFSEL_TRY(find_weight_tensor(f, Selector::kHidden, &hidden));
  for (const TensorInfo* t : {prev, next})
    if (t->ne[0] != rank)
      return format_error(cat("tensor '", t->name, "' has shape ", shape_string(t->ne, t->n_dims),
                              ", expected {R, V} with R = dflash.selector_rank = ", rank));
  const int64_t n_vocab = prev->ne[1];
  if (next->ne[1] != n_vocab)
    return format_error(cat("tensor '", next->name, "' has V = ", next->ne[1], " rows but '",
                            prev->name, "' has ", n_vocab));
  if (hidden->ne[0] != n_embd || hidden->ne[1] != rank)
    return format_error(cat("tensor '", hidden->name, "' has shape ",
                            shape_string(hidden->ne, hidden->n_dims), ", expected {n_embd, R} = {",
                            n_embd, ", ", rank, "}"));
  if (top_k > n_vocab)
    return format_error(
        cat("dflash.selector_top_k = ", top_k, " exceeds the vocabulary size V = ", n_vocab));
  if (v_begin == -1 && v_end == -1) {
    v_begin = 0;
    v_end = n_vocab;
  } else if (v_begin < 0 || v_begin >= v_end || v_end > n_vocab) {
    return Status{DFSEL_INVALID_ARGUMENT, cat("vocabulary range [v_begin, v_end) = [", v_begin,
                                              ", ", v_end, ") is not a non-empty range in [0, ",
                                              n_vocab, ") (-1, -1 selects all of it)")};
  }
  cfg->n_vocab = n_vocab;
  cfg->n_embd = n_embd;
  cfg->codebook_rank = int32_t(rank);
  cfg->top_k = int32_t(top_k);
  cfg->block_size = int32_t(block_size);
  cfg->logit_scale = float(scale);
  cfg->softcap = float(softcap);
  cfg->max_blocks = 0;
  range[0] = v_begin;
  range[1] = v_end;
  return Status::success();
}

}  // namespace

Status Selector::load(const File& file, int64_t v_begin, int64_t v_end, Selector* out, bool copy) {
  try {
    Selector sel;
    int64_t range[2] = {0, 0};
    DFSEL_TRY(check_selector(file, v_begin, v_end, &sel.config_, range));
    sel.v_begin_ = range[0];
    sel.v_end_ = range[1];
    view_rows(file, *file.find_tensor(kPredecessor), range[0], range[1], &sel.owned_[0],
              &sel.e_prev_, copy);
    view_rows(file, *file.find_tensor(kSuccessor), range[0], range[1], &sel.owned_[1],
              &sel.e_next_, copy);
    const TensorInfo& h = *file.find_tensor(kHidden);
    view_rows(file, h, 0, h.ne[1], &sel.owned_[2], &sel.w_h_, copy);
    *out = std::move(sel);
    return Status::success();
  } catch (const std::bad_alloc&) {
    return Status{DFSEL_OUT_OF_MEMORY, "out of memory while dequantising the selector tensors"};
  }
}

}  // namespace dfsel::gguf
