#include "support/write_draft_rules.h"

#include <cstdio>
#include <iterator>

#include "dfsel/dspark.h"
#include "dfsel/gguf.h"
#include "kernels/common/numeric.cuh"
#include "tools/field_names.h"

namespace dfsel::test {

namespace {

using dfsel::tools::FieldName;

// The library's fields as the writer's flags set them, for drafts of both kinds.
constexpr FieldName kFlags[] = {
    {"config.n_vocab", "--vocab"},   {"config.n_target_vocab", "--target-vocab"}, {"config.n_embd", "--embd"},
    {"config.codebook_rank", "--rank"}, {"config.markov_rank", "--rank"},        {"config.top_k", "--top-k"},
    {"config.block_size", "--block"}};

// The workspace query of a one-rank CPU plan on the draft g holds: "" or the library's reason.
std::string plan_refusal(dfsel_gguf* g) {
  dfsel_draft_kind kind = DFSEL_DRAFT_DFLASH2;
  if (dfsel_gguf_draft_kind(g, &kind) != DFSEL_SUCCESS) return dfsel_gguf_last_error(g);
  char msg[512] = "";
  size_t bytes = 0;
  if (kind == DFSEL_DRAFT_DSPARK) {
    dfsel_dspark_plan_desc d{};
    if (dfsel_gguf_dspark_desc(g, &d) != DFSEL_SUCCESS) return dfsel_gguf_last_error(g);
    d.config.max_blocks = 1;
    d.shard = dfsel_shard{0, 1, 0, d.config.n_vocab};
    d.backend = DFSEL_BACKEND_CPU;
    return dfsel_dspark_workspace_size(&d, &bytes, msg, sizeof msg) == DFSEL_SUCCESS ? "" : msg;
  }
  dfsel_plan_desc d{};
  if (dfsel_gguf_config(g, &d.config) != DFSEL_SUCCESS || dfsel_gguf_tensors(g, &d.e_prev, &d.e_next, &d.w_h) != DFSEL_SUCCESS)
    return dfsel_gguf_last_error(g);
  d.config.max_blocks = 1;
  d.shard = dfsel_shard{0, 1, 0, d.config.n_vocab};
  d.backend = DFSEL_BACKEND_CPU;
  return dfsel_workspace_size(&d, &bytes, msg, sizeof msg) == DFSEL_SUCCESS ? "" : msg;
}

}  // namespace

int refuse_draft(const std::string& why) {
  std::fprintf(stderr, "dfsel_write_draft: %s\n", why.c_str());
  return 2;
}

const char* const kDraftTypes = "f32, f16, bf16, q8_0, q4_0, q4_1, q5_0, q5_1, q2_k, q3_k, q4_k, q5_k or q6_k";

bool parse_draft_type(const std::string& s, dfsel_type* t) {
  static const struct {
    const char* name;
    dfsel_type type;
  } kTypes[] = {{"f32", DFSEL_TYPE_F32},   {"f16", DFSEL_TYPE_F16},   {"bf16", DFSEL_TYPE_BF16},
                {"q8_0", DFSEL_TYPE_Q8_0}, {"q4_0", DFSEL_TYPE_Q4_0}, {"q4_1", DFSEL_TYPE_Q4_1},
                {"q5_0", DFSEL_TYPE_Q5_0}, {"q5_1", DFSEL_TYPE_Q5_1}, {"q2_k", DFSEL_TYPE_Q2_K},
                {"q3_k", DFSEL_TYPE_Q3_K}, {"q4_k", DFSEL_TYPE_Q4_K}, {"q5_k", DFSEL_TYPE_Q5_K},
                {"q6_k", DFSEL_TYPE_Q6_K}};
  for (const auto& k : kTypes)
    if (s == k.name) {
      *t = k.type;
      return true;
    }
  return false;
}

std::string draft_type_error(const std::string& flag, const std::string& v) {
  return flag + " is " + kDraftTypes + ", not '" + v + "'";
}

int64_t quant_block(dfsel_type t) { return t == DFSEL_TYPE_Q8_0 ? 32 : is_widened_type(t) ? widened_block(t).elems : 1; }

std::string judged_by_the_reader(const std::string& path) {
  char msg[512] = "";
  dfsel_gguf* g = nullptr;
  if (dfsel_gguf_open(path.c_str(), -1, -1, &g, msg, sizeof msg) != DFSEL_SUCCESS) return msg;
  const std::string why = plan_refusal(g);
  dfsel_gguf_close(g);
  return dfsel::tools::rename_fields(why, kFlags, std::size(kFlags));
}

}  // namespace dfsel::test
