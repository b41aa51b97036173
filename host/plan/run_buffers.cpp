#include "host/plan/run_buffers.h"

#include "kernels/common/numeric.cuh"

namespace dfsel {

void RunBuffers::add(const char* name, const void* p, size_t bytes, size_t align, bool written, bool required) {
  if (n_ == kMax) {  // a plan kind lists a fixed number of buffers, well below kMax
    overflowed_ = true;
    return;
  }
  const uintptr_t b = reinterpret_cast<uintptr_t>(p);
  // A claim that wraps the address space cannot be backed; it is clamped so that it still
  // overlaps everything above it.
  uintptr_t e = b;
  if (p && __builtin_add_overflow(b, bytes, &e)) e = UINTPTR_MAX;
  b_[n_++] = RunBuffer{name, p, b, e, align, written, required};
}

void RunBuffers::add_tensor(const char* name, const dfsel_tensor& t) {
  const size_t bytes = (size_t)(t.ne[1] - 1) * t.nb[1] + row_bytes(t.type, t.ne[0]);
  add(name, t.data, bytes, element_alignment(t.type), false);
}

size_t element_alignment(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

namespace {

bool overlap(const RunBuffer& a, const RunBuffer& b) {
  return a.begin != a.end && b.begin != b.end && a.begin < b.end && b.begin < a.end;
}

}  // namespace

namespace {

// The first buffer of a that the call writes and that overlaps a buffer of b, with that buffer.
// same: a and b are one list (a buffer is not compared with itself); a pair of two written
// buffers is reported once, from the list that comes first (first_of_pair).
bool find_conflict(const RunBuffers& a, const RunBuffers& b, bool same, bool first_of_pair, const RunBuffer** w,
                   const RunBuffer** o) {
  for (int i = 0; i < a.size(); ++i) {
    if (!a[i].written) continue;
    for (int j = 0; j < b.size(); ++j) {
      if (same && j == i) continue;
      if (b[j].written && (same ? j < i : !first_of_pair)) continue;
      if (!overlap(a[i], b[j])) continue;
      *w = &a[i];
      *o = &b[j];
      return true;
    }
  }
  return false;
}

}  // namespace

Status check_run_buffers(const RunBuffers& bufs) {
  if (bufs.overflowed())
    return fail(DFSEL_INTERNAL_ERROR, "a call listed more than %d buffers to check", RunBuffers::kMax);
  for (int i = 0; i < bufs.size(); ++i) {
    const RunBuffer& x = bufs[i];
    if (!x.ptr && x.required) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", x.name);
    if (x.begin % x.align != 0)
      return fail(DFSEL_INVALID_ARGUMENT, "%s = %p is not aligned to %zu bytes, the alignment of the type it holds",
                  x.name, x.ptr, x.align);
  }
  const RunBuffer *w, *o;
  if (!find_conflict(bufs, bufs, true, true, &w, &o)) return Status::success();
  if (o->written)
    return fail(DFSEL_INVALID_ARGUMENT, "%s (%p) and %s (%p) overlap; memory a run writes must not be shared", w->name,
                w->ptr, o->name, o->ptr);
  return fail(DFSEL_INVALID_ARGUMENT, "%s (%p) overlaps %s (%p); memory a run writes must not be shared with what it "
              "reads", w->name, w->ptr, o->name, o->ptr);
}

Status check_group_buffers(int n, const RunBuffers* per_plan, const char* who) {
  for (int a = 0; a < n; ++a)
    for (int b = 0; b < n; ++b) {
      const RunBuffer *w, *o;
      if (b == a || !find_conflict(per_plan[a], per_plan[b], false, a < b, &w, &o)) continue;
      if (o->written)
        return fail(DFSEL_INVALID_ARGUMENT, "%s[%d]'s %s (%p) and %s[%d]'s %s (%p) overlap; the plans of a group must "
                    "not share what they write", who, a, w->name, w->ptr, who, b, o->name, o->ptr);
      return fail(DFSEL_INVALID_ARGUMENT, "%s[%d]'s %s (%p) overlaps %s[%d]'s %s (%p); no plan of a group may write "
                  "what another reads", who, a, w->name, w->ptr, who, b, o->name, o->ptr);
    }
  return Status::success();
}

}  // namespace dfsel
