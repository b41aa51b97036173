// dfsel between graph computes on ggml-cuda, against llama.cpp's in-graph selector computed by
// ggml-cuda on the same tensors (docs/ggml.md, "On ggml-cuda"). A draft graph (t_embd, the lm_head
// product, the logit scale and softcap) and the in-graph selector run as one ggml-cuda graph;
// then dfsel_ggml_run reads that graph's t_logits (or, for the softcap cases, the raw product
// with the transform in the plan) and t_embd in place, with the codebooks as ggml loaded them
// from a GGUF into a ggml-cuda buffer, and writes its packed rows, path and n_emitted into
// ggml-cuda tensors. Checked per drafted row:
// - candidates: dfsel's are the exact top-K by (value, id); the peer's the same set but for ids
//   at a tie of the K-th value;
// - scores: dfsel's within 1e-5 of the row's largest |score| of a float64 oracle on what dfsel
//   reads (widened types rounded to BF16 as plan creation widens them); the peer's, matched by
//   id, within the peer's own rounding: ggml-cuda's products at these sizes run on tensor cores
//   (TF32 operands in the lattice's F32 product, BF16 or TF32 hidden states in the gate), 2^-8
//   of the row (packed_compare.h), the worst difference printed;
// - walks: the greedy walks of both sets of rows equal but past a near-tie within that tolerance
//   (counted); dfsel's own path equal to the walk of its rows (with p_min: stopping where the
//   chosen probability is below p_min, near-threshold steps counted).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <unistd.h>

#include "dfsel/ggml.h"
#include "ggml/ggml_support.h"
#include "ggml/packed_compare.h"
#include "ggml_cuda/cuda_draft.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

struct InGraphCase {
  const char* name;
  DraftShape s;
  bool raw;  // dfsel reads the raw product z with the plan's scale and softcap, not t_logits
  float p_min;
};

void PrintTo(const InGraphCase& c, std::ostream* os) { *os << c.name; }

// Row r of a host tensor as dfsel reads it: ggml's decoding, rounded to BF16 for the types
// plan creation widens.
std::vector<double> read_row(const ggml_tensor* t, int64_t r, bool as_dfsel) {
  std::vector<float> f = ggml_row_to_float(t, r);
  std::vector<double> out(f.size());
  for (size_t i = 0; i < f.size(); ++i) {
    float v = f[i];
    if (as_dfsel && widened_by_dfsel(t->type)) v = ggml_bf16_to_fp32(ggml_fp32_to_bf16(v));
    out[i] = v;
  }
  return out;
}

class GgmlCudaInGraph : public ::testing::TestWithParam<InGraphCase> {};

