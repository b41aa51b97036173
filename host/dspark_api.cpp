// The C ABI of DSpark plans (include/dfsel/dspark.h): every entry point turns the library's
// Status into a dfsel_status and a message, runs guarded (no exception crosses it), and holds
// the plans it names for as long as it runs, as dfsel.h's calls do (host/api_support.h).
#include "dfsel/dspark.h"
#include "host/api_support.h"
#include "host/plan/dspark_plan.h"

using dfsel::Status;

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

dfsel_status dfsel_dspark_plan_destroy(dfsel_dspark_plan* plan) { return dfsel::destroy_plan(plan); }

dfsel_backend dfsel_dspark_plan_backend(const dfsel_dspark_plan* plan) {
  return plan ? plan->desc.backend : DFSEL_BACKEND_AUTO;
}

const char* dfsel_dspark_plan_last_error(const dfsel_dspark_plan* plan) {
  return plan ? plan->last_error.c_str() : "plan is NULL";
}

dfsel_status dfsel_dspark_run_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                    const dfsel_dspark_outputs* out, void* const* streams) {
  return dfsel::call_on_plans(n, plans, "the DSpark run", [&] { return dfsel::run_dspark_group(n, plans, in, out, streams); });
}

dfsel_status dfsel_dspark_plan_run(dfsel_dspark_plan* plan, const dfsel_dspark_inputs* in,
                                   const dfsel_dspark_outputs* out, void* stream) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  void* streams[1] = {stream};
  return dfsel_dspark_run_group(1, &plan, in, out, streams);
}

dfsel_status dfsel_dspark_plan_wait(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  return dfsel::call_on_plans(1, &plan, "the wait", [&] { return dfsel::wait_dspark_plan(plan, stream, timeout_ms); });
}

}  // extern "C"
