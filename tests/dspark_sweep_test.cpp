// tests/api_sweep_test.cpp for DSpark plans (dspark.h): one change at a time from a valid CPU
// chain with every optional part (a d2t map, one scale per row, a confidence head), over every
// integer at and past its limits, every enum and float, every pointer moved off its alignment
// or NULL, and every buffer a run writes placed over each other buffer it touches. Each change
// must give a chain whose outputs keep dspark.h's promises or a refusal whose message names the
// argument; nothing may crash or touch memory outside the buffers (the sanitizer build runs
// this too).
#include <gtest/gtest.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/abi_sweep.h"
#include "support/dspark_problem.h"

namespace dfsel::test {
namespace {

constexpr int kOutputs = 7;

// A valid chain whose buffers are large enough for every accepted change (max_blocks blocks of
// up to the rows the logits hold, room before and after each pointer).
struct Sweep {
  DSparkCase c;
  DSparkData d;
  DSparkRunOpts r;
  dfsel_dspark_plan_desc desc{};
  dfsel_dspark_inputs in{};
  dfsel_dspark_outputs out{};
  std::vector<int32_t> anchors, d2t, store[kOutputs];

  Sweep() {
    c.V = 200;
    c.V_target = 260;
    c.d2t = true;
    c.E = 24;
    c.R = 32;
    c.scale_rows = 2;
    c.blocks = 3;
    d = make_dspark_data(c, 21);
    desc = dspark_desc(c, d, r, 0);
    d2t.assign(d.d2t.begin(), d.d2t.end());
    d2t.resize(d2t.size() + 4, 0);
    desc.d2t = d2t.data();
    in = dspark_inputs(c, d, r, 0);
    anchors.assign(d.anchors.begin(), d.anchors.end());
    anchors.resize(anchors.size() + 4, 0);
    in.anchors = anchors.data();
    in.n_blocks = 2;
    in.temperature = 0.5f;
    // Room for every rows-a-block the logits can hold: n_blocks * N cells of at most 12 rows.
    out = dspark_outputs_over(store, c.blocks, (size_t)c.blocks * c.rows(), 4, 0);
  }

