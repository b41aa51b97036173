// The C ABI: validation, backend choice, and the three-phase step (select, exchange, finish).
// Nothing here throws across the boundary, prints or keeps global state.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstring>
#include <new>
#include <thread>
#include <vector>

#include "host/backend/backend.h"
#include "host/plan/validate.h"

using dfsel::Status;
using dfsel::fail;

namespace {

void copy_msg(const Status& s, char* msg, size_t msg_len) {
  if (!msg || msg_len == 0) return;
  const size_t n = std::min(msg_len - 1, s.msg.size());
  std::memcpy(msg, s.msg.data(), n);
  msg[n] = '\0';
}

Status resolve_backend(dfsel_backend asked, dfsel_backend* out) {
  int n = 0;
  const Status cs = dfsel::cuda_device_count(&n);
  if (asked == DFSEL_BACKEND_CPU) {
    *out = DFSEL_BACKEND_CPU;
  } else if (asked == DFSEL_BACKEND_CUDA) {
    if (cs.code == DFSEL_UNSUPPORTED) return fail(DFSEL_UNSUPPORTED, "backend = CUDA but this build of dfsel has no CUDA backend");
    if (n == 0) return fail(DFSEL_NO_DEVICE, "backend = CUDA but no CUDA device is present (%s)", cs.msg.c_str());
    *out = DFSEL_BACKEND_CUDA;
  } else {
    *out = n > 0 ? DFSEL_BACKEND_CUDA : DFSEL_BACKEND_CPU;
  }
  return Status::success();
}

// The plan's own checks and set-up; NCCL plans then agree with their peers (nccl_setup).
Status create_local(const dfsel_plan_desc* desc, dfsel_plan* plan) {
  DFSEL_TRY(dfsel::validate_desc(desc, &plan->shape));
  plan->desc = *desc;
  DFSEL_TRY(resolve_backend(desc->backend, &plan->desc.backend));
  if (desc->e_prev.type == DFSEL_TYPE_Q4_K || desc->e_prev.type == DFSEL_TYPE_Q6_K || desc->w_h.type == DFSEL_TYPE_Q4_K ||
      desc->w_h.type == DFSEL_TYPE_Q6_K) {
    plan->widened.reset(new dfsel::WidenedWeights());
    DFSEL_TRY(dfsel::widen_kquant_weights(&plan->desc, plan->desc.backend == DFSEL_BACKEND_CUDA, plan->widened.get()));
    DFSEL_TRY(dfsel::validate_desc(&plan->desc, &plan->shape));
  }
  if (desc->nccl_comm && plan->desc.backend != DFSEL_BACKEND_CUDA)
    return fail(DFSEL_UNSUPPORTED, "nccl_comm is set but the CPU backend exchanges in process only; use the CUDA backend");
  if (plan->desc.backend == DFSEL_BACKEND_CUDA) return dfsel::make_cuda_backend(plan->desc, plan->shape, &plan->backend);
  return dfsel::make_cpu_backend(plan->desc, plan->shape, &plan->backend);
}

Status create(const dfsel_plan_desc* desc, dfsel_plan** out) {
  if (!out) return fail(DFSEL_INVALID_ARGUMENT, "plan (the output pointer) is NULL");
  *out = nullptr;
  std::unique_ptr<dfsel_plan> plan(new (std::nothrow) dfsel_plan());
  if (!plan) return fail(DFSEL_OUT_OF_MEMORY, "the plan object could not be allocated");
  const Status local = create_local(desc, plan.get());
  // Every rank of a communicator joins the set-up exchange, also one whose own checks failed.
  if (desc && desc->nccl_comm && dfsel::enum_value(desc->backend) != DFSEL_BACKEND_CPU)
    DFSEL_TRY(dfsel::nccl_setup(*desc, local, &plan->exchange));
  DFSEL_TRY(local);
  *out = plan.release();
  return Status::success();
}

// The plans of one step must describe one selector: same sizes, same placement, same kind.
Status check_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in) {
  const dfsel_plan& p0 = *plans[0];
  const bool nccl = p0.exchange != nullptr;
  for (int i = 0; i < n; ++i) {
    const dfsel_plan& p = *plans[i];
    if ((p.exchange != nullptr) != nccl)
      return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] %s an NCCL communicator but plans[0] %s", i,
                  p.exchange ? "has" : "has no", nccl ? "has" : "has none");
    if (p.backend->kind() != p0.backend->kind())
      return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] runs on another backend than plans[0]", i);
    if (p.shape.k != p0.shape.k || p.shape.R != p0.shape.R || p.shape.block_size != p0.shape.block_size ||
        p.shape.n_vocab != p0.shape.n_vocab || p.shape.sharded != p0.shape.sharded ||
        p.shape.cb_row_bytes != p0.shape.cb_row_bytes || p.shape.n_embd != p0.shape.n_embd)
      return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] has another config or placement than plans[0]", i);
    if (in[i].n_blocks != in[0].n_blocks)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d].n_blocks = %d differs from inputs[0].n_blocks = %d", i,
                  in[i].n_blocks, in[0].n_blocks);
  }
  if (nccl) return Status::success();
  // In-process exchange: the n plans are every rank of one group and their ranges tile [0, V).
  if (n != p0.desc.shard.n_ranks)
    return fail(DFSEL_INVALID_ARGUMENT, "%d plans given for a group of shard.n_ranks = %d without an NCCL communicator; "
                "pass every rank of the group", n, p0.desc.shard.n_ranks);
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<int> seen(n, 0);
  for (int i = 0; i < n; ++i) {
    const dfsel_shard& s = plans[i]->desc.shard;
    if (s.n_ranks != n) return fail(DFSEL_INVALID_ARGUMENT, "plans[%d].shard.n_ranks = %d, expected %d", i, s.n_ranks, n);
    if (seen[s.rank]++) return fail(DFSEL_INVALID_ARGUMENT, "two plans have shard.rank = %d", s.rank);
    ranges.emplace_back(s.v_begin, s.v_end);
  }
  std::sort(ranges.begin(), ranges.end());
  int64_t at = 0;
  for (const auto& r : ranges) {
    if (r.first != at)
      return fail(DFSEL_INVALID_ARGUMENT, "the shards' vocabulary ranges leave a %s at token %" PRId64,
                  r.first > at ? "gap" : "overlap", std::min(at, r.first));
    at = r.second;
  }
  if (at != p0.shape.n_vocab)
    return fail(DFSEL_INVALID_ARGUMENT, "the shards' vocabulary ranges end at %" PRId64 ", not at n_vocab = %" PRId64, at,
                p0.shape.n_vocab);
  return Status::success();
}

