// DSpark drafts as GGUF (host/gguf/gguf_dspark.h): valid ones of any size, type and layout,
// written by the fixture writer (gguf_writer.h), and, through DSparkDraftOptions::defect, the
// inconsistent ones the loader must refuse.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

enum class DSparkDefect {
  kNone,
  kMissingW2,           // no markov_w2.weight
  kW1Type,              // markov_w1.weight stored as iq4_nl
  kRankMismatch,        // markov_w2.weight {R + 1, V}
  kVocabMismatch,       // no d2t, markov_w1.weight has V + 1 rows
  kD2tRange,            // d2t[1] = V_target
  kD2tShape,            // d2t has V + 1 entries
  kD2tType,             // d2t stored as f32
  kScaleShape,          // markov_w2.scale {2}
  kScaleType,           // markov_w2.scale stored as f16
  kConfShape,           // conf_proj.weight {R, 1}
  kConfEmbd,            // dflash.embedding_length = n_embd + 1
  kConfKeyNoTensor,     // dflash.has_confidence_head true, no conf_proj.weight
  kAnchorKeyType,       // dflash.sample_from_anchor stored as u32
  kNoBlockSize,         // no dflash.block_size
  kBlockOneAfterAnchor, // dflash.block_size 1 with sample_from_anchor false
  kWrongArchitecture,   // "llama"
};

struct DSparkDraftOptions {
  int64_t n_vocab = 64;         // V_draft
  int64_t n_target_vocab = 0;   // V_target with d2t; 0: n_vocab
  int64_t rank = 32;
  int64_t n_embd = 0;           // > 0: a confidence head {n_embd + R, 1}
  int64_t block_size = 8;
  std::optional<bool> sample_from_anchor;  // written when set (absent: true)
  dfsel_type w1_type = DFSEL_TYPE_F16, w2_type = DFSEL_TYPE_F16, conf_type = DFSEL_TYPE_F32;
  int scale = 0;                // 0: no markov_w2.scale, 1: one value, 2: one per row
  bool conf_bias = false;
  bool d2t = false, d2t_i32 = false;  // d2t as ggml i64 (llama.cpp's), or i32
  uint32_t version = 3;
  uint64_t seed = 1;
  int64_t row_period = 0;       // > 0: W1 and W2 rows repeat with this period (cheap huge drafts)
  DSparkDefect defect = DSparkDefect::kNone;
};

std::vector<uint8_t> make_dspark_draft(const DSparkDraftOptions& o);

// d2t of a draft: target id of every draft id (a fixed scatter into [0, V_target)).
int64_t dspark_draft_target(const DSparkDraftOptions& o, int64_t draft_id);

}  // namespace dfsel::test
