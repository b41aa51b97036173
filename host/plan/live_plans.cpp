#include "host/plan/live_plans.h"

#include <pthread.h>

#include <new>
#include <unordered_map>

namespace dfsel {

namespace {

struct Registry {
  std::mutex mu;
  std::unordered_map<const void*, PlanKind> plans;
};

// Made on first use and never destroyed: a plan may be destroyed from another library's static
// destructor or at interpreter exit, after this library's statics would have been.
Registry& registry() {
  static Registry* const r = [] {
    Registry* made = new Registry();
    // Around fork(): no other thread can hold the lock when the child is copied.
    pthread_atfork([] { registry().mu.lock(); }, [] { registry().mu.unlock(); }, [] { registry().mu.unlock(); });
    return made;
  }();
  return *r;
}

}  // namespace

LivePlansLock::LivePlansLock() : lock_(registry().mu) {}
LivePlansLock::~LivePlansLock() = default;

bool LivePlansLock::is_live(const void* plan, PlanKind kind) const {
  const auto& plans = registry().plans;
  const auto it = plans.find(plan);
  return it != plans.end() && it->second == kind;
}

const char* LivePlansLock::what_is(const void* plan) const {
  const auto& plans = registry().plans;
  const auto it = plans.find(plan);
  if (it == plans.end()) return "not a live plan (destroyed, or never created)";
  return it->second == PlanKind::kDSpark ? "a DSpark plan (dfsel_dspark_plan)" : "a DFlash2 plan (dfsel_plan)";
}

void LivePlansLock::remove(const void* plan) { registry().plans.erase(plan); }

Status add_live_plan(const void* plan, PlanKind kind) {
  try {
    LivePlansLock lock;
    registry().plans[plan] = kind;
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "the plan could not be entered in the registry of live plans");
  }
  return Status::success();
}

void remove_live_plan(const void* plan) {
  LivePlansLock lock;
  lock.remove(plan);
}

}  // namespace dfsel
