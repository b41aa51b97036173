// A sweep of the C ABI over every argument a call takes, one change at a time from a valid CPU
// problem: types (any int in an enum), ranges (each integer at and past its limits), alignment
// (each pointer moved off its type's alignment), aliasing (each buffer a run writes placed over
// each other buffer it touches) and sizes against the plan. Each change must give either a run
// whose outputs keep dfsel.h's promises or a refusal whose message names the argument; nothing
// may crash or touch memory outside the buffers (the sanitizer build runs this too). Calls
// from several threads are tests/thread_plan_test.cpp.
#include <gtest/gtest.h>

#include <cfloat>
#include <climits>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "support/abi_sweep.h"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr int64_t kI64Max = INT64_MAX;

// A valid problem whose buffers are large enough for every accepted change (max_blocks
// blocks, room before and after each pointer).
struct Sweep {
  Case c;
  Data d;
  dfsel_plan_desc desc{};
  dfsel_inputs in{};
  dfsel_outputs out{};
  std::vector<int32_t> anchors, store[7];

  Sweep() {
    c.V = 200;
    c.E = 96;
    c.blocks = 3;
    d = make_data(c, 9);
    desc = cpu_desc(c, d, 0, 1, 0, c.V);
    const int64_t n_tokens = (int64_t)c.blocks * c.block;
    in = cpu_inputs(c, d);
    anchors.assign(d.anchors.begin(), d.anchors.end());
    anchors.resize(anchors.size() + 4, 0);
    in.anchors = anchors.data();
    in.n_blocks = 2;
    in.temperature = 0.5f;
    // Room for K up to 64: a change of top_k alone makes the run write that many candidates.
    const size_t nd = (size_t)c.blocks * (c.block - 1), k = 64;
    const size_t counts[7] = {nd * k, nd * k, nd * k * k, nd * k, nd, (size_t)c.blocks, (size_t)n_tokens * c.E};
    for (int i = 0; i < 7; ++i) store[i].assign(counts[i] + 4, 0);
    out.cand_ids = store[0].data();
    out.unary = reinterpret_cast<float*>(store[1].data());
    out.scores = reinterpret_cast<float*>(store[2].data());
    out.q = reinterpret_cast<float*>(store[3].data());
    out.path = store[4].data();
    out.n_emitted = store[5].data();
    out.packed = reinterpret_cast<float*>(store[6].data());
  }

  // Creates and runs; "" after a run that kept its promises, else the refusal's message.
  // A refusal must carry a message; a success must leave sane outputs.
  std::string attempt(dfsel_status* status) {
    dfsel_plan* plan = nullptr;
    char msg[512] = "";
    *status = dfsel_plan_create(&desc, &plan, msg, sizeof msg);
    if (*status != DFSEL_SUCCESS) {
      EXPECT_EQ(plan, nullptr);
      EXPECT_GT(std::strlen(msg), 0u);
      return msg;
    }
    *status = dfsel_plan_run(plan, &in, &out, nullptr);
    std::string why = dfsel_plan_last_error(plan);
    if (*status == DFSEL_SUCCESS) {
      EXPECT_TRUE(why.empty());
      const int32_t L = desc.config.block_size - 1;
      for (int32_t b = 0; b < in.n_blocks; ++b) {
        EXPECT_GE(out.n_emitted[b], 0);
        EXPECT_LE(out.n_emitted[b], L);
        for (int32_t p = 0; p < L; ++p) {
          const int32_t t = out.path[b * L + p];
          EXPECT_TRUE(p < out.n_emitted[b] ? (t >= 0 && t < desc.config.n_vocab) : t == -1) << t;
        }
      }
    } else {
      EXPECT_FALSE(why.empty());
    }
    dfsel_plan_destroy(plan);
    return why;
  }
};

using Change = dfsel::test::Change<Sweep>;

