// One DSpark chain of the plans driven by this thread (docs/dspark.md, On shards): validate,
// then for every exchange of the run each plan sends its records, the exchange runs, and each
// plan receives every rank's; and the wait that reports what a run found.
#include <cstring>
#include <string>

#include "host/plan/dspark_plan.h"
#include "host/plan/exchange_round.h"
#include "host/plan/group_call.h"
#include "host/plan/validate.h"
#include "host/plan/wait_for_run.h"

namespace dfsel {

namespace {

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// The plans of one call must run one chain: one group (host/plan/group_call.h), drawing the
// same way on every rank.
Status check_chain(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in, RankSummary* all) {
  for (int i = 1; i < n; ++i)
    if (!same_bits(in[i].temperature, in[0].temperature) || !same_bits(in[i].p_min, in[0].p_min) || in[i].seed != in[0].seed)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs[%d] (temperature %g, p_min %g, seed %llu) differs from inputs[0] "
                  "(temperature %g, p_min %g, seed %llu); the ranks of a chain draw the same way", i, in[i].temperature,
                  in[i].p_min, (unsigned long long)in[i].seed, in[0].temperature, in[0].p_min,
                  (unsigned long long)in[0].seed);
  return check_one_group(n, plans, in, all);
}

}  // namespace

Status run_dspark_group(int n, dfsel_dspark_plan* const* plans, const dfsel_dspark_inputs* in,
                        const dfsel_dspark_outputs* out, void* const* streams) {
  DFSEL_TRY(check_group_call(n, plans, in, out));
  GroupScratch& sc = plans[0]->scratch;
  sc.size_for(n);  // allocates only the first time a group of n plans runs
  for (int i = 0; i < n; ++i) {
    Status s = validate_dspark_run(*plans[i], in[i], out[i]);
    if (!s.ok()) {
      if (n > 1) s.msg = "plans[" + std::to_string(i) + "]: " + s.msg;
      return s;
    }
  }
  if (n > 1) DFSEL_TRY(validate_dspark_group_aliasing(n, plans, in, out, sc.buffers.data()));
  DFSEL_TRY(check_chain(n, plans, in, sc.summaries.data()));
  auto stream_of = [&](int i) { return streams ? streams[i] : nullptr; };
  // A communicator that has reported an error would fail or hang the all-gathers: refuse first.
  for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->exchange->health());
  // The plans of the call on each plan's device share its L2 (the CUDA backend sizes what its
  // loads keep there by it).
  for (int i = 0; i < n; ++i) {
    const int device = plans[i]->backend->endpoint().device;
    int sharers = 0;
    for (int j = 0; j < n; ++j) sharers += device >= 0 && plans[j]->backend->endpoint().device == device;
    DFSEL_TRY(plans[i]->backend->begin(in[i], out[i], stream_of(i), sharers > 0 ? sharers : 1));
  }
  const DSparkShape& sh = plans[0]->shape;
  const size_t bytes = sh.layout_for(in[0].n_blocks).bytes;
  for (int32_t x = sh.first_exchange(); x <= sh.last_exchange(in[0].temperature > 0.0f); ++x) {
    for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->send(x, stream_of(i)));
    DFSEL_TRY(exchange_round(n, plans, streams, bytes, sc.order, sc.ranks));
    for (int i = 0; i < n; ++i) DFSEL_TRY(plans[i]->backend->receive(x, stream_of(i)));
  }
  return Status::success();
}

Status wait_dspark_plan(dfsel_dspark_plan* plan, void* stream, int64_t timeout_ms) {
  return wait_for_run(plan, stream, timeout_ms);
}

}  // namespace dfsel
