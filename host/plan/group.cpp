#include "host/plan/group.h"

namespace dfsel {

RankSummary summarize(const dfsel_plan_desc& d) {
  RankSummary s = summarize_shared(d);
  s.top_k = d.config.top_k;
  s.codebook_rank = d.config.codebook_rank;
  s.block_size = d.config.block_size;
  s.cb_type = enum_value(d.e_prev.type);
  s.w_type = enum_value(d.w_h.type);
  return s;
}

}  // namespace dfsel