TEST(ApiSweep, EveryIntegerAtAndPastItsLimits) {
  std::vector<Change> ch;
  auto i32 = {INT32_MIN, -1, 0, 1, 2, 63, 64, 65, 1023, 1024, 1025, INT32_MAX};
  auto i64 = {(int64_t)INT64_MIN, (int64_t)-1, (int64_t)0, (int64_t)1, (int64_t)199, (int64_t)200, (int64_t)201,
              (int64_t)INT32_MAX, (int64_t)INT32_MAX + 1, kI64Max};
  for (int32_t v : i32) {
    ch.push_back({"top_k", [v](Sweep& s) { s.desc.config.top_k = v; }, nullptr});
    ch.push_back({"codebook_rank", [v](Sweep& s) { s.desc.config.codebook_rank = v; }, nullptr});
    ch.push_back({"block_size", [v](Sweep& s) { s.desc.config.block_size = v; }, nullptr});
    ch.push_back({"max_blocks", [v](Sweep& s) { s.desc.config.max_blocks = v; }, nullptr});
    ch.push_back({"shard.rank", [v](Sweep& s) { s.desc.shard.rank = v; }, "shard.rank"});
    ch.push_back({"shard.n_ranks", [v](Sweep& s) { s.desc.shard.n_ranks = v; }, nullptr});
    ch.push_back({"device", [v](Sweep& s) { s.desc.device = v; }, nullptr});
    ch.push_back({"inputs.n_blocks", [v](Sweep& s) { s.in.n_blocks = v; }, "n_blocks"});
    ch.push_back({"inputs.anchors[0]", [v](Sweep& s) { s.anchors[0] = v; }, "anchors[0]"});
  }
  for (int32_t v : {INT32_MIN, -1, 0, 1, 2, 1025, INT32_MAX})  // not 1024: as many threads as that
    ch.push_back({"n_threads", [v](Sweep& s) { s.desc.n_threads = v; }, nullptr});
  for (int64_t v : i64) {
    ch.push_back({"n_vocab", [v](Sweep& s) { s.desc.config.n_vocab = v; }, nullptr});
    ch.push_back({"n_embd", [v](Sweep& s) { s.desc.config.n_embd = v; }, nullptr});
    ch.push_back({"v_begin", [v](Sweep& s) { s.desc.shard.v_begin = v; }, nullptr});
    ch.push_back({"v_end", [v](Sweep& s) { s.desc.shard.v_end = v; }, nullptr});
    for (int axis = 0; axis < 4; ++axis) {
      ch.push_back({"e_prev.ne", [v, axis](Sweep& s) { s.desc.e_prev.ne[axis] = v; }, "e_prev"});
      ch.push_back({"inputs.logits.ne", [v, axis](Sweep& s) { s.in.logits.ne[axis] = v; }, "inputs.logits"});
    }
  }
  for (size_t v : {(size_t)0, (size_t)1, (size_t)2, (size_t)3, (size_t)4, (size_t)799, (size_t)801, SIZE_MAX / 2,
                   SIZE_MAX}) {
    ch.push_back({"e_next.nb[0]", [v](Sweep& s) { s.desc.e_next.nb[0] = v; }, "e_next"});
    ch.push_back({"w_h.nb[1]", [v](Sweep& s) { s.desc.w_h.nb[1] = v; }, "w_h"});
    ch.push_back({"inputs.hidden.nb[1]", [v](Sweep& s) { s.in.hidden.nb[1] = v; }, "inputs.hidden"});
    ch.push_back({"outputs.packed_row_stride", [v](Sweep& s) { s.out.packed_row_stride = v; }, "packed_row_stride"});
    ch.push_back({"workspace_bytes", [v](Sweep& s) { s.desc.workspace_bytes = v; }, nullptr});
  }
  sweep<Sweep>(ch);
}

TEST(ApiSweep, EveryEnumAndFloatWithAnyValue) {
  std::vector<Change> ch;
  for (int v : {-1, 0, 1, 2, 3, 6, 7, 8, 12, 14, 29, 30, 31, 77, INT_MAX}) {
    auto store = [v](void* e) { std::memcpy(e, &v, sizeof v); };
    ch.push_back({"backend", [store](Sweep& s) { store(&s.desc.backend); }, nullptr});
    ch.push_back({"placement", [store](Sweep& s) { store(&s.desc.placement); }, nullptr});
    ch.push_back({"e_prev.type", [store](Sweep& s) { store(&s.desc.e_prev.type); }, "e_prev"});
    ch.push_back({"w_h.type", [store](Sweep& s) { store(&s.desc.w_h.type); }, "w_h"});
    ch.push_back({"inputs.logits.type", [store](Sweep& s) { store(&s.in.logits.type); }, "inputs.logits"});
    ch.push_back({"inputs.hidden.type", [store](Sweep& s) { store(&s.in.hidden.type); }, "inputs.hidden"});
  }
  for (float v : {-INFINITY, -FLT_MAX, -1.0f, -0.0f, 0.0f, FLT_MIN, 0.5f, 1.0f, 2.0f, 1e30f, FLT_MAX, INFINITY, NAN}) {
    ch.push_back({"logit_scale", [v](Sweep& s) { s.desc.config.logit_scale = v; }, "logit_scale"});
    ch.push_back({"softcap", [v](Sweep& s) { s.desc.config.softcap = v; }, "softcap"});
    ch.push_back({"temperature", [v](Sweep& s) { s.in.temperature = v; }, "temperature"});
    ch.push_back({"p_min", [v](Sweep& s) { s.in.p_min = v; }, "p_min"});
  }
  sweep<Sweep>(ch);
}

