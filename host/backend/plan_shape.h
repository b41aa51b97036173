// PlanShape: the normalised shape of a DFlash2 plan. Plan creation derives it from a validated
// description (host/plan/validate.h); the backends size and run everything by it, so it lives
// in the backend layer, which the plan layer includes and not the other way round.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "kernels/common/exchange_layout.cuh"
#include "kernels/common/selector_math.cuh"

namespace dfsel {

// Sizes and resolved defaults every layer derives from a validated description.
struct PlanShape {
  int32_t k, R, block_size, L;
  int64_t n_vocab, n_embd, v_begin, v_end;
  size_t cb_row_bytes;
  bool sharded;
  int32_t n_ranks;
  Transform transform;  // logit_scale 0 resolved to 1
  // A group's records also carry what each rank was given (agree_record.cuh).
  ExchangeLayout layout_for(int32_t n_blocks) const {
    return make_exchange_layout(k, n_blocks, block_size, sharded, cb_row_bytes, n_ranks > 1);
  }
};

}  // namespace dfsel
