// The C ABI: every entry point turns the library's Status into a dfsel_status and a message.
// No exception crosses it (each body runs inside guarded()); the library prints nothing and
// keeps no global state but the addresses of its live plans (host/plan/live_plans.h).
#include "host/api_support.h"
#include "host/backend/device_memory.h"
#include "host/plan/live_plans.h"
#include "host/plan/plan.h"
#include "host/plan/validate.h"
#include "kernels/common/numeric.cuh"

using dfsel::Status;
using dfsel::fail;

extern "C" {

const char* dfsel_status_string(dfsel_status status) {
  switch (status) {
    case DFSEL_SUCCESS: return "success";
    case DFSEL_INVALID_ARGUMENT: return "invalid argument";
    case DFSEL_UNSUPPORTED: return "unsupported";
    case DFSEL_OUT_OF_MEMORY: return "out of memory";
    case DFSEL_CUDA_ERROR: return "CUDA error";
    case DFSEL_NCCL_ERROR: return "NCCL error";
    case DFSEL_IO_ERROR: return "I/O error";
    case DFSEL_FORMAT_ERROR: return "malformed file";
    case DFSEL_NO_DEVICE: return "no CUDA device";
    case DFSEL_INTERNAL_ERROR: return "internal error";
    case DFSEL_TIMEOUT: return "timed out";
    case DFSEL_BUSY: return "the plan is in use by another call (one call at a time per plan)";
  }
  return "unknown status";
}

const char* dfsel_type_name(dfsel_type type) {
  switch (type) {
    case DFSEL_TYPE_F32: return "F32";
    case DFSEL_TYPE_F16: return "F16";
    case DFSEL_TYPE_BF16: return "BF16";
    case DFSEL_TYPE_Q8_0: return "Q8_0";
    case DFSEL_TYPE_Q4_0: return "Q4_0";
    case DFSEL_TYPE_Q4_1: return "Q4_1";
    case DFSEL_TYPE_Q5_0: return "Q5_0";
    case DFSEL_TYPE_Q5_1: return "Q5_1";
    case DFSEL_TYPE_Q2_K: return "Q2_K";
    case DFSEL_TYPE_Q3_K: return "Q3_K";
    case DFSEL_TYPE_Q4_K: return "Q4_K";
    case DFSEL_TYPE_Q5_K: return "Q5_K";
    case DFSEL_TYPE_Q6_K: return "Q6_K";
  }
  return "unknown type";
}

int dfsel_version(void) { return DFSEL_VERSION; }

dfsel_tensor dfsel_tensor_2d(const void* data, dfsel_type type, int64_t ne0, int64_t ne1, size_t nb1) {
  dfsel_tensor t{};
  t.data = data;
  t.type = type;
  t.ne[0] = ne0;
  t.ne[1] = ne1;
  t.ne[2] = t.ne[3] = 1;
  t.nb[0] = dfsel::type_block_bytes(type);
  t.nb[1] = nb1;
  t.nb[2] = t.nb[3] = nb1 * (size_t)(ne1 > 0 ? ne1 : 0);
  return t;
}

dfsel_status dfsel_cuda_device_count(int* count) {
  if (!count) return DFSEL_INVALID_ARGUMENT;
  *count = 0;
  dfsel::cuda_device_count(count);  // a build without CUDA, or no driver, counts 0 devices
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_workspace_size(const dfsel_plan_desc* desc, size_t* bytes, char* msg, size_t msg_len) {
  return dfsel::answer_in(msg, msg_len, "dfsel_workspace_size", [&]() -> Status {
    if (!bytes) return fail(DFSEL_INVALID_ARGUMENT, "bytes (the output pointer) is NULL");
    dfsel::PlanShape shape{};
    DFSEL_TRY(dfsel::validate_desc(desc, &shape));
    dfsel_backend kind = DFSEL_BACKEND_CPU;
    DFSEL_TRY(dfsel::resolve_backend(desc->backend, &kind));
    return dfsel::workspace_bytes(kind, *desc, shape, bytes);
  });
}

dfsel_status dfsel_plan_create(const dfsel_plan_desc* desc, dfsel_plan** plan, char* msg, size_t msg_len) {
  return dfsel::answer_in(msg, msg_len, "plan creation", [&] { return dfsel::create_plan(desc, plan); });
}

dfsel_status dfsel_plan_destroy(dfsel_plan* plan) { return dfsel::destroy_plan(plan); }

dfsel_backend dfsel_plan_backend(const dfsel_plan* plan) { return dfsel::plan_backend(plan); }

const char* dfsel_plan_last_error(const dfsel_plan* plan) { return dfsel::plan_last_error(plan); }

dfsel_status dfsel_plan_config(const dfsel_plan* plan, dfsel_config* config) {
  if (!plan || !config) return DFSEL_INVALID_ARGUMENT;
  const dfsel::LivePlansLock live;
  if (!live.is_live(plan, dfsel_plan::kKind)) return DFSEL_INVALID_ARGUMENT;
  *config = plan->desc.config;
  return DFSEL_SUCCESS;
}

dfsel_status dfsel_plan_check_memory(const dfsel_plan* plan, const void* data, const char* what, char* msg,
                                     size_t msg_len) {
  return dfsel::answer_in(msg, msg_len, "the memory check", [&]() -> Status {
    const char* name = what ? what : "data";
    if (!plan) return fail(DFSEL_INVALID_ARGUMENT, "plan is NULL");
    if (!data) return fail(DFSEL_INVALID_ARGUMENT, "%s is NULL", name);
    int device = 0;
    dfsel_backend backend = DFSEL_BACKEND_AUTO;
    {
      const dfsel::LivePlansLock live;
      if (!live.is_live(plan, dfsel_plan::kKind)) return fail(DFSEL_INVALID_ARGUMENT, "plan: %s", live.what_is(plan));
      device = plan->desc.device;
      backend = plan->desc.backend;
    }
    if (backend == DFSEL_BACKEND_CUDA) return dfsel::check_device_readable(data, device, name);
    return dfsel::check_host_readable(data, name);
  });
}

dfsel_status dfsel_run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                             void* const* streams) {
  return dfsel::call_on_plans(n, plans, "the run", [&] { return dfsel::run_group(n, plans, in, out, streams); });
}

dfsel_status dfsel_plan_run(dfsel_plan* plan, const dfsel_inputs* in, const dfsel_outputs* out, void* stream) {
  return dfsel::run_one_plan(plan, in, out, stream, dfsel_run_group);
}

dfsel_status dfsel_plan_check(dfsel_plan* plan, void* stream) {
  return dfsel_plan_wait(plan, stream, -1);
}

dfsel_status dfsel_plan_wait(dfsel_plan* plan, void* stream, int64_t timeout_ms) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  return dfsel::call_on_plans(1, &plan, "the wait", [&] { return dfsel::wait_plan(plan, stream, timeout_ms); });
}

}  // extern "C"
