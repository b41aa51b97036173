// The buffers a call touches and the rules every one of them obeys (dfsel.h), written once for
// every plan kind: a plan kind lists its buffers (what it reads, what it writes, the type each
// pointer is used as), and these checks refuse a missing required buffer, a pointer that is
// not aligned for its type, and memory that a call writes while something else it touches
// shares it. The lists are fixed arrays, so that a run that checks them allocates nothing.
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "dfsel/dfsel.h"
#include "host/status.h"

namespace dfsel {

// Bytes [begin, end) of one buffer; begin == end: absent (a NULL optional output).
struct RunBuffer {
  const char* name;  // the argument, as a message names it ("outputs.path")
  const void* ptr;
  uintptr_t begin, end;
  size_t align;   // the alignment of the type the library reads or writes it as
  bool written;   // the call writes it
  bool required;  // NULL is refused
};

class RunBuffers {
 public:
  static constexpr int kMax = 24;
  // bytes: the whole extent the call touches (0 is allowed for an absent buffer).
  void add(const char* name, const void* p, size_t bytes, size_t align, bool written, bool required = false);
  void add_read(const char* name, const void* p, size_t bytes, size_t align) { add(name, p, bytes, align, false); }
  // A validated 2-D tensor: ne[1] - 1 strides and one row, aligned to its element.
  void add_tensor(const char* name, const dfsel_tensor& t);
  int size() const { return n_; }
  bool overflowed() const { return overflowed_; }  // a plan kind listed more than kMax
  const RunBuffer& operator[](int i) const { return b_[i]; }

 private:
  RunBuffer b_[kMax];
  int n_ = 0;
  bool overflowed_ = false;
};

// The alignment a tensor of type t must have: its element's, or the f16 scale that starts
// each block of a quantised type.
size_t element_alignment(dfsel_type t);

// One call on one plan: required buffers present, every pointer aligned, and no buffer the
// call writes overlaps another buffer it touches.
Status check_run_buffers(const RunBuffers& bufs);
// The plans of one call (each already checked alone): no plan writes memory that another plan
// of the call reads or writes. who names the plans in messages ("plans").
Status check_group_buffers(int n, const RunBuffers* per_plan, const char* who);

// The same for the plans of a group call of any kind: list_of(i, &scratch[i]) lists plan i's
// buffers into the n lists of scratch (kept by the call, so that a run allocates nothing).
template <class ListOf>
Status check_group_call_buffers(int n, RunBuffers* scratch, ListOf list_of) {
  for (int i = 0; i < n; ++i) {
    scratch[i] = RunBuffers();
    list_of(i, &scratch[i]);
  }
  return check_group_buffers(n, scratch, "plans");
}

}  // namespace dfsel