// Every pointer the library dereferences, moved off its type's alignment (the buffers keep
// room for it), and NULL.
TEST(ApiSweep, EveryPointerMisalignedOrNull) {
  auto out = [](auto f) { return output_slot<Sweep>(f); };
  sweep<Sweep>(misaligned_or_null<Sweep>({
      {"e_prev", [](Sweep& s) { return &s.desc.e_prev.data; }, true},
      {"e_next", [](Sweep& s) { return &s.desc.e_next.data; }, true},
      {"w_h", [](Sweep& s) { return &s.desc.w_h.data; }, true},
      {"inputs.logits", [](Sweep& s) { return &s.in.logits.data; }, true},
      {"inputs.hidden", [](Sweep& s) { return &s.in.hidden.data; }, true},
      {"inputs.anchors", [](Sweep& s) { return reinterpret_cast<const void**>(&s.in.anchors); }, true},
      {"outputs.cand_ids", out(&dfsel_outputs::cand_ids), false},
      {"outputs.unary", out(&dfsel_outputs::unary), false},
      {"outputs.scores", out(&dfsel_outputs::scores), false},
      {"outputs.q", out(&dfsel_outputs::q), false},
      {"outputs.path", out(&dfsel_outputs::path), true},
      {"outputs.n_emitted", out(&dfsel_outputs::n_emitted), true},
      {"outputs.packed", out(&dfsel_outputs::packed), false},
  }));
}

// Every buffer a run writes placed at the start of each other buffer it touches, and a
// caller-owned workspace over each weight and input.
TEST(ApiSweep, EveryWrittenBufferOverEveryOther) {
  auto out = [](auto f) { return output_slot<Sweep>(f); };
  sweep<Sweep>(written_over_every_other<Sweep>({
      {"outputs.cand_ids", [](Sweep& s) { return (void*)s.out.cand_ids; }, out(&dfsel_outputs::cand_ids)},
      {"outputs.unary", [](Sweep& s) { return (void*)s.out.unary; }, out(&dfsel_outputs::unary)},
      {"outputs.scores", [](Sweep& s) { return (void*)s.out.scores; }, out(&dfsel_outputs::scores)},
      {"outputs.q", [](Sweep& s) { return (void*)s.out.q; }, out(&dfsel_outputs::q)},
      {"outputs.path", [](Sweep& s) { return (void*)s.out.path; }, out(&dfsel_outputs::path)},
      {"outputs.n_emitted", [](Sweep& s) { return (void*)s.out.n_emitted; }, out(&dfsel_outputs::n_emitted)},
      {"outputs.packed", [](Sweep& s) { return (void*)s.out.packed; }, out(&dfsel_outputs::packed)},
      {"inputs.logits", [](Sweep& s) { return const_cast<void*>(s.in.logits.data); }, nullptr},
      {"inputs.hidden", [](Sweep& s) { return const_cast<void*>(s.in.hidden.data); }, nullptr},
      {"inputs.anchors", [](Sweep& s) { return (void*)s.in.anchors; }, nullptr},
      {"e_prev", [](Sweep& s) { return const_cast<void*>(s.desc.e_prev.data); }, nullptr},
      {"e_next", [](Sweep& s) { return const_cast<void*>(s.desc.e_next.data); }, nullptr},
      {"w_h", [](Sweep& s) { return const_cast<void*>(s.desc.w_h.data); }, nullptr},
  }));
}

}  // namespace
}  // namespace dfsel::test