TEST_P(GgmlCudaInGraph, DfselEqualsTheInGraphSelector) {
  DFSEL_REQUIRE_GPUS(1);
  const InGraphCase& c = GetParam();
  const DraftShape& s = c.s;
  const std::vector<ggml_backend_dev_t> gpus = ggml_gpu_devices();
  ASSERT_FALSE(gpus.empty()) << "ggml lists no GPU device though CUDA sees one";
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(std::string(c.name) + ", seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  ggml_backend_t backend = ggml_backend_dev_init(gpus[0], nullptr);
  ASSERT_NE(nullptr, backend);
  std::unique_ptr<ggml_backend, void (*)(ggml_backend_t)> keep_backend(backend, ggml_backend_free);
  ggml_backend_buffer_type_t buft = ggml_backend_dev_buffer_type(gpus[0]);

  DraftWeights w;
  const std::string gguf = "/tmp/dfsel-ggml-cuda-" + std::to_string(getpid()) + "-" + c.name + ".gguf";
  ASSERT_EQ("", w.make(s, buft, rng, gguf));
  DraftGraph g;
  ASSERT_EQ("", g.make(s, w, buft, rng(), /*with_peer=*/true));
  ASSERT_EQ(GGML_STATUS_SUCCESS, ggml_backend_graph_compute(backend, g.graph));

  // dfsel between graph computes: the graph's tensors in place, its outputs in ggml-cuda tensors.
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{s.V, s.E, s.R, s.K, s.block, c.raw ? s.scale : 1.0f, c.raw ? s.softcap : 0.0f, s.blocks};
  desc.shard = dfsel_shard{0, 1, 0, s.V};
  desc.backend = DFSEL_BACKEND_CUDA;
  char msg[512] = "";
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(w.e_prev, &desc.e_prev, msg, sizeof msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(w.e_next, &desc.e_next, msg, sizeof msg)) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_ggml_tensor(w.w_h, &desc.w_h, msg, sizeof msg)) << msg;
  dfsel_plan* plan = nullptr;
  ASSERT_EQ(DFSEL_SUCCESS, dfsel_plan_create(&desc, &plan, msg, sizeof msg)) << msg;
  std::unique_ptr<dfsel_plan, dfsel_status (*)(dfsel_plan*)> keep_plan(plan, dfsel_plan_destroy);
  DfselOutputs o;
  ASSERT_EQ("", o.make(s, g.anchors, buft));
  o.poison();
  cudaStream_t stream = nullptr;
  CUDA_OK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  dfsel_ggml_step step{};
  step.logits = c.raw ? g.z : g.logits;
  step.hidden = g.embd;
  step.anchors = o.anchors;
  step.packed = o.packed;
  step.path = o.path;
  step.n_emitted = o.n_emitted;
  step.p_min = c.p_min;
  const dfsel_status ran = dfsel_ggml_run(plan, &step, stream, msg, sizeof msg);
  const dfsel_status checked = ran == DFSEL_SUCCESS ? dfsel_plan_check(plan, stream) : ran;
  cudaStreamDestroy(stream);
  ASSERT_EQ(DFSEL_SUCCESS, ran) << msg;
  ASSERT_EQ(DFSEL_SUCCESS, checked) << dfsel_plan_last_error(plan);

  const int64_t V = s.V, T = s.tokens();
  const int K = s.K, L = s.block - 1;
  const std::vector<float> ranked = get_f32(g.logits);               // what the peer ranks
  const std::vector<float> read = get_f32(c.raw ? g.z : g.logits);   // what dfsel ranks
  const std::vector<float> embd = get_f32(g.embd);
  const std::vector<float> peer = get_f32(g.peer), mine = get_f32(o.packed);
  const std::vector<int32_t> path = get_i32(o.path), n_emitted = get_i32(o.n_emitted);

  // The gate in float64, as dfsel reads W_h.
  std::vector<double> gate((size_t)(T * s.R));
  for (int r = 0; r < s.R; ++r) {
    const std::vector<double> wr = read_row(w.w_h_h, r, true);
    for (int64_t t = 0; t < T; ++t) {
      double a = 0;
      for (int64_t e = 0; e < s.E; ++e) a += wr[(size_t)e] * embd[(size_t)(t * s.E + e)];
      gate[(size_t)(t * s.R + r)] = a;
    }
  }
  auto transform = [&](double zv) {
    if (!c.raw) return (double)(float)zv;
    const float m = s.scale, cap = s.softcap;
    return cap > 0 ? (double)(cap * std::tanh((float)(m * (float)zv) / cap)) : (double)(m * (float)zv);
  };

  // dfsel against the oracle, row by row: the exact top-K, then every score.
  double worst_oracle = 0;
  long oracle_scores = 0;
  const PackedLayout lay{s.E, K, s.block, s.blocks};
  for (int b = 0; b < s.blocks; ++b) {
    for (int p = 1; p <= L; ++p) {
      const int64_t t = (int64_t)b * s.block + p;
      const float* row = &mine[(size_t)(t * s.E)];
      const float* zr = &read[(size_t)(t * V)];
      std::vector<int32_t> top((size_t)V);
      for (int64_t v = 0; v < V; ++v) top[(size_t)v] = (int32_t)v;
      std::partial_sort(top.begin(), top.begin() + K, top.end(), [&](int32_t a, int32_t bb) {
        return zr[a] > zr[bb] || (zr[a] == zr[bb] && a < bb);
      });
      for (int j = 0; j < K; ++j) ASSERT_EQ((float)top[(size_t)j], row[j]) << "block " << b << " p " << p << " j " << j;
      std::vector<std::vector<double>> preds;
      if (p == 1) preds.push_back(read_row(w.e_prev_h, g.anchors[(size_t)b], true));
      else
        for (int i = 0; i < K; ++i) preds.push_back(read_row(w.e_prev_h, (int64_t)mine[(size_t)((t - 1) * s.E + i)], true));
      std::vector<double> S((size_t)K * K);
      double row_max = 0;
      for (int j = 0; j < K; ++j) {
        const std::vector<double> en = read_row(w.e_next_h, top[(size_t)j], true);
        for (int i = 0; i < K; ++i) {
          const std::vector<double>& ep = preds[p == 1 ? 0 : (size_t)i];
          double acc = 0;
          for (int r = 0; r < s.R; ++r) acc += ep[(size_t)r] * gate[(size_t)(t * s.R + r)] * en[(size_t)r];
          S[(size_t)(i * K + j)] = transform(zr[top[(size_t)j]]) + acc;
          row_max = std::max(row_max, std::fabs(S[(size_t)(i * K + j)]));
        }
      }
      for (int x = 0; x < K * K; ++x) {
        const double d = std::fabs(row[K + x] - S[(size_t)x]);
        worst_oracle = std::max(worst_oracle, d / row_max);
        ASSERT_LE(d, 1e-5 * row_max) << "block " << b << " p " << p << " score " << x << ": dfsel " << row[K + x]
                                     << ", float64 " << S[(size_t)x];
        ++oracle_scores;
      }
    }
  }

  // The peer, matched by id, within its own rounding (packed_compare.h: 2^-8 of the row).
  PackedStats st;
  ASSERT_EQ("", compare_packed(lay, peer.data(), mine.data(), ranked, V, peer_tolerance, &st));
  if (st.tie_swaps == 0) {
    EXPECT_EQ(st.scores, st.compared);
  }
  ASSERT_EQ("", compare_walks(lay, peer.data(), mine.data(), kPeerRelative * st.largest_row, &st));

  // dfsel's own walk: the greedy walk of its rows, cut where the chosen probability < p_min.
  long near_threshold = 0;
  for (int b = 0; b < s.blocks; ++b) {
    int prev = 0, n = 0;
    for (int p = 1; p <= L; ++p) {
      const float* row = &mine[(size_t)(((int64_t)b * s.block + p) * s.E)];
      const float* sc = row + K + prev * K;
      const int j = (int)(std::max_element(sc, sc + K) - sc);
      double z = 0;
      for (int x = 0; x < K; ++x) z += std::exp((double)sc[x] - sc[j]);
      const double prob = 1.0 / z;
      if (c.p_min > 0 && std::fabs(prob - c.p_min) < 1e-5) {
        ++near_threshold;
        n = -1;
        break;
      }
      if (c.p_min > 0 && prob < c.p_min) break;
      ASSERT_EQ((int32_t)row[j], path[(size_t)(b * L + n)]) << "block " << b << " p " << p;
      ++n;
      prev = j;
    }
    if (n < 0) continue;
    ASSERT_EQ(n, n_emitted[(size_t)b]) << "block " << b;
    for (int q = n; q < L; ++q) ASSERT_EQ(-1, path[(size_t)(b * L + q)]) << "block " << b << " after the last";
  }
  std::printf("%s: %ld scores within %.1e of float64 (worst %.2e); against the in-graph selector %ld of %ld "
              "matched (%ld tie swaps), worst %.2e of the row; walks: %ld steps, %ld near-ties; %ld near p_min\n",
              c.name, oracle_scores, 1e-5, worst_oracle, st.compared, st.scores, st.tie_swaps, st.worst_rel,
              st.walk_steps, st.near_ties, near_threshold);
}

