// Bytes as calls of the DSpark C API (include/dfsel/dspark.h): a group of 1 to 3 in-process
// ranks with any sizes, layout, weight and logits types, scale, confidence head, d2t, and runs
// with any anchors, temperature (subnormal to FLT_MAX, NaN, inf), p_min, seed and logits
// (planted values up to +-FLT_MAX), the ranks' inputs sometimes different, and d2t sometimes
// changed after creation. Every buffer is exactly the bytes it claims (one byte more is an
// AddressSanitizer report). The API must refuse what is wrong with a status and a message and
// never read out of bounds; a run it accepts must keep what the header promises of its outputs.
#include <fuzzer/FuzzedDataProvider.h>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "dfsel/dspark.h"
#include "kernels/common/numeric.cuh"

namespace {

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_dspark: %s\n", what);
  std::abort();
}

struct Buffers {
  std::vector<std::unique_ptr<uint8_t[]>> blocks;
  uint8_t* take(size_t n) {
    blocks.emplace_back(new uint8_t[n ? n : 1]);
    std::memset(blocks.back().get(), 0, n ? n : 1);
    return blocks.back().get();
  }
};

const dfsel_type kFloatTypes[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16};
const dfsel_type kWeightTypes[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};

float any_float(FuzzedDataProvider& in) {
  static const float kEdges[] = {0.0f, -0.0f, 1e-45f, 1e-38f, 1e-37f, 1e-30f, 0.01f, 0.5f, 1.0f, 2.0f, 1e30f, 1e37f,
                                 -1e37f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY, NAN};
  return in.ConsumeBool() ? in.PickValueInArray(kEdges) : in.ConsumeFloatingPoint<float>();
}

// A matrix {ne0, rows} of type t with exactly the bytes it claims, values from the input.
dfsel_tensor matrix(FuzzedDataProvider& in, Buffers& bufs, dfsel_type t, int64_t ne0, int64_t rows, bool wild) {
  const size_t rb = dfsel::row_bytes(t, ne0), n = rb * (size_t)rows;
  uint8_t* p = bufs.take(n);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t i = 0; i < ne0 && t != DFSEL_TYPE_Q8_0; ++i) {
      const float v = wild ? any_float(in) : (float)in.ConsumeIntegralInRange<int>(-64, 64) / 16.0f;
      uint8_t* at = p + (size_t)r * rb;
      if (t == DFSEL_TYPE_F32) std::memcpy(at + 4 * i, &v, 4);
      else {
        const uint16_t h = t == DFSEL_TYPE_F16 ? dfsel::float_to_f16(v) : dfsel::float_to_bf16(v);
        std::memcpy(at + 2 * i, &h, 2);
      }
    }
  if (t == DFSEL_TYPE_Q8_0) {
    const std::vector<uint8_t> b = in.ConsumeBytes<uint8_t>(n);
    if (!b.empty()) std::memcpy(p, b.data(), b.size());
  }
  dfsel_tensor m = dfsel_tensor_2d(p, t, ne0, rows, rb);
  return m;
}

