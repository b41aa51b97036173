// The C ABI of DSpark plans (include/dfsel/dspark.h): every entry point turns the library's
// Status into a dfsel_status and a message, runs guarded (no exception crosses it), and holds
// the plans it names for as long as it runs, as dfsel.h's calls do (host/api_support.h).
#include "dfsel/dspark.h"
#include "host/api_support.h"
#include "host/plan/dspark_plan.h"

extern "C" {

dfsel_status dfsel_dspark_workspace_size(const dfsel_dspark_plan_desc* desc, size_t* bytes, char* msg, size_t msg_len) {
  return dfsel::answer_in(msg, msg_len, "dfsel_dspark_workspace_size",
                          [&] { return dfsel::dspark_workspace_bytes(desc, bytes); });
}

dfsel_status dfsel_dspark_plan_create(const dfsel_dspark_plan_desc* desc, dfsel_dspark_plan** plan, char* msg,
                                      size_t msg_len) {
  return dfsel::answer_in(msg, msg_len, "DSpark plan creation", [&] { return dfsel::create_dspark_plan(desc, plan); });
}

dfsel_status dfsel_dspark_plan_destroy(dfsel_dspark_plan* plan) { return dfsel::destroy_plan(plan); }

dfsel_backend dfsel_dspark_plan_backend(const dfsel_dspark_plan* plan) { return dfsel::plan_backend(plan); }

const char* dfsel_dspark_plan_last_error(const dfsel_dspark_plan* plan) { return dfsel::plan_last_error(plan); }

dfsel_status dfsel_dspark_run_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                                    const dfsel_dspark_outputs* out, void* const* streams) {
  return dfsel::call_on_plans(n, plans, "the DSpark run", [&] { return dfsel::run_dspark_group(n, plans, in, out, streams); });
}

dfsel_status dfsel_dspark_plan_run(dfsel_dspark_plan* plan, const dfsel_dspark_inputs* in,
                                   const dfsel_dspark_outputs* out, void* stream) {
  return dfsel::run_one_plan(plan, in, out, stream, dfsel_dspark_run_group);
}

dfsel_status dfsel_dspark_plan_wait(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  return dfsel::call_on_plans(1, &plan, "the wait", [&] { return dfsel::wait_dspark_plan(plan, stream, timeout_ms); });
}

}  // extern "C"