DraftShape shape(int64_t V, int64_t E, int blocks, ggml_type cb, ggml_type wh, float scale, float softcap) {
  DraftShape s;
  s.V = V;
  s.E = E;
  s.blocks = blocks;
  s.cb_t = cb;
  s.wh_t = wh;
  s.scale = scale;
  s.softcap = softcap;
  return s;
}

// Codebooks F32, BF16, Q8_0 and a K-quant; 1, 4 and 16 blocks; with and without softcap and
// p_min. V is odd so no tensor's rows end on a round boundary.
const InGraphCase kCases[] = {
    {"f32_1block", shape(32003, 1024, 1, GGML_TYPE_F32, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"f32_4blocks_softcap_pmin", shape(32003, 1024, 4, GGML_TYPE_F32, GGML_TYPE_BF16, 0.8f, 20.0f), true, 0.2f},
    {"bf16_16blocks", shape(32003, 1024, 16, GGML_TYPE_BF16, GGML_TYPE_BF16, 0.5f, 0.0f), false, 0.0f},
    {"bf16_1block_softcap_pmin", shape(32003, 1024, 1, GGML_TYPE_BF16, GGML_TYPE_BF16, 1.0f, 15.0f), true, 0.3f},
    {"q8_0_4blocks", shape(32003, 1024, 4, GGML_TYPE_Q8_0, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q8_0_16blocks_softcap_pmin", shape(32003, 1024, 16, GGML_TYPE_Q8_0, GGML_TYPE_BF16, 1.0f, 30.0f), true, 0.1f},
    {"q4_k_1block_pmin", shape(32003, 1024, 1, GGML_TYPE_Q4_K, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.2f},
    {"q4_k_16blocks_softcap", shape(32003, 1024, 16, GGML_TYPE_Q4_K, GGML_TYPE_F32, 1.0f, 25.0f), true, 0.0f},
    {"vocab248320_bf16_4blocks", shape(248320, 1024, 4, GGML_TYPE_BF16, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
};

INSTANTIATE_TEST_SUITE_P(Shapes, GgmlCudaInGraph, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<InGraphCase>& i) { return std::string(i.param.name); });

// Every other type dfsel reads, loaded from a GGUF into ggml-cuda: one block each.
const InGraphCase kTypeCases[] = {
    {"f16", shape(8195, 512, 1, GGML_TYPE_F16, GGML_TYPE_F16, 1.0f, 0.0f), false, 0.0f},
    {"q4_0", shape(8195, 512, 1, GGML_TYPE_Q4_0, GGML_TYPE_Q8_0, 1.0f, 0.0f), false, 0.0f},
    {"q4_1", shape(8195, 512, 1, GGML_TYPE_Q4_1, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q5_0", shape(8195, 512, 1, GGML_TYPE_Q5_0, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q5_1", shape(8195, 512, 1, GGML_TYPE_Q5_1, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q2_k", shape(8195, 512, 1, GGML_TYPE_Q2_K, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q3_k", shape(8195, 512, 1, GGML_TYPE_Q3_K, GGML_TYPE_Q4_K, 1.0f, 0.0f), false, 0.0f},
    {"q5_k", shape(8195, 512, 1, GGML_TYPE_Q5_K, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
    {"q6_k", shape(8195, 512, 1, GGML_TYPE_Q6_K, GGML_TYPE_BF16, 1.0f, 0.0f), false, 0.0f},
};

INSTANTIATE_TEST_SUITE_P(Types, GgmlCudaInGraph, ::testing::ValuesIn(kTypeCases),
                         [](const ::testing::TestParamInfo<InGraphCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace dfsel::test