void check_outputs(const dfsel_dspark_outputs& o, int32_t n_blocks, int32_t N, int64_t V_target, bool sampling) {
  for (int32_t b = 0; b < n_blocks; ++b) {
    const int32_t n = o.n_emitted[b];
    expect(n >= 0 && n <= N, "n_emitted outside [0, N]");
    for (int32_t k = 0; k < N; ++k) {
      const int32_t t = o.tokens[(size_t)b * N + k];
      expect(k < n ? t >= 0 && t < V_target : t == -1, "a token outside the target vocabulary, or not -1 after the end");
      if (sampling && k < n) {
        const float q = o.probs[(size_t)b * N + k];
        expect(q >= 0.0f && q <= 1.0f, "a probability outside [0, 1]");
      }
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Buffers bufs;
  const int S = in.ConsumeIntegralInRange<int>(1, 3);
  const int64_t V = in.ConsumeIntegralInRange<int64_t>(S, 200);
  const bool use_d2t = in.ConsumeBool();
  const int64_t V_target = use_d2t ? in.ConsumeIntegralInRange<int64_t>(1, 260) : V;
  const int32_t R = 32 * in.ConsumeIntegralInRange<int32_t>(1, 2);
  const int32_t N = in.ConsumeIntegralInRange<int32_t>(1, 5);
  const int32_t max_blocks = in.ConsumeIntegralInRange<int32_t>(1, 3);
  const int64_t E = in.ConsumeBool() ? in.ConsumeIntegralInRange<int64_t>(1, 40) : 0;
  const bool from_anchor = in.ConsumeBool();
  const int rows = from_anchor ? N : N + 1;
  const dfsel_type wt = in.PickValueInArray(kWeightTypes), lt = in.PickValueInArray(kFloatTypes);
  const bool sharded = !use_d2t && in.ConsumeBool();

  dfsel_dspark_config cfg{V, V_target, E, R, N, from_anchor ? 1 : 0, 0.0f, 0.0f, max_blocks};
  if (in.ConsumeBool()) cfg.logit_scale = any_float(in);
  if (in.ConsumeBool()) cfg.softcap = any_float(in);
  const dfsel_tensor w1_all = matrix(in, bufs, wt, R, V_target, false);
  std::vector<int64_t> bounds(S + 1, 0);
  for (int s = 0; s <= S; ++s) bounds[s] = (int64_t)s * V / S;  // V >= S: no rank is empty
  int32_t* d2t = nullptr;
  if (use_d2t) {
    d2t = reinterpret_cast<int32_t*>(bufs.take((size_t)V * 4));
    for (int64_t v = 0; v < V; ++v) d2t[v] = (int32_t)(v % V_target);
  }
  dfsel_tensor conf{};
  if (E > 0) conf = matrix(in, bufs, in.PickValueInArray(kFloatTypes), E + R, 1, false);

  std::vector<dfsel_dspark_plan*> plans(S, nullptr);
  std::vector<dfsel_dspark_inputs> ins(S);
  std::vector<dfsel_dspark_outputs> outs(S);
  const int32_t n_blocks = in.ConsumeIntegralInRange<int32_t>(1, max_blocks);
  const float temperature = in.ConsumeBool() ? any_float(in) : 0.0f;
  const float p_min = E > 0 && in.ConsumeBool() ? in.ConsumeFloatingPointInRange<float>(0.0f, 1.0f) : 0.0f;
  const uint64_t seed = in.ConsumeIntegral<uint64_t>();
  std::vector<int32_t> anchors(n_blocks);
  for (int32_t& a : anchors) a = in.ConsumeIntegralInRange<int32_t>(0, (int32_t)V_target - 1);
  const dfsel_tensor hidden_all =
      E > 0 ? matrix(in, bufs, in.PickValueInArray(kFloatTypes), E, (int64_t)n_blocks * rows, true) : dfsel_tensor{};
  const int differs = S > 1 && in.ConsumeBool() ? in.ConsumeIntegralInRange<int>(1, S - 1) : -1;

  bool created = true, anchor_differs = false;
  for (int s = 0; s < S && created; ++s) {
    const int64_t vb = bounds[s], ve = bounds[s + 1], vs = ve - vb;
    dfsel_dspark_plan_desc d{};
    d.config = cfg;
    d.shard = dfsel_shard{s, S, vb, ve};
    d.backend = DFSEL_BACKEND_CPU;
    d.placement = sharded ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
    d.w1 = w1_all;
    if (sharded) {
      d.w1.data = static_cast<const uint8_t*>(w1_all.data) + (size_t)vb * w1_all.nb[1];
      d.w1.ne[1] = vs;
    }
    d.w2 = matrix(in, bufs, wt, R, vs, false);
    d.conf_w = conf;
    d.d2t = d2t ? d2t + vb : nullptr;
    d.n_threads = 1;
    char msg[512] = "";
    const dfsel_status st = dfsel_dspark_plan_create(&d, &plans[s], msg, sizeof msg);
    expect(st == DFSEL_SUCCESS || msg[0] != '\0', "a refused plan without a message");
    if (st != DFSEL_SUCCESS) {
      created = false;
      break;
    }
    dfsel_dspark_inputs& x = ins[s];
    x.logits = matrix(in, bufs, lt, vs, (int64_t)n_blocks * rows, true);
    x.hidden = hidden_all;
    int32_t* a = reinterpret_cast<int32_t*>(bufs.take((size_t)n_blocks * 4));
    std::memcpy(a, anchors.data(), (size_t)n_blocks * 4);
    if (s == differs) {
      // Another anchor must fail the run; other hidden rows must when a row read differs (not
      // asserted: row 0 of a block without sample_from_anchor is not read).
      if (V_target > 1 && (in.ConsumeBool() || E == 0)) a[0] = (a[0] + 1) % (int32_t)V_target, anchor_differs = true;
      else if (E > 0) x.hidden = matrix(in, bufs, hidden_all.type, E, (int64_t)n_blocks * rows, true);
    }
    x.anchors = a;
    x.n_blocks = n_blocks;
    x.temperature = temperature;
    x.p_min = p_min;
    x.seed = seed;
    const size_t cells = (size_t)n_blocks * N;
    dfsel_dspark_outputs& o = outs[s];
    o.n_blocks = n_blocks;
    o.tokens = reinterpret_cast<int32_t*>(bufs.take(cells * 4));
    o.n_emitted = reinterpret_cast<int32_t*>(bufs.take((size_t)n_blocks * 4));
    o.draft_ids = reinterpret_cast<int32_t*>(bufs.take(cells * 4));
    o.logits = reinterpret_cast<float*>(bufs.take(cells * 4));
    o.probs = reinterpret_cast<float*>(bufs.take(cells * 4));
    o.log_norm = reinterpret_cast<float*>(bufs.take(cells * 4));
    o.confidence = E > 0 ? reinterpret_cast<float*>(bufs.take(cells * 4)) : nullptr;
  }
  if (created) {
    for (int round = 0; round < 2; ++round) {
      const dfsel_status st = dfsel_dspark_run_group(S, plans.data(), ins.data(), outs.data(), nullptr);
      const char* m = dfsel_dspark_plan_last_error(plans[0]);
      expect(st == DFSEL_SUCCESS ? m[0] == '\0' : m[0] != '\0', "a status and a message that disagree");
      if (st == DFSEL_SUCCESS) {
        expect(!anchor_differs, "ranks given different anchors ran");
        for (int s = 0; s < S; ++s) check_outputs(outs[s], n_blocks, N, V_target, temperature > 0.0f);
      }
      // d2t changed after creation, to any value: a run must check the entry it uses.
      if (!d2t || !in.ConsumeBool()) break;
      d2t[in.ConsumeIntegralInRange<int64_t>(0, V - 1)] = in.ConsumeIntegral<int32_t>();
    }
  }
  for (dfsel_dspark_plan* p : plans)
    if (p) dfsel_dspark_plan_destroy(p);
  return 0;
}