Status run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                 void* const* streams) {
  if (n < 1) return fail(DFSEL_INVALID_ARGUMENT, "n = %d plans; at least one is needed", n);
  if (!plans) return fail(DFSEL_INVALID_ARGUMENT, "plans is NULL");
  if (!in) return fail(DFSEL_INVALID_ARGUMENT, "inputs is NULL");
  if (!out) return fail(DFSEL_INVALID_ARGUMENT, "outputs is NULL");
  for (int i = 0; i < n; ++i) {
    if (!plans[i]) return fail(DFSEL_INVALID_ARGUMENT, "plans[%d] is NULL", i);
    Status s = dfsel::validate_run(*plans[i], &in[i], &out[i]);
    if (!s.ok()) {
      if (n > 1) s.msg = "plans[" + std::to_string(i) + "]: " + s.msg;
      return s;
    }
  }
  DFSEL_TRY(check_group(n, plans, in));
  // Order by rank so that the in-process exchange places each rank's records at its slot.
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return plans[a]->desc.shard.rank < plans[b]->desc.shard.rank; });
  auto stream_of = [&](int i) { return streams ? streams[i] : nullptr; };
  // A communicator that has reported an error would fail or hang the all-gather: refuse first.
  for (int i = 0; i < n; ++i)
    if (plans[i]->exchange) DFSEL_TRY(plans[i]->exchange->health());
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->select(in[i], stream_of(i)));
  const size_t bytes = plans[0]->shape.layout_for(in[0].n_blocks).bytes;
  if (plans[0]->exchange) {
    if (n > 1) DFSEL_TRY(dfsel::exchange_group_begin());
    for (int i = 0; i < n; ++i) {
      const Status s = plans[i]->exchange->all_gather(plans[i]->backend->send_buffer(), plans[i]->backend->recv_buffer(),
                                                      bytes, stream_of(i));
      if (!s.ok()) {
        if (n > 1) dfsel::exchange_group_end();
        return s;
      }
    }
    if (n > 1) DFSEL_TRY(dfsel::exchange_group_end());
  } else {
    std::vector<dfsel::Backend*> group(n);
    std::vector<void*> ordered_streams(n);
    for (int i = 0; i < n; ++i) {
      group[i] = plans[order[i]]->backend.get();
      ordered_streams[i] = stream_of(order[i]);
    }
    for (int i = 0; i < n; ++i)
      DFSEL_TRY(plans[i]->backend->local_exchange(group.data(), n, bytes, ordered_streams.data()));
  }
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->finish(in[i], out[i], stream_of(i)));
  return Status::success();
}

