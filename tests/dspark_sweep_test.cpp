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

struct Change {
  std::string what;
  std::function<void(Sweep&)> edit;
  const char* named;     // a refusal must name this (nullptr: any message)
  bool refused = false;  // a change no valid call makes: it must be refused
};

void sweep(const std::vector<Change>& changes) {
  for (const Change& ch : changes) {
    Sweep s;
    ch.edit(s);
    dfsel_status st;
    const std::string why = s.attempt(&st);
    if (ch.refused) EXPECT_NE(st, DFSEL_SUCCESS) << ch.what << " was accepted";
    if (st != DFSEL_SUCCESS && ch.named) EXPECT_NE(why.find(ch.named), std::string::npos) << ch.what << ": " << why;
  }
}

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
  sweep(ch);
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
  sweep(ch);
}

using Slot = std::function<const void**(Sweep&)>;

template <class T>
Slot output(T* dfsel_dspark_outputs::*f) {
  return [f](Sweep& s) { return const_cast<const void**>(reinterpret_cast<void**>(&(s.out.*f))); };
}

// Every pointer the library dereferences, moved off its type's alignment (the buffers keep
// room for it), and NULL where it is required.
TEST(DSparkSweep, EveryPointerMisalignedOrNull) {
  const struct {
    const char* name;
    Slot slot;
    bool required;
  } ptrs[] = {
      {"w1", [](Sweep& s) { return &s.desc.w1.data; }, true},
      {"w2", [](Sweep& s) { return &s.desc.w2.data; }, true},
      {"w2_scale", [](Sweep& s) { return &s.desc.w2_scale.data; }, false},
      {"conf_w", [](Sweep& s) { return &s.desc.conf_w.data; }, false},
      {"d2t", [](Sweep& s) { return reinterpret_cast<const void**>(&s.desc.d2t); }, false},
      {"inputs.logits", [](Sweep& s) { return &s.in.logits.data; }, true},
      {"inputs.hidden", [](Sweep& s) { return &s.in.hidden.data; }, true},
      {"inputs.anchors", [](Sweep& s) { return reinterpret_cast<const void**>(&s.in.anchors); }, true},
      {"outputs.tokens", output(&dfsel_dspark_outputs::tokens), true},
      {"outputs.n_emitted", output(&dfsel_dspark_outputs::n_emitted), true},
      {"outputs.draft_ids", output(&dfsel_dspark_outputs::draft_ids), false},
      {"outputs.logits", output(&dfsel_dspark_outputs::logits), false},
      {"outputs.probs", output(&dfsel_dspark_outputs::probs), false},
      {"outputs.log_norm", output(&dfsel_dspark_outputs::log_norm), false},
      {"outputs.confidence", output(&dfsel_dspark_outputs::confidence), false},
  };
  std::vector<Change> ch;
  for (const auto& p : ptrs) {
    for (int shift : {1, 2, 3}) {  // every buffer here holds F32 or int32: 4-byte aligned
      const Slot slot = p.slot;
      ch.push_back({std::string(p.name) + " + " + std::to_string(shift), [slot, shift](Sweep& s) {
                      const void** q = slot(s);
                      *q = static_cast<const char*>(*q) + shift;
                    }, p.name, true});
    }
    const Slot slot = p.slot;
    if (p.required) ch.push_back({std::string(p.name) + " NULL", [slot](Sweep& s) { *slot(s) = nullptr; }, p.name, true});
  }
  sweep(ch);
}

// Every buffer a run writes placed at the start of each other buffer it touches, and a
// caller-owned workspace over each weight, input and output.
TEST(DSparkSweep, EveryWrittenBufferOverEveryOther) {
  struct Buf {
    const char* name;
    std::function<void*(Sweep&)> at;
    Slot slot;  // outputs only: where the run writes it
  };
  const std::vector<Buf> bufs = {
      {"outputs.tokens", [](Sweep& s) { return (void*)s.out.tokens; }, output(&dfsel_dspark_outputs::tokens)},
      {"outputs.n_emitted", [](Sweep& s) { return (void*)s.out.n_emitted; }, output(&dfsel_dspark_outputs::n_emitted)},
      {"outputs.draft_ids", [](Sweep& s) { return (void*)s.out.draft_ids; }, output(&dfsel_dspark_outputs::draft_ids)},
      {"outputs.logits", [](Sweep& s) { return (void*)s.out.logits; }, output(&dfsel_dspark_outputs::logits)},
      {"outputs.probs", [](Sweep& s) { return (void*)s.out.probs; }, output(&dfsel_dspark_outputs::probs)},
      {"outputs.log_norm", [](Sweep& s) { return (void*)s.out.log_norm; }, output(&dfsel_dspark_outputs::log_norm)},
      {"outputs.confidence", [](Sweep& s) { return (void*)s.out.confidence; }, output(&dfsel_dspark_outputs::confidence)},
      {"inputs.logits", [](Sweep& s) { return const_cast<void*>(s.in.logits.data); }, nullptr},
      {"inputs.hidden", [](Sweep& s) { return const_cast<void*>(s.in.hidden.data); }, nullptr},
      {"inputs.anchors", [](Sweep& s) { return (void*)s.in.anchors; }, nullptr},
      {"w1", [](Sweep& s) { return const_cast<void*>(s.desc.w1.data); }, nullptr},
      {"w2", [](Sweep& s) { return const_cast<void*>(s.desc.w2.data); }, nullptr},
      {"w2_scale", [](Sweep& s) { return const_cast<void*>(s.desc.w2_scale.data); }, nullptr},
      {"conf_w", [](Sweep& s) { return const_cast<void*>(s.desc.conf_w.data); }, nullptr},
      {"d2t", [](Sweep& s) { return (void*)s.desc.d2t; }, nullptr},
  };
  std::vector<Change> ch;
  for (const Buf& w : bufs) {
    if (!w.slot) continue;
    for (const Buf& o : bufs) {
      if (&o == &w) continue;
      const Slot slot = w.slot;
      auto at = o.at;
      ch.push_back({std::string(w.name) + " over " + o.name, [slot, at](Sweep& s) { *slot(s) = at(s); }, w.name, true});
    }
  }
  for (const Buf& o : bufs) {  // the workspace claims 1 MiB from the start of each buffer
    auto at = o.at;
    ch.push_back({std::string("workspace over ") + o.name, [at](Sweep& s) {
                    s.desc.workspace = at(s);
                    s.desc.workspace_bytes = size_t(1) << 20;
                  }, "workspace", true});
  }
  sweep(ch);
}

}  // namespace
}  // namespace dfsel::test
