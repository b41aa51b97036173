// The C ABI of DSpark plans (include/dfsel/dspark.h): every entry point turns the library's
// Status into a dfsel_status and a message, runs guarded (no exception crosses it), and holds
// the plans it names for as long as it runs (host/plan/plan_use.h).
#include "dfsel/dspark.h"
#include "host/api_support.h"
#include "host/plan/dspark_plan.h"
#include "host/plan/plan_use.h"

using dfsel::Status;

namespace {

// Runs f with plans[0..n) taken; the outcome is recorded in every plan named.
template <class F>
dfsel_status with_plans(int n, dfsel_dspark_plan* const* plans, const char* what, F f) {
  if (!plans || n < 1) return dfsel::guarded(what, f).code;
  // A refusal is not recorded in last_error, which belongs to the call holding the plan.
  Status s = dfsel::take_plans(n, plans);
  if (!s.ok()) return s.code;
  s = dfsel::guarded(what, f);
  for (int i = 0; i < n; ++i) dfsel::record(plans[i], s);
  dfsel::give_back_plans(n, plans);
  return s.code;
}

}  // namespace

extern "C" {

dfsel_status dfsel_dspark_workspace_size(const dfsel_dspark_plan_desc* desc, size_t* bytes, char* msg, size_t msg_len) {
  const Status s = dfsel::guarded("dfsel_dspark_workspace_size", [&] { return dfsel::dspark_workspace_bytes(desc, bytes); });
  dfsel::copy_msg(s, msg, msg_len);
  return s.code;
}

dfsel_status dfsel_dspark_plan_create(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** plan, char* msg,
                                      size_t msg_len) {
  const Status s = dfsel::guarded("DSpark plan creation", [&] { return dfsel::create_dspark_plan(desc, plan); });
  dfsel::copy_msg(s, msg, msg_len);
  return s.code;
}

dfsel_status dfsel_dspark_plan_destroy(dfsel_dspark_plan* plan) {
  if (!plan) return DFSEL_SUCCESS;
  if (!dfsel::take_plans(1, &plan).ok()) return DFSEL_INVALID_ARGUMENT;
  delete plan;
  return DFSEL_SUCCESS;
}

dfsel_backend dfsel_dspark_plan_backend(const dfsel_dspark_plan* plan) {
  return plan ? plan->desc.backend : DFSEL_BACKEND_AUTO;
}

const char* dfsel_dspark_plan_last_error(const dfsel_dspark_plan* plan) {
  if (!plan) return "plan is NULL";
  if (const char* refused = plan->refusal.load(std::memory_order_acquire)) return refused;
  return plan->last_error.c_str();
}

dfsel_status dfsel_dspark_run_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                    const dfsel_dspark_outputs* out, void* const* streams) {
  return with_plans(n, plans, "the DSpark run", [&] { return dfsel::run_dspark_group(n, plans, in, out, streams); });
}

dfsel_status dfsel_dspark_plan_run(dfsel_dspark_plan* plan, const dfsel_dspark_inputs* in,
                                   const dfsel_dspark_outputs* out, void* stream) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  void* streams[1] = {stream};
  return dfsel_dspark_run_group(1, &plan, in, out, streams);
}

dfsel_status dfsel_dspark_plan_wait(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  return with_plans(1, &plan, "the wait", [&] { return dfsel::wait_dspark_plan(plan, stream, timeout_ms); });
}

}  // extern "C"
