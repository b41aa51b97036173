// The checks every plan kind applies to what it is given (dfsel.h, dspark.h): a ggml-style
// matrix of an accepted type and shape, a shard of a vocabulary, and buffers a run writes that
// overlap nothing else. Each failure names the argument and its value.
#pragma once

#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel {

// A 2-D ggml tensor {ne0, ne1} (or {ne0, >= ne1} unless exact_ne1) of an accepted type
// (weight: F32, F16, BF16, Q8_0, Q4_K, Q6_K; else F32, F16, BF16) with contiguous rows.
Status check_matrix(const char* name, const dfsel_tensor& t, bool weight, int64_t ne0, int64_t ne1_min,
                    bool exact_ne1);

// shard.rank of shard.n_ranks owns a non-empty part [v_begin, v_end) of [0, n_vocab).
Status check_shard(const dfsel_shard& s, int64_t n_vocab);

// Bytes [begin, end) of one buffer a run reads or writes.
struct Span {
  const char* name;
  uintptr_t begin, end;
};

Span span_of(const char* name, const void* p, size_t bytes);
// A validated matrix's bytes: ne[1] - 1 strides and one row.
Span matrix_span(const char* name, const dfsel_tensor& t);
bool overlap(const Span& a, const Span& b);

// No output overlaps another output or anything the run reads (empty spans are not written).
Status check_spans_apart(const Span* outs, int n_outs, const Span* reads, int n_reads);

// The plans of one group call: no plan's outputs overlap another plan's outputs or anything
// another plan reads. spans_of(i, outs, reads) fills plan i's NO outputs and NR reads.
template <int NO, int NR, class SpansOf>
Status check_group_spans(int n, SpansOf spans_of) {
  for (int a = 0; a < n; ++a) {
    Span outs_a[NO], reads_a[NR];
    spans_of(a, outs_a, reads_a);
    for (int b = 0; b < n; ++b) {
      if (b == a) continue;
      Span outs_b[NO], reads_b[NR];
      spans_of(b, outs_b, reads_b);
      for (const Span& w : outs_a) {
        if (w.begin == w.end) continue;
        for (const Span& x : outs_b)
          if (b > a && overlap(w, x))
            return fail(DFSEL_INVALID_ARGUMENT, "plans[%d]'s %s (%p) and plans[%d]'s %s (%p) overlap; the plans of a group "
                        "must not share outputs", a, w.name, (void*)w.begin, b, x.name, (void*)x.begin);
        for (const Span& r : reads_b)
          if (overlap(w, r))
            return fail(DFSEL_INVALID_ARGUMENT, "plans[%d]'s %s (%p) overlaps plans[%d]'s %s (%p); no plan of a group may "
                        "write what another reads", a, w.name, (void*)w.begin, b, r.name, (void*)r.begin);
      }
    }
  }
  return Status::success();
}

}  // namespace dfsel
