// The driver of the C ABI sweeps (tests/api_sweep_test.cpp, tests/dspark_sweep_test.cpp) and the
// buffer tests' misalignment check (tests/*buffers_test.cpp). A sweep makes one
// change at a time to a valid problem S, which must either run and keep its header's promises
// or be refused with a message naming the argument. S provides desc (with workspace and
// workspace_bytes), in, out and std::string attempt(dfsel_status*): "" after a run that kept
// its promises, else the refusal's message.
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"

namespace dfsel::test {

template <class S>
struct Change {
  std::string what;                 // for failure messages
  std::function<void(S&)> edit;
  const char* named;                // a refusal must name this (nullptr: any message)
  bool refused = false;             // a change no valid call makes: it must be refused
};

template <class S>
void sweep(const std::vector<Change<S>>& changes) {
  for (const Change<S>& ch : changes) {
    S s;
    ch.edit(s);
    dfsel_status st;
    const std::string why = s.attempt(&st);
    if (ch.refused) EXPECT_NE(st, DFSEL_SUCCESS) << ch.what << " was accepted";
    if (st != DFSEL_SUCCESS && ch.named) EXPECT_NE(why.find(ch.named), std::string::npos) << ch.what << ": " << why;
  }
}

// Where a pointer of S is stored.
template <class S>
using Slot = std::function<const void**(S&)>;

// The slot of output field f (any pointer type) of S::out.
template <class S, class O, class T>
Slot<S> output_slot(T* O::*f) {
  return [f](S& s) { return const_cast<const void**>(reinterpret_cast<void**>(&(s.out.*f))); };
}

template <class S>
struct PointerArg {
  const char* name;
  Slot<S> slot;
  bool required;  // NULL must be refused
};

// Each pointer moved 1 to 3 bytes off its alignment (every buffer holds 4-byte elements and
// keeps room after it), and NULL where it is required: all refused, naming the pointer.
template <class S>
std::vector<Change<S>> misaligned_or_null(const std::vector<PointerArg<S>>& ptrs) {
  std::vector<Change<S>> ch;
  for (const PointerArg<S>& p : ptrs) {
    const Slot<S> slot = p.slot;
    for (int shift : {1, 2, 3})
      ch.push_back({std::string(p.name) + " + " + std::to_string(shift), [slot, shift](S& s) {
                      const void** q = slot(s);
                      *q = static_cast<const char*>(*q) + shift;
                    }, p.name, true});
    if (p.required) ch.push_back({std::string(p.name) + " NULL", [slot](S& s) { *slot(s) = nullptr; }, p.name, true});
  }
  return ch;
}

template <class S>
struct BufferArg {
  const char* name;
  std::function<void*(S&)> at;  // where the buffer starts
  Slot<S> slot;                 // outputs only: where the run writes it
};

// Every buffer a run writes placed at the start of each other buffer it touches, and a
// caller-owned workspace of 1 MiB at the start of each: all refused, naming the written one.
template <class S>
std::vector<Change<S>> written_over_every_other(const std::vector<BufferArg<S>>& bufs) {
  std::vector<Change<S>> ch;
  for (const BufferArg<S>& w : bufs) {
    if (!w.slot) continue;
    for (const BufferArg<S>& o : bufs) {
      if (&o == &w) continue;
      const Slot<S> slot = w.slot;
      auto at = o.at;
      ch.push_back({std::string(w.name) + " over " + o.name, [slot, at](S& s) { *slot(s) = at(s); }, w.name, true});
    }
  }
  for (const BufferArg<S>& o : bufs) {
    auto at = o.at;
    ch.push_back({std::string("workspace over ") + o.name, [at](S& s) {
                    s.desc.workspace = at(s);
                    s.desc.workspace_bytes = size_t(1) << 20;
                  }, "workspace", true});
  }
  return ch;
}

// A created plan's pointer and its name, for the checks below.
struct PointerField {
  const char* name;
  void** slot;
};

// Each pointer moved 1 to 3 bytes off its 4-byte alignment, one at a time, must be refused by a
// run (refused(): the run's message, after expecting its status) with a message that names it
// and says why; each is put back after.
template <class Refused>
void expect_misaligned_refused(const std::vector<PointerField>& fields, Refused refused) {
  for (const PointerField& f : fields)
    for (int shift : {1, 2, 3}) {
      void* const aligned = *f.slot;
      *f.slot = static_cast<char*>(aligned) + shift;
      const std::string why = refused();
      EXPECT_NE(why.find(f.name), std::string::npos) << f.name << " + " << shift << ": " << why;
      EXPECT_NE(why.find("aligned to 4 bytes"), std::string::npos) << why;
      *f.slot = aligned;
    }
}

}  // namespace dfsel::test