// dfsel_plan_wait: without a limit and without a communicator, the backend's blocking wait;
// otherwise polls the stream and the communicator until one finishes, fails or time runs out.
// Then what the run found on the device.
Status wait(dfsel_plan* plan, void* stream, int64_t timeout_ms) {
  using Clock = std::chrono::steady_clock;
  if (timeout_ms < 0 && !plan->exchange) {
    DFSEL_TRY(plan->backend->wait(stream));
  } else {
    const Clock::time_point start = Clock::now();
    for (int polls = 0;; ++polls) {
      bool done = false;
      DFSEL_TRY(plan->backend->query(stream, &done));
      if (done) break;
      if (plan->exchange) DFSEL_TRY(plan->exchange->health());
      const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - start).count();
      if (timeout_ms >= 0 && waited >= timeout_ms)
        return fail(DFSEL_TIMEOUT, "the plan's last run had not completed after %lld ms (timeout_ms = %lld)%s",
                    (long long)waited, (long long)timeout_ms,
                    plan->exchange ? "; if a peer rank has failed, abort the communicator and destroy the plan" : "");
      // A step takes tens of microseconds: spin briefly before sleeping between polls.
      if (polls < 64) std::this_thread::yield();
      else std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
  return plan->backend->report();
}

dfsel_status record(dfsel_plan* plan, const Status& s) {
  if (plan) plan->last_error = s.msg;
  return s.code;
}

}  // namespace

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
  }
  return "unknown status";
}

const char* dfsel_type_name(dfsel_type type) {
  switch (type) {
    case DFSEL_TYPE_F32: return "F32";
    case DFSEL_TYPE_F16: return "F16";
    case DFSEL_TYPE_BF16: return "BF16";
    case DFSEL_TYPE_Q8_0: return "Q8_0";
    case DFSEL_TYPE_Q4_K: return "Q4_K";
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
  Status s;
  dfsel::PlanShape shape{};
  if (!bytes) {
    s = fail(DFSEL_INVALID_ARGUMENT, "bytes (the output pointer) is NULL");
  } else if ((s = dfsel::validate_desc(desc, &shape)).ok()) {
    dfsel_backend kind = DFSEL_BACKEND_CPU;
    s = resolve_backend(desc->backend, &kind);
    if (s.ok()) s = dfsel::workspace_bytes(kind, *desc, shape, bytes);
  }
  copy_msg(s, msg, msg_len);
  return s.code;
}

dfsel_status dfsel_plan_create(const dfsel_plan_desc* desc, dfsel_plan** plan, char* msg, size_t msg_len) {
  Status s;
  try {
    s = create(desc, plan);
  } catch (const std::bad_alloc&) {
    s = fail(DFSEL_OUT_OF_MEMORY, "allocation failed while creating the plan");
  } catch (...) {
    s = fail(DFSEL_INTERNAL_ERROR, "unexpected exception while creating the plan");
  }
  copy_msg(s, msg, msg_len);
  return s.code;
}

dfsel_status dfsel_plan_destroy(dfsel_plan* plan) {
  delete plan;
  return DFSEL_SUCCESS;
}

dfsel_backend dfsel_plan_backend(const dfsel_plan* plan) {
  return plan ? plan->desc.backend : DFSEL_BACKEND_AUTO;
}

const char* dfsel_plan_last_error(const dfsel_plan* plan) {
  return plan ? plan->last_error.c_str() : "plan is NULL";
}

dfsel_status dfsel_run_group(int n, dfsel_plan* const* plans, const dfsel_inputs* in, const dfsel_outputs* out,
                             void* const* streams) {
  Status s;
  try {
    s = run_group(n, plans, in, out, streams);
  } catch (const std::bad_alloc&) {
    s = fail(DFSEL_OUT_OF_MEMORY, "allocation failed during the run");
  } catch (...) {
    s = fail(DFSEL_INTERNAL_ERROR, "unexpected exception during the run");
  }
  if (plans && n > 0)
    for (int i = 0; i < n; ++i) record(plans[i], s);
  return s.code;
}

dfsel_status dfsel_plan_run(dfsel_plan* plan, const dfsel_inputs* in, const dfsel_outputs* out, void* stream) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  void* streams[1] = {stream};
  return dfsel_run_group(1, &plan, in, out, streams);
}

dfsel_status dfsel_plan_check(dfsel_plan* plan, void* stream) {
  return dfsel_plan_wait(plan, stream, -1);
}

dfsel_status dfsel_plan_wait(dfsel_plan* plan, void* stream, int64_t timeout_ms) {
  if (!plan) return DFSEL_INVALID_ARGUMENT;
  return record(plan, wait(plan, stream, timeout_ms));
}

}  // extern "C"
