// The plans alive in this process, by address and kind, so that a handle that is not a live
// plan of the kind a call expects (one already destroyed, a DSpark plan given to a dfsel_plan
// call, or the reverse) is refused with DFSEL_INVALID_ARGUMENT before anything reads it. The
// one piece of process-wide state the library keeps: addresses only, added at creation,
// removed at destruction, looked up once per call under one lock (a hash lookup; a call
// already spends more than that claiming its plans).
//
// What it cannot tell: an address that a destroyed plan had and a new plan of the same kind
// has since been given (the new plan answers), and memory that is not a plan at all but
// happens to sit at a live plan's address (impossible without a write through a stale pointer).
//
// A fork()ed child inherits the registry with the parent's plans in it; the lock is taken
// around fork (pthread_atfork), so the child never finds it held by a thread it does not have.
#pragma once

#include <mutex>

#include "host/status.h"

namespace dfsel {

enum class PlanKind : int { kSelector = 1, kDSpark = 2 };

// The registry's lock, held while a call looks its plans up and claims them, or while a
// destruction takes its plan out, so that no plan is freed between a lookup and its claim.
class LivePlansLock {
 public:
  LivePlansLock();
  ~LivePlansLock();
  LivePlansLock(const LivePlansLock&) = delete;
  LivePlansLock& operator=(const LivePlansLock&) = delete;

  // Whether plan is a live plan of kind; what it is otherwise, as a sentence for a message.
  bool is_live(const void* plan, PlanKind kind) const;
  const char* what_is(const void* plan) const;
  void remove(const void* plan);

 private:
  std::unique_lock<std::mutex> lock_;
};

// Adds a plan that creation has just made (DFSEL_OUT_OF_MEMORY when the entry cannot be
// stored), and takes out one whose creation then failed.
Status add_live_plan(const void* plan, PlanKind kind);
void remove_live_plan(const void* plan);

}  // namespace dfsel
