// The DSpark view of a parsed draft (docs/dspark.md, GGUF): a "dflash" draft with a Markov
// head. Tensors markov_w1.weight {R, V_target}, markov_w2.weight {R, V_draft}, optionally
// markov_w2.scale F32 {1} or {V_draft}, conf_proj.weight {n_embd + R, 1} and conf_proj.bias
// F32 {1}, d2t I64 or I32 {V_draft}; metadata dflash.block_size, optionally
// dflash.sample_from_anchor (true when absent), dflash.has_confidence_head and
// dflash.embedding_length. The keys and shapes llama.cpp's loader reads.
#pragma once

#include <stdint.h>

#include <vector>

#include "dfsel/dspark.h"
#include "host/gguf/gguf_file.h"
#include "host/status.h"

namespace dfsel::gguf {

class DSparkDraft {
 public:
  static constexpr const char* kW1 = "markov_w1.weight";
  static constexpr const char* kW2 = "markov_w2.weight";
  static constexpr const char* kScale = "markov_w2.scale";
  static constexpr const char* kConf = "conf_proj.weight";
  static constexpr const char* kConfBias = "conf_proj.bias";
  static constexpr const char* kD2t = "d2t";

  DSparkDraft() = default;
  DSparkDraft(DSparkDraft&&) noexcept = default;
  DSparkDraft& operator=(DSparkDraft&&) noexcept = default;

  // Whether the file holds a DSpark draft (its Markov head's first tensor).
  static bool is_dspark(const File& file) { return file.find_tensor(kW1) != nullptr; }

  // The draft ids [v_begin, v_end) (-1, -1: all of them). As Selector::load: a range outside
  // [0, V_draft) is DFSEL_INVALID_ARGUMENT, an inconsistent draft DFSEL_FORMAT_ERROR, a tensor
  // of a type dfsel does not read DFSEL_UNSUPPORTED; copy: every view into owned memory.
  static Status load(const File& file, int64_t v_begin, int64_t v_end, DSparkDraft* out, bool copy = false);

  // config (max_blocks 0), the range, replicated placement, and the views of dspark.h.
  void describe(dfsel_dspark_plan_desc* desc) const;
  int64_t v_begin() const { return desc_.shard.v_begin; }
  int64_t v_end() const { return desc_.shard.v_end; }

 private:
  dfsel_dspark_plan_desc desc_{};
  std::vector<uint16_t> owned_[3];  // W1, W2, conf_proj when widened or copied
  std::vector<float> scale_;
  std::vector<int32_t> d2t_;
};

}  // namespace dfsel::gguf