  // Creates and runs; "" after a chain that kept its promises, else the refusal's message.
  std::string attempt(dfsel_status* status) {
    dfsel_dspark_plan* plan = nullptr;
    char msg[512] = "";
    *status = dfsel_dspark_plan_create(&desc, &plan, msg, sizeof msg);
    if (*status != DFSEL_SUCCESS) {
      EXPECT_EQ(plan, nullptr);
      EXPECT_GT(std::strlen(msg), 0u);
      return msg;
    }
    *status = dfsel_dspark_plan_run(plan, &in, &out, nullptr);
    std::string why = dfsel_dspark_plan_last_error(plan);
    if (*status == DFSEL_SUCCESS) {
      EXPECT_TRUE(why.empty());
      const int32_t N = desc.config.n_draft;
      for (int32_t b = 0; b < in.n_blocks; ++b) {
        EXPECT_GE(out.n_emitted[b], 0);
        EXPECT_LE(out.n_emitted[b], N);
        for (int32_t k = 0; k < N; ++k) {
          const int32_t t = out.tokens[b * N + k];
          EXPECT_TRUE(k < out.n_emitted[b] ? (t >= 0 && t < desc.config.n_target_vocab) : t == -1) << t;
        }
      }
    } else {
      EXPECT_FALSE(why.empty());
    }
    dfsel_dspark_plan_destroy(plan);
    return why;
  }
};

using Change = dfsel::test::Change<Sweep>;

TEST(DSparkSweep, EveryIntegerAtAndPastItsLimits) {
  std::vector<Change> ch;
  for (int32_t v : {INT32_MIN, -1, 0, 1, 2, 3, 4, 5, 6, 7, 1023, 1024, 1025, INT32_MAX}) {
    ch.push_back({"markov_rank", [v](Sweep& s) { s.desc.config.markov_rank = v; }, nullptr});
    ch.push_back({"n_draft", [v](Sweep& s) { s.desc.config.n_draft = v; }, nullptr});
    ch.push_back({"sample_from_anchor", [v](Sweep& s) { s.desc.config.sample_from_anchor = v; }, nullptr});
    ch.push_back({"max_blocks", [v](Sweep& s) { s.desc.config.max_blocks = v; }, nullptr});
    ch.push_back({"shard.rank", [v](Sweep& s) { s.desc.shard.rank = v; }, "shard.rank"});
    ch.push_back({"shard.n_ranks", [v](Sweep& s) { s.desc.shard.n_ranks = v; }, nullptr});
    ch.push_back({"device", [v](Sweep& s) { s.desc.device = v; }, nullptr});
    ch.push_back({"inputs.n_blocks", [v](Sweep& s) { s.in.n_blocks = v; }, "n_blocks"});
    ch.push_back({"outputs.n_blocks", [v](Sweep& s) { s.out.n_blocks = v; }, "n_blocks"});
    ch.push_back({"inputs.anchors[0]", [v](Sweep& s) { s.anchors[0] = v; }, "anchors[0]"});
    ch.push_back({"d2t[5]", [v](Sweep& s) { s.d2t[5] = v; }, "d2t[5]"});
  }
  for (int32_t v : {INT32_MIN, -1, 0, 1, 2, 1025, INT32_MAX})  // not 1024: as many threads as that
    ch.push_back({"n_threads", [v](Sweep& s) { s.desc.n_threads = v; }, nullptr});
  for (int64_t v : {(int64_t)INT64_MIN, (int64_t)-1, (int64_t)0, (int64_t)1, (int64_t)199, (int64_t)200,
                    (int64_t)201, (int64_t)INT32_MAX, (int64_t)INT32_MAX + 1, (int64_t)INT64_MAX}) {
    ch.push_back({"n_vocab", [v](Sweep& s) { s.desc.config.n_vocab = v; }, nullptr});
    ch.push_back({"n_target_vocab", [v](Sweep& s) { s.desc.config.n_target_vocab = v; }, nullptr});
    ch.push_back({"n_embd", [v](Sweep& s) { s.desc.config.n_embd = v; }, nullptr});
    ch.push_back({"v_begin", [v](Sweep& s) { s.desc.shard.v_begin = v; }, nullptr});
    ch.push_back({"v_end", [v](Sweep& s) { s.desc.shard.v_end = v; }, nullptr});
    ch.push_back({"w2_scale.ne[0]", [v](Sweep& s) { s.desc.w2_scale.ne[0] = v; }, "w2_scale"});
    for (int axis = 0; axis < 4; ++axis) {
      ch.push_back({"w1.ne", [v, axis](Sweep& s) { s.desc.w1.ne[axis] = v; }, "w1"});
      ch.push_back({"conf_w.ne", [v, axis](Sweep& s) { s.desc.conf_w.ne[axis] = v; }, "conf_w"});
      ch.push_back({"inputs.logits.ne", [v, axis](Sweep& s) { s.in.logits.ne[axis] = v; }, "inputs.logits"});
    }
  }
  for (size_t v : {(size_t)0, (size_t)1, (size_t)2, (size_t)3, (size_t)4, (size_t)127, (size_t)129, SIZE_MAX / 2,
                   SIZE_MAX}) {
    ch.push_back({"w1.nb[0]", [v](Sweep& s) { s.desc.w1.nb[0] = v; }, "w1"});
    ch.push_back({"w2.nb[1]", [v](Sweep& s) { s.desc.w2.nb[1] = v; }, "w2"});
    ch.push_back({"inputs.hidden.nb[1]", [v](Sweep& s) { s.in.hidden.nb[1] = v; }, "inputs.hidden"});
    ch.push_back({"workspace_bytes", [v](Sweep& s) { s.desc.workspace_bytes = v; }, nullptr});
  }
  for (uint64_t v : {(uint64_t)0, (uint64_t)1, (uint64_t)UINT32_MAX, (uint64_t)UINT64_MAX})
    ch.push_back({"seed", [v](Sweep& s) { s.in.seed = v; }, nullptr});
  sweep<Sweep>(ch);
}

TEST(DSparkSweep, EveryEnumAndFloatWithAnyValue) {
  std::vector<Change> ch;
  for (int v : {-1, 0, 1, 2, 3, 6, 7, 8, 12, 14, 29, 30, 31, 77, INT_MAX}) {
    auto store = [v](void* e) { std::memcpy(e, &v, sizeof v); };
    ch.push_back({"backend", [store](Sweep& s) { store(&s.desc.backend); }, nullptr});
    ch.push_back({"placement", [store](Sweep& s) { store(&s.desc.placement); }, nullptr});
    ch.push_back({"w1.type", [store](Sweep& s) { store(&s.desc.w1.type); }, "w1"});
    ch.push_back({"w2.type", [store](Sweep& s) { store(&s.desc.w2.type); }, "w2"});
    ch.push_back({"w2_scale.type", [store](Sweep& s) { store(&s.desc.w2_scale.type); }, "w2_scale"});
    ch.push_back({"conf_w.type", [store](Sweep& s) { store(&s.desc.conf_w.type); }, "conf_w"});
    ch.push_back({"inputs.logits.type", [store](Sweep& s) { store(&s.in.logits.type); }, "inputs.logits"});
    ch.push_back({"inputs.hidden.type", [store](Sweep& s) { store(&s.in.hidden.type); }, "inputs.hidden"});
  }
  for (float v : {-INFINITY, -FLT_MAX, -1.0f, -0.0f, 0.0f, FLT_MIN, 0.5f, 1.0f, 2.0f, 1e30f, FLT_MAX, INFINITY, NAN}) {
    ch.push_back({"logit_scale", [v](Sweep& s) { s.desc.config.logit_scale = v; }, "logit_scale"});
    ch.push_back({"softcap", [v](Sweep& s) { s.desc.config.softcap = v; }, "softcap"});
    ch.push_back({"conf_bias", [v](Sweep& s) { s.desc.conf_bias = v; }, "conf_bias"});
    ch.push_back({"temperature", [v](Sweep& s) { s.in.temperature = v; }, "temperature"});
    ch.push_back({"p_min", [v](Sweep& s) { s.in.p_min = v; }, "p_min"});
  }
  sweep<Sweep>(ch);
}

// Every pointer the library dereferences, moved off its type's alignment (the buffers keep
// room for it), and NULL where it is required.
TEST(DSparkSweep, EveryPointerMisalignedOrNull) {
  auto out = [](auto f) { return output_slot<Sweep>(f); };
  sweep<Sweep>(misaligned_or_null<Sweep>({
      {"w1", [](Sweep& s) { return &s.desc.w1.data; }, true},
      {"w2", [](Sweep& s) { return &s.desc.w2.data; }, true},
      {"w2_scale", [](Sweep& s) { return &s.desc.w2_scale.data; }, false},
      {"conf_w", [](Sweep& s) { return &s.desc.conf_w.data; }, false},
      {"d2t", [](Sweep& s) { return reinterpret_cast<const void**>(&s.desc.d2t); }, false},
      {"inputs.logits", [](Sweep& s) { return &s.in.logits.data; }, true},
      {"inputs.hidden", [](Sweep& s) { return &s.in.hidden.data; }, true},
      {"inputs.anchors", [](Sweep& s) { return reinterpret_cast<const void**>(&s.in.anchors); }, true},
      {"outputs.tokens", out(&dfsel_dspark_outputs::tokens), true},
      {"outputs.n_emitted", out(&dfsel_dspark_outputs::n_emitted), true},
      {"outputs.draft_ids", out(&dfsel_dspark_outputs::draft_ids), false},
      {"outputs.logits", out(&dfsel_dspark_outputs::logits), false},
      {"outputs.probs", out(&dfsel_dspark_outputs::probs), false},
      {"outputs.log_norm", out(&dfsel_dspark_outputs::log_norm), false},
      {"outputs.confidence", out(&dfsel_dspark_outputs::confidence), false},
  }));
}

// Every buffer a run writes placed at the start of each other buffer it touches, and a
// caller-owned workspace over each weight, input and output.
TEST(DSparkSweep, EveryWrittenBufferOverEveryOther) {
  auto out = [](auto f) { return output_slot<Sweep>(f); };
  sweep<Sweep>(written_over_every_other<Sweep>({
      {"outputs.tokens", [](Sweep& s) { return (void*)s.out.tokens; }, out(&dfsel_dspark_outputs::tokens)},
      {"outputs.n_emitted", [](Sweep& s) { return (void*)s.out.n_emitted; }, out(&dfsel_dspark_outputs::n_emitted)},
      {"outputs.draft_ids", [](Sweep& s) { return (void*)s.out.draft_ids; }, out(&dfsel_dspark_outputs::draft_ids)},
      {"outputs.logits", [](Sweep& s) { return (void*)s.out.logits; }, out(&dfsel_dspark_outputs::logits)},
      {"outputs.probs", [](Sweep& s) { return (void*)s.out.probs; }, out(&dfsel_dspark_outputs::probs)},
      {"outputs.log_norm", [](Sweep& s) { return (void*)s.out.log_norm; }, out(&dfsel_dspark_outputs::log_norm)},
      {"outputs.confidence", [](Sweep& s) { return (void*)s.out.confidence; }, out(&dfsel_dspark_outputs::confidence)},
      {"inputs.logits", [](Sweep& s) { return const_cast<void*>(s.in.logits.data); }, nullptr},
      {"inputs.hidden", [](Sweep& s) { return const_cast<void*>(s.in.hidden.data); }, nullptr},
      {"inputs.anchors", [](Sweep& s) { return (void*)s.in.anchors; }, nullptr},
      {"w1", [](Sweep& s) { return const_cast<void*>(s.desc.w1.data); }, nullptr},
      {"w2", [](Sweep& s) { return const_cast<void*>(s.desc.w2.data); }, nullptr},
      {"w2_scale", [](Sweep& s) { return const_cast<void*>(s.desc.w2_scale.data); }, nullptr},
      {"conf_w", [](Sweep& s) { return const_cast<void*>(s.desc.conf_w.data); }, nullptr},
      {"d2t", [](Sweep& s) { return (void*)s.desc.d2t; }, nullptr},
  }));
}

}  // namespace
}  // namespace dfsel::test
