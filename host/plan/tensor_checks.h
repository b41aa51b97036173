// The checks every plan kind applies to what it is given (dfsel.h, dspark.h): a ggml-style
// matrix of an accepted type and shape, and a shard of a vocabulary. Each failure names the
// argument and its value. Pointers (present, aligned, not shared with what a run writes) are
// the rules of host/plan/run_buffers.h.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel {

// A 2-D ggml tensor {ne0, ne1} (or {ne0, >= ne1} unless exact_ne1) of an accepted type
// (weight: F32, F16, BF16, Q8_0, Q4_K, Q6_K; else F32, F16, BF16) with contiguous rows, data
// not NULL.
Status check_matrix(const char* name, const dfsel_tensor& t, bool weight, int64_t ne0, int64_t ne1_min,
                    bool exact_ne1);

// shard.rank of shard.n_ranks owns a non-empty part [v_begin, v_end) of [0, n_vocab).
Status check_shard(const dfsel_shard& s, int64_t n_vocab);

}  // namespace dfsel
