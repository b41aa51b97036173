// gate, pack_records and score_lattice against the CPU reference steps (host/cpu_reference.h),
// on exchange buffers built on the host for S ranks (SPEC sections 4 and 5): candidates and
// paths exactly (near-ties recognised, never loosened), scores to float rounding, and every
// shard count and placement bitwise equal to one replicated shard.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "host/reference/cpu_reference.h"
#include "kernels/common/exchange_layout.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/gate.cuh"
#include "kernels/pack_records.cuh"
#include "kernels/score_lattice.cuh"
#include "support/case_lists.h"
#include "support/gpu.cuh"
#include "support/problem.h"

namespace dfsel::test {
namespace {

constexpr dfsel_type kCbTypes[] = {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0};
constexpr double kScoreTol = 1e-4, kNearTie = 1e-5;

// n rows of cols values N(0, sigma) stored as t, stride bytes apart (padding bytes 0xee).
std::vector<uint8_t> random_rows(dfsel_type t, size_t n, int64_t cols, size_t stride, float sigma,
                                 std::mt19937_64& rng) {
  std::vector<uint8_t> out(n * stride, 0xee);
  std::normal_distribution<float> nd(0.0f, sigma);
  for (size_t i = 0; i < n; ++i) {
    uint8_t* row = out.data() + i * stride;
    for (int64_t b = 0; t == DFSEL_TYPE_Q8_0 && b < cols / kQ8Block; ++b) {
      BlockQ8_0 blk;
      blk.d = float_to_f16(sigma / 64.0f * (0.5f + (float)(rng() % 1000) / 1000.0f));
      for (int j = 0; j < kQ8Block; ++j) blk.qs[j] = (int8_t)((int)(rng() % 255) - 127);
      std::memcpy(row + b * sizeof(BlockQ8_0), &blk, sizeof blk);
    }
    for (int64_t e = 0; t != DFSEL_TYPE_Q8_0 && e < cols; ++e) {
      const float v = nd(rng);
      const uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
      if (t == DFSEL_TYPE_F32) std::memcpy(row + 4 * e, &v, 4);
      else std::memcpy(row + 2 * e, &h, 2);
    }
  }
  return out;
}

dfsel_tensor tensor2d(const void* data, dfsel_type t, int64_t ne0, int64_t ne1, size_t nb1) {
  return dfsel_tensor_2d(data, t, ne0, ne1, nb1);
}

// Agreement to tol relative to max(1, |want|); equal infinities and two NaNs agree.
bool close(float got, float want, double tol) {
  if (got == want || (std::isnan(got) && std::isnan(want))) return true;
  return std::fabs((double)got - want) <= tol * std::max(1.0, std::fabs((double)want));
}

// Enqueues `launches` times on a fresh stream, directly or as one captured graph replayed;
// before_each runs (synchronously) ahead of every launch.
void repeat(const std::function<cudaError_t(cudaStream_t)>& enqueue, int launches, bool graph,
            const std::function<void()>& before_each) {
  cudaStream_t st;
  cudaGraph_t gr = nullptr;
  cudaGraphExec_t exec = nullptr;
  CUDA_OK(cudaStreamCreate(&st));
  if (graph) {
    CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
    CUDA_OK(enqueue(st));
    CUDA_OK(cudaStreamEndCapture(st, &gr));
    CUDA_OK(cudaGraphInstantiate(&exec, gr, 0));
  }
  for (int i = 0; i < launches; ++i) {
    CUDA_OK(cudaDeviceSynchronize());
    before_each();
    CUDA_OK(graph ? cudaGraphLaunch(exec, st) : enqueue(st));
    CUDA_OK(cudaStreamSynchronize(st));
  }
  if (exec) cudaGraphExecDestroy(exec);
  if (gr) cudaGraphDestroy(gr);
  cudaStreamDestroy(st);
}

// ---- gate ----

struct GateCase {
  int64_t E;
  int R;
  dfsel_type w, h;
  int blocks, block;
  size_t w_pad, h_pad;  // extra bytes per row; an odd h_pad forces the unaligned path
};

// tile / split: the gate's tuning overrides (GateDevice::force_tile, force_split); -1 / 0
// let it choose.
void check_gate(const GateCase& c, uint64_t seed, bool graph, int tile = -1, int split = 0) {
  SCOPED_TRACE("E=" + std::to_string(c.E) + " R=" + std::to_string(c.R) + " w=" +
               dfsel_type_name(c.w) + " h=" + dfsel_type_name(c.h) + " rows=" +
               std::to_string(c.blocks * (c.block - 1)) + " tile=" + std::to_string(tile) + " split=" +
               std::to_string(split) + " seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int L = c.block - 1, n_rows = c.blocks * L, n_tok = c.blocks * c.block;
  const size_t w_nb1 = row_bytes(c.w, c.E) + c.w_pad, h_nb1 = row_bytes(c.h, c.E) + c.h_pad;
  const auto w = random_rows(c.w, c.R, c.E, w_nb1, 1.0f / std::sqrt((float)c.E), rng);
  const auto h = random_rows(c.h, n_tok, c.E, h_nb1, 1.0f, rng);
  std::vector<float> want((size_t)n_rows * c.R);
  ref::gate(tensor2d(w.data(), c.w, c.E, c.R, w_nb1), tensor2d(h.data(), c.h, c.E, n_tok, h_nb1),
            RowMap{L, c.block, 1}, n_rows, want.data());
  DeviceBuffer<uint8_t> dw(w.size()), dh(h.size());
  DeviceBuffer<float> dg(want.size());
  dw.upload(w);
  dh.upload(h);
  const cuda::GateArgs a{dw.get(), c.w, w_nb1, dh.get(), c.h, h_nb1, c.E, c.R,
                         RowMap{L, c.block, 1}, n_rows, dg.get()};
  cuda::GateDevice dev{};
  CUDA_OK(cuda::gate_device(0, &dev));
  dev.force_tile = tile;
  dev.force_split = split;
  const cuda::GateShape shape = cuda::gate_shape(a, dev);
  SCOPED_TRACE("ran tile " + std::to_string(shape.tile) + " split " + std::to_string(shape.split));
  ASSERT_NO_FATAL_FAILURE(repeat([&](cudaStream_t st) { return cuda::gate(a, dev, st); }, 1,
                                 graph, [&] { dg.poison(); }));
  CUDA_OK(cudaDeviceSynchronize());
  const auto got = dg.download();
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_TRUE(close(got[i], want[i], kScoreTol))
        << "g[" << i / c.R << "][" << i % c.R << "] = " << got[i] << ", reference " << want[i];
  // The same inputs again: bitwise the same g (the order is fixed by the sizes alone).
  ASSERT_NO_FATAL_FAILURE(repeat([&](cudaStream_t st) { return cuda::gate(a, dev, st); }, 1,
                                 graph, [&] { dg.poison(); }));
  CUDA_OK(cudaDeviceSynchronize());
  ASSERT_EQ(0, std::memcmp(got.data(), dg.download().data(), got.size() * sizeof(float)))
      << "a second run gave different bits";
}

TEST(GpuGate, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  const GateCase cases[] = {
      {5120, 256, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 1, 16, 0, 0},  // one block: n_embd split
      {5120, 256, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 16, 16, 0, 0},
      {4096, 256, DFSEL_TYPE_Q8_0, DFSEL_TYPE_BF16, 1, 16, 0, 0},
      {1024, 32, DFSEL_TYPE_F16, DFSEL_TYPE_F16, 3, 6, 0, 0},
      {1000, 40, DFSEL_TYPE_F32, DFSEL_TYPE_F32, 2, 5, 0, 0},      // n_embd % 8 != 0
      {512, 256, DFSEL_TYPE_BF16, DFSEL_TYPE_BF16, 300, 16, 32, 0},  // 4500 rows
      {6656, 1024, DFSEL_TYPE_F16, DFSEL_TYPE_F32, 1, 16, 16, 4},  // hidden rows 4-byte aligned only
      {96, 8, DFSEL_TYPE_F32, DFSEL_TYPE_F16, 1, 2, 0, 0},
      {2056, 200, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 70, 16, 16, 32},  // partial stage and tiles
      {1536, 72, DFSEL_TYPE_F32, DFSEL_TYPE_BF16, 9, 16, 0, 0},
  };
  uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (const GateCase& c : cases) ASSERT_NO_FATAL_FAILURE(check_gate(c, seed++, false));
  ASSERT_NO_FATAL_FAILURE(check_gate(cases[0], seed++, true));  // cluster launch in a graph
}

// Every tile shape at several n_embd splits (1, 2, the largest cluster), each
// stored type of W_h and hidden: the paths a plan chooses by row count and device.
TEST(GpuGate, EveryTileAndSplitMatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  const GateCase cases[] = {
      {5120, 256, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 8, 16, 0, 0},
      {2048, 136, DFSEL_TYPE_F16, DFSEL_TYPE_F16, 5, 16, 16, 0},
      {1024, 64, DFSEL_TYPE_Q8_0, DFSEL_TYPE_F32, 3, 16, 0, 0},
      {1536, 264, DFSEL_TYPE_F32, DFSEL_TYPE_BF16, 6, 16, 0, 16},
  };
  uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (const GateCase& c : cases)
    for (int tile = 0; tile < cuda::kGateTiles; ++tile)
      for (int split : {1, 2, 8, 16}) ASSERT_NO_FATAL_FAILURE(check_gate(c, seed++, false, tile, split));
}

// The shapes Gate times (tests/support/case_lists.h): n_embd 5120, R 256, BF16 W_h, F32 hidden,
// blocks of 16 tokens; the plan's own tile and split.
class GpuGateMeasuredShapes : public testing::TestWithParam<int> {};
TEST_P(GpuGateMeasuredShapes, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const GateCase c = {5120, 256, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, GetParam(), 16, 0, 0};
  ASSERT_NO_FATAL_FAILURE(check_gate(c, seed, false));
}
INSTANTIATE_TEST_SUITE_P(, GpuGateMeasuredShapes, testing::ValuesIn(cases::kGateBlocks),
                         [](const testing::TestParamInfo<int>& info) { return "blocks" + std::to_string(info.param); });

// The gate's paths at sanitizer sizes: each W_h and hidden type, 16-byte and element loads,
// each tile, with and without an n_embd split over a cluster.
TEST(GpuGate, SmallShapesForSanitizers) {
  DFSEL_REQUIRE_GPUS(1);
  const GateCase cases[] = {
      {96, 8, DFSEL_TYPE_F32, DFSEL_TYPE_F16, 1, 2, 0, 0},     {1024, 32, DFSEL_TYPE_F16, DFSEL_TYPE_F16, 1, 6, 0, 0},
      {1000, 40, DFSEL_TYPE_F32, DFSEL_TYPE_F32, 2, 5, 0, 0},  {512, 16, DFSEL_TYPE_Q8_0, DFSEL_TYPE_BF16, 1, 4, 0, 0},
      {768, 24, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 2, 5, 16, 4},
  };
  uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  for (const GateCase& c : cases) ASSERT_NO_FATAL_FAILURE(check_gate(c, seed++, false));
  const GateCase big = {640, 72, DFSEL_TYPE_BF16, DFSEL_TYPE_F32, 5, 16, 0, 0};
  for (int tile = 0; tile < cuda::kGateTiles; ++tile)
    for (int split : {1, 2}) ASSERT_NO_FATAL_FAILURE(check_gate(big, seed++, false, tile, split));
}

// ---- lattice ----

struct Mode {
  float temperature, p_min, softcap, scale;
};

struct Problem {
  int K, R, block, blocks, L, nd, n_tok;
  int64_t V, n_embd;
  dfsel_type cb;
  size_t cb_row;
  Mode mode;
  uint64_t seed;
  std::vector<float> z;                  // [n_tok][V] logits
  std::vector<uint8_t> e_prev, e_next;   // V rows of cb_row bytes
  std::vector<float> g;                  // [nd][R]
  std::vector<int32_t> anchors;
  size_t cb_offset = 0;  // replicated codebooks start this many bytes into their allocations
  int max_cluster = 0;   // lattice_launch's: 0, the largest the device holds
  bool general = false;  // the general kernel even where the fast instance would run
};

Problem make_problem(int K, int R, dfsel_type cb, int blocks, int block, Mode mode, uint64_t seed) {
  Problem pb{K, R, block, blocks, block - 1, blocks * (block - 1), blocks * block};
  pb.V = 16 * K + 500;
  pb.n_embd = K + K * K + 7;
  pb.cb = cb;
  pb.cb_row = row_bytes(cb, R);
  pb.mode = mode;
  pb.seed = seed;
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  pb.z.resize((size_t)pb.n_tok * pb.V);
  for (float& x : pb.z) x = std::round(nd(rng) * 4.0f) / 4.0f;  // many ties: the id decides
  if (pb.L >= 2) {  // a masked row (block 0, p = 2): two finite logits, -inf candidates
    float* row = &pb.z[(size_t)2 * pb.V];
    std::fill(row, row + pb.V, -INFINITY);
    row[rng() % pb.V] = 1.0f;
    row[rng() % pb.V] = 2.0f;
  }
  pb.e_prev = random_rows(cb, pb.V, R, pb.cb_row, 0.5f, rng);
  pb.e_next = random_rows(cb, pb.V, R, pb.cb_row, 0.5f, rng);
  std::normal_distribution<float> gn(0.0f, 1.0f);
  pb.g.resize((size_t)pb.nd * R);
  for (float& x : pb.g) x = gn(rng);
  pb.anchors.resize(blocks);
  for (int32_t& a : pb.anchors) a = (int32_t)(rng() % (uint64_t)pb.V);
  return pb;
}

ExchangeLayout layout_of(const Problem& pb, bool sharded) {
  return make_exchange_layout(pb.K, pb.blocks, pb.block, sharded, pb.cb_row);
}

// Rank [vb, ve)'s send buffer as the CPU backend builds it (0xff where nothing is written).
std::vector<uint8_t> host_send(const Problem& pb, const ExchangeLayout& l, int64_t vb, int64_t ve,
                               const std::vector<int32_t>& anchors) {
  std::vector<uint8_t> buf(l.bytes, 0xff);
  ref::shard_topk(tensor2d(pb.z.data() + vb, DFSEL_TYPE_F32, ve - vb, pb.n_tok, pb.V * 4),
                  RowMap{pb.L, pb.block, 1}, pb.nd, pb.K, vb, layout_cands(l, buf.data()));
  if (!l.sharded) return buf;
  const CandRec* c = layout_cands(l, buf.data());
  for (int d = 0; d < pb.nd; ++d)
    for (int j = 0; j < pb.K; ++j) {
      const size_t id = (size_t)c[d * pb.K + j].id;
      std::memcpy(layout_row(l, buf.data(), d, j, 0), &pb.e_prev[id * pb.cb_row], pb.cb_row);
      std::memcpy(layout_row(l, buf.data(), d, j, 1), &pb.e_next[id * pb.cb_row], pb.cb_row);
    }
  for (int b = 0; b < pb.blocks; ++b) {
    const int32_t a = anchors[b];
    const int32_t head[4] = {a >= vb && a < ve ? 1 : 0, 0, 0, 0};
    std::memcpy(layout_anchor_owned(l, buf.data(), b), head, 16);
    if (head[0]) std::memcpy(layout_anchor_row(l, buf.data(), b), &pb.e_prev[(size_t)a * pb.cb_row], pb.cb_row);
  }
  return buf;
}

struct DevOut {
  std::vector<int32_t> cand_ids, path, n_emitted;
  std::vector<float> unary, scores, q, packed;
  int32_t error = 0;
  int fast = 0;  // the launch plan let the fast instance run
};

constexpr size_t kPackedPad = 5;  // floats between packed rows beyond n_embd, left untouched

// Builds every rank's records (sharded: through pack_records, checked byte for byte against
// the host's), gathers them and runs score_lattice `launches` times (graph: as one captured
// graph replayed), outputs poisoned before each launch.
void run_lattice(const Problem& pb, const std::vector<int64_t>& bounds, bool sharded,
                 const std::vector<int32_t>& anchors, std::vector<std::vector<uint8_t>>* sends,
                 DevOut* out, int32_t error_init = 0, int launches = 1, bool graph = false) {
  const int S = (int)bounds.size() - 1, K = pb.K;
  const ExchangeLayout l = layout_of(pb, sharded);
  DeviceBuffer<uint8_t> recv((size_t)S * l.bytes), e_prev(pb.e_prev.size() + pb.cb_offset),
      e_next(pb.e_next.size() + pb.cb_offset);
  DeviceBuffer<int32_t> d_anchors(pb.blocks);
  d_anchors.upload(anchors);
  sends->clear();
  for (int s = 0; s < S; ++s) {
    sends->push_back(host_send(pb, l, bounds[s], bounds[s + 1], anchors));
    uint8_t* dst = recv.get() + (size_t)s * l.bytes;
    if (!sharded) {
      CUDA_OK(cudaMemcpy(dst, sends->back().data(), l.bytes, cudaMemcpyHostToDevice));
      continue;
    }
    const std::vector<uint8_t>& want = sends->back();
    const size_t first = (size_t)bounds[s] * pb.cb_row, n = (size_t)(bounds[s + 1] - bounds[s]) * pb.cb_row;
    DeviceBuffer<uint8_t> send(l.bytes), lp(n), ln(n);
    send.poison();
    CUDA_OK(cudaMemcpy(send.get(), want.data(), l.rows_off, cudaMemcpyHostToDevice));
    lp.upload(pb.e_prev.data() + first, n);
    ln.upload(pb.e_next.data() + first, n);
    cuda::PackRecordsArgs p{send.get(), l, lp.get(), ln.get(), pb.cb_row, pb.cb_row,
                            bounds[s], bounds[s + 1], d_anchors.get()};
    CUDA_OK(cuda::pack_records(p, nullptr));
    const std::vector<uint8_t> got = send.download();
    for (int d = 0; d < pb.nd; ++d)
      for (int j = 0; j < K; ++j)
        for (int w = 0; w < 2; ++w)
          ASSERT_EQ(0, std::memcmp(layout_row(l, (void*)got.data(), d, j, w),
                                   layout_row(l, (void*)want.data(), d, j, w), pb.cb_row))
              << "rank " << s << " record row (" << d << ", " << j << ", " << w << ")";
    for (int b = 0; b < pb.blocks; ++b) {
      const bool owned = *layout_anchor_owned(l, (void*)want.data(), b) == 1;
      ASSERT_EQ(0, std::memcmp(layout_anchor_owned(l, (void*)got.data(), b),
                               layout_anchor_owned(l, (void*)want.data(), b),
                               16 + (owned ? pb.cb_row : 0)))
          << "rank " << s << " anchor area of block " << b;
    }
    CUDA_OK(cudaMemcpy(dst, send.get(), l.bytes, cudaMemcpyDeviceToDevice));
  }
  CUDA_OK(cudaMemcpy(e_prev.get() + pb.cb_offset, pb.e_prev.data(), pb.e_prev.size(), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(e_next.get() + pb.cb_offset, pb.e_next.data(), pb.e_next.size(), cudaMemcpyHostToDevice));
  const size_t nd = pb.nd, row_floats = (size_t)pb.n_embd + kPackedPad;
  DeviceBuffer<float> g(pb.g.size()), unary(nd * K), scores(nd * K * K), q(nd * K),
      packed((size_t)pb.n_tok * row_floats), lattice(nd * K * K);
  DeviceBuffer<int32_t> cand_ids(nd * K), path(nd), n_emitted(pb.blocks), error(1);
  DeviceBuffer<int2> choices(nd * K);
  g.upload(pb.g);
  error.upload(&error_init, 1);
  cuda::LatticeArgs a{};
  a.rows = RowSource{recv.get(), l, S, e_prev.get() + pb.cb_offset, e_next.get() + pb.cb_offset, pb.cb_row, pb.V};
  a.k = K; a.R = pb.R; a.block_size = pb.block; a.n_blocks = pb.blocks;
  a.transform = Transform{pb.mode.scale, pb.mode.softcap};
  a.cb_type = pb.cb; a.anchors = d_anchors.get(); a.g = g.get();
  a.walk = WalkParams{pb.mode.temperature, pb.mode.p_min, pb.seed};
  a.cand_ids = cand_ids.get(); a.unary = unary.get(); a.scores = scores.get();
  a.q = pb.mode.temperature > 0.0f ? q.get() : nullptr;
  a.path = path.get(); a.n_emitted = n_emitted.get();
  a.packed = packed.get(); a.packed_row_stride = row_floats * 4; a.n_embd = pb.n_embd;
  a.lattice = lattice.get(); a.choices = choices.get();
  a.error = error.get();
  cuda::LatticeLaunch launch{};
  CUDA_OK(cuda::lattice_launch(a, 0, &launch, pb.max_cluster));
  if (pb.general) launch.fast = 0;
  out->fast = launch.fast;
  ASSERT_NO_FATAL_FAILURE(repeat([&](cudaStream_t st) { return cuda::score_lattice(a, launch, st); },
                                 launches, graph, [&] {
                                   for (auto* b : {&unary, &scores, &q, &packed, &lattice}) b->poison();
                                   for (auto* b : {&cand_ids, &path, &n_emitted}) b->poison();
                                   choices.poison();
                                 }));
  out->cand_ids = cand_ids.download();
  out->unary = unary.download();
  out->scores = scores.download();
  out->q = a.q ? q.download() : std::vector<float>();
  out->path = path.download();
  out->n_emitted = n_emitted.download();
  out->packed = packed.download();
  out->error = error.download()[0];
}

struct Expect {
  std::vector<CandRec> merged;
  std::vector<float> unary, lattice, q;
  std::vector<int32_t> path, n_emitted, clear;  // clear[b]: steps compared before a near-tie
};

// Steps of block b's reference walk that any float rounding of the scores leaves unchanged:
// the first step whose choice or p_min cut sits within kNearTie of flipping ends the count.
int clear_steps(const Problem& pb, const float* lat, int b) {
  const int K = pb.K;
  int prev = 0;
  for (int p = 1; p <= pb.L; ++p) {
    const float* row = lat + ((size_t)(p - 1) * K + prev) * K;
    int j;
    if (pb.mode.temperature > 0.0f) {
      float q[64], c = 0.0f;
      softmax_row(row, K, pb.mode.temperature, q);
      const float u = philox_uniform(pb.seed, (uint32_t)b, (uint32_t)p);
      for (int i = 0; i < K; ++i)
        if (std::fabs((c += q[i]) - u) <= kNearTie) return p - 1;
      j = sample_row(q, K, u);
    } else {
      j = argmax_row(row, K);
      for (int i = 0; i < K; ++i)
        if (i != j && std::isfinite(row[j]) && close(row[i], row[j], kNearTie)) return p - 1;
    }
    if (pb.mode.p_min > 0.0f) {
      const float pj = softmax_at(row, K, 1.0f, j);
      if (std::fabs(pj - pb.mode.p_min) <= kNearTie) return p - 1;
      if (pj < pb.mode.p_min) return pb.L;
    }
    prev = j;
  }
  return pb.L;
}

Expect expect(const Problem& pb, const std::vector<std::vector<uint8_t>>& sends,
              const ExchangeLayout& l, const std::vector<int32_t>& anchors) {
  const int S = (int)sends.size(), K = pb.K, R = pb.R, L = pb.L;
  Expect e;
  e.merged.resize((size_t)pb.nd * K);
  e.unary.resize((size_t)pb.nd * K);
  e.lattice.resize((size_t)pb.nd * K * K);
  std::vector<CandRec> recs((size_t)S * K);
  std::vector<float> prev((size_t)K * R), next((size_t)K * R);
  const Transform tr{pb.mode.scale, pb.mode.softcap};
  for (int d = 0; d < pb.nd; ++d) {
    for (int s = 0; s < S; ++s)
      std::memcpy(&recs[(size_t)s * K], layout_cands(l, (void*)sends[s].data()) + (size_t)d * K, K * 8);
    ref::merge_candidates(recs.data(), S * K, K, &e.merged[(size_t)d * K]);
    const CandRec* c = &e.merged[(size_t)d * K];
    float* u = &e.unary[(size_t)d * K];
    for (int j = 0; j < K; ++j) {
      u[j] = transform_logit(tr, c[j].z);
      ref::load_row(&pb.e_next[(size_t)c[j].id * pb.cb_row], pb.cb, R, &next[(size_t)j * R]);
    }
    const int p = d % L + 1, a = anchors[d / L];
    const int n_prev = p == 1 ? 1 : K;
    for (int i = 0; i < n_prev; ++i) {
      const int64_t id = p == 1 ? a : e.merged[(size_t)(d - 1) * K + i].id;
      if (id < 0 || id >= pb.V) std::fill(prev.begin(), prev.begin() + R, 0.0f);  // GPU: zero row
      else ref::load_row(&pb.e_prev[(size_t)id * pb.cb_row], pb.cb, R, &prev[(size_t)i * R]);
    }
    float* s = &e.lattice[(size_t)d * K * K];
    ref::score_lattice(prev.data(), n_prev, &pb.g[(size_t)d * R], next.data(), u, K, R, s);
    for (int i = n_prev; i < K; ++i) std::memcpy(s + (size_t)i * K, s, K * 4);
  }
  e.path.resize(pb.nd);
  e.n_emitted.resize(pb.blocks);
  e.q.assign((size_t)pb.nd * K, 0.0f);
  e.clear.resize(pb.blocks);
  const bool sampling = pb.mode.temperature > 0.0f;
  for (int b = 0; b < pb.blocks; ++b) {
    const float* lat = &e.lattice[(size_t)b * L * K * K];
    ref::walk_block(lat, &e.merged[(size_t)b * L * K], L, K, WalkParams{pb.mode.temperature, pb.mode.p_min, pb.seed},
                    (uint32_t)b, &e.path[(size_t)b * L], &e.n_emitted[b],
                    sampling ? &e.q[(size_t)b * L * K] : nullptr);
    e.clear[b] = clear_steps(pb, lat, b);
  }
  return e;
}

void compare(const Problem& pb, const Expect& e, const DevOut& o, const std::vector<int32_t>& anchors) {
  const int K = pb.K, L = pb.L;
  for (size_t i = 0; i < e.merged.size(); ++i) {
    ASSERT_EQ(o.cand_ids[i], e.merged[i].id) << "cand_ids[" << i / K << "][" << i % K << "]";
    ASSERT_TRUE(close(o.unary[i], e.unary[i], kNearTie)) << "unary[" << i << "] " << o.unary[i] << " vs " << e.unary[i];
  }
  for (size_t i = 0; i < e.lattice.size(); ++i)
    ASSERT_TRUE(close(o.scores[i], e.lattice[i], kScoreTol))
        << "scores[" << i / (K * K) << "][" << i / K % K << "][" << i % K << "] " << o.scores[i] << " vs " << e.lattice[i];
  const bool sampling = pb.mode.temperature > 0.0f;
  for (int b = 0; b < pb.blocks; ++b) {
    SCOPED_TRACE("block " + std::to_string(b));
    if (anchors[b] < 0 || anchors[b] >= pb.V) {  // emits nothing; q rows zero
      EXPECT_EQ(o.n_emitted[b], 0);
      for (int p = 0; p < L; ++p) EXPECT_EQ(o.path[(size_t)b * L + p], -1);
      for (size_t i = 0; sampling && i < (size_t)L * K; ++i) EXPECT_EQ(o.q[(size_t)b * L * K + i], 0.0f);
      continue;
    }
    // q of a step is the softmax of the lattice row it used: checked against the softmax of
    // the scores the kernel wrote for that row (to kNearTie), those scores being checked
    // against the reference above; and against the reference's q to a bound that a 1e-4
    // score error allows (a 1000-term sum's rounding moves q by 1e-5).
    int used = 0;  // lattice row of step p; -1 once stopped
    const int steps = e.clear[b];
    for (int p = 0; p < steps; ++p) {
      const size_t d = (size_t)b * L + p;
      ASSERT_EQ(o.path[d], e.path[d]) << "step " << p + 1;
      float want[64] = {};
      if (sampling && used >= 0) softmax_row(&o.scores[(d * K + used) * K], K, pb.mode.temperature, want);
      for (int j = 0; sampling && j < K; ++j) {
        const size_t i = d * K + j;
        ASSERT_TRUE(close(o.q[i], want[j], kNearTie))
            << "q at step " << p + 1 << ", j " << j << ": " << o.q[i] << " vs " << want[j] << " from its scores";
        ASSERT_TRUE(close(o.q[i], e.q[i], 1e-3)) << "q at step " << p + 1 << ", j " << j << ": " << o.q[i] << " vs " << e.q[i];
      }
      used = -1;
      for (int j = 0; j < K && e.path[d] >= 0; ++j)
        if (e.merged[d * K + j].id == e.path[d]) used = j;
    }
    if (steps == L) EXPECT_EQ(o.n_emitted[b], e.n_emitted[b]);
  }
  // Packed rows (SPEC section 6.5): row 0 zero, row p = [ids | scores | zeros], gaps untouched.
  const size_t row_floats = (size_t)pb.n_embd + kPackedPad;
  for (int t = 0; t < pb.n_tok; ++t) {
    const float* row = &o.packed[(size_t)t * row_floats];
    const int p = t % pb.block;
    const size_t d = (size_t)(t / pb.block) * L + p - 1;
    for (int64_t x = 0; x < (int64_t)row_floats; ++x) {
      uint32_t want_bits;
      if (x >= pb.n_embd) want_bits = 0xffffffffu;
      else if (p == 0 || x >= K + K * K) want_bits = 0;
      else if (x < K) want_bits = float_to_bits((float)o.cand_ids[d * K + x]);
      else want_bits = float_to_bits(o.scores[d * K * K + x - K]);
      ASSERT_EQ(float_to_bits(row[x]), want_bits) << "packed row " << t << ", element " << x;
    }
  }
}

void expect_bitwise(const DevOut& a, const DevOut& b) {
  EXPECT_EQ(a.cand_ids, b.cand_ids);
  EXPECT_EQ(a.path, b.path);
  EXPECT_EQ(a.n_emitted, b.n_emitted);
  EXPECT_EQ(first_diff(a.unary, b.unary), -1);
  EXPECT_EQ(first_diff(a.scores, b.scores), -1);
  EXPECT_EQ(first_diff(a.q, b.q), -1);
  EXPECT_EQ(first_diff(a.packed, b.packed), -1);
}

std::vector<int64_t> bounds_for(const Problem& pb, int S, std::mt19937_64& rng) {
  return S == 1 ? std::vector<int64_t>{0, pb.V} : random_bounds(pb.V, S, pb.K, rng);
}

// The lattice of pb on S ranks (a random uneven split; S = 1 is the whole vocabulary), checked
// against the reference built from the same records; the outputs are left in *out.
void run_and_compare(const Problem& pb, int S, bool sharded, std::mt19937_64& rng, DevOut* out) {
  std::vector<std::vector<uint8_t>> sends;
  ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds_for(pb, S, rng), sharded, pb.anchors, &sends, out));
  EXPECT_EQ(out->error, 0);
  ASSERT_NO_FATAL_FAILURE(compare(pb, expect(pb, sends, layout_of(pb, sharded), pb.anchors), *out, pb.anchors));
}

// Every K bucket, R 32 and 256, every codebook type, under one of four modes (greedy, p_min
// with softcap and scale, sampling, both) that turns with the case; each case on 1, 2, 3 and 8
// ranks in both placements, every one bitwise one replicated rank.
struct LatticeCase {
  int K, R;
  dfsel_type cb;
  Mode mode;
};

void PrintTo(const LatticeCase& c, std::ostream* os) {
  *os << "K=" << c.K << " R=" << c.R << " cb=" << dfsel_type_name(c.cb) << " T=" << c.mode.temperature
      << " p_min=" << c.mode.p_min << " softcap=" << c.mode.softcap << " scale=" << c.mode.scale;
}

std::vector<LatticeCase> shard_placement_type_cases() {
  const Mode modes[] = {{0.0f, 0.0f, 0.0f, 1.0f}, {0.0f, 0.2f, 30.0f, 1.5f},
                        {0.8f, 0.0f, 0.0f, 1.0f}, {1.3f, 0.1f, 20.0f, 0.7f}};
  const int ks[] = {1, 8, 16, 64}, rs[] = {32, 256};
  std::vector<LatticeCase> list;
  for (int ki = 0; ki < 4; ++ki)
    for (int ri = 0; ri < 2; ++ri)
      for (int ti = 0; ti < 4; ++ti) list.push_back({ks[ki], rs[ri], kCbTypes[ti], modes[(ki + 2 * ri + ti) % 4]});
  return list;
}

class GpuLatticeShardsPlacementsAndTypes : public testing::TestWithParam<LatticeCase> {};
TEST_P(GpuLatticeShardsPlacementsAndTypes, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const LatticeCase& lc = GetParam();
  const Mode m = lc.mode;
  const bool small = lc.R == 32;  // block 16 with K = 64 reads its q rows back from the workspace
  const Problem pb = make_problem(lc.K, lc.R, lc.cb, small ? 3 : 2, small ? 6 : 16, m, rng());
  DevOut base;
  for (int S : {1, 2, 3, 8})
    for (bool sharded : {false, true}) {
      SCOPED_TRACE("K=" + std::to_string(pb.K) + " R=" + std::to_string(pb.R) + " cb=" + dfsel_type_name(pb.cb) +
                   " S=" + std::to_string(S) + (sharded ? " sharded" : " replicated") +
                   " T=" + std::to_string(m.temperature) + " p_min=" + std::to_string(m.p_min) +
                   " softcap=" + std::to_string(m.softcap));
      DevOut out;
      ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, S, sharded, rng, &out));
      if (S == 1 && !sharded) base = out;
      else expect_bitwise(out, base);
    }
  // The general kernel where the fast instance ran above (one replicated rank, two sharded).
  Problem general = pb;
  general.general = true;
  for (int S : {1, 2}) {
    SCOPED_TRACE("general kernel, S=" + std::to_string(S));
    DevOut out;
    ASSERT_NO_FATAL_FAILURE(run_and_compare(general, S, S == 2, rng, &out));
    expect_bitwise(out, base);
  }
}
INSTANTIATE_TEST_SUITE_P(, GpuLatticeShardsPlacementsAndTypes, testing::ValuesIn(shard_placement_type_cases()),
                         [](const testing::TestParamInfo<LatticeCase>& info) {
                           const LatticeCase& c = info.param;
                           return "K" + std::to_string(c.K) + "_R" + std::to_string(c.R) + "_" + dfsel_type_name(c.cb);
                         });

// The shapes ScoreLattice times (tests/support/case_lists.h): K 16, R 256, BF16 codebooks,
// blocks of 16 tokens; greedy on one rank at each block count, and at one block each variant
// the benchmark times beside it.
struct MeasuredLattice {
  int blocks;
  cases::LatticeVariant v;
};

void PrintTo(const MeasuredLattice& c, std::ostream* os) { *os << "blocks=" << c.blocks << " " << c.v.suffix; }

std::vector<MeasuredLattice> measured_lattice_cases() {
  std::vector<MeasuredLattice> list;
  for (int blocks : cases::kGateBlocks)
    if (blocks <= cases::kLatticeMaxBlocks) list.push_back({blocks, {"", 1, false, 0.0f, 0.0f, 0}});
  for (const cases::LatticeVariant& v : cases::kLatticeOneBlockVariants) list.push_back({1, v});
  return list;
}

class GpuLatticeMeasuredShapes : public testing::TestWithParam<MeasuredLattice> {};
TEST_P(GpuLatticeMeasuredShapes, MatchesReference) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const MeasuredLattice& c = GetParam();
  Problem pb = make_problem(16, 256, DFSEL_TYPE_BF16, c.blocks, 16, Mode{c.v.temperature, c.v.p_min, 0, 1}, rng());
  pb.max_cluster = c.v.max_cluster;
  DevOut out, general;
  ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, c.v.ranks, c.v.sharded, rng, &out));
  pb.general = true;  // the kernel the benchmark times beside it: the same bits
  ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, c.v.ranks, c.v.sharded, rng, &general));
  EXPECT_EQ(out.fast, 1) << "every measured shape is the fast instance's, or the comparison compares nothing";
  EXPECT_EQ(general.fast, 0);
  expect_bitwise(general, out);
}
// "blocks1_sharded_ranks_2" for ScoreLattice/.../sharded/ranks:2 at one block.
INSTANTIATE_TEST_SUITE_P(, GpuLatticeMeasuredShapes, testing::ValuesIn(measured_lattice_cases()),
                         [](const testing::TestParamInfo<MeasuredLattice>& info) {
                           std::string n = "blocks" + std::to_string(info.param.blocks) + info.param.v.suffix;
                           for (char& ch : n)
                             if (!std::isalnum((unsigned char)ch)) ch = '_';
                           return n;
                         });

// Every way the lattice stages codebook rows: copied by the threads when a replicated row is
// not a multiple of 16 bytes (R = 17, 30, and 20 for 2-byte rows), in bulk when it is; R not a multiple of 16 ends the last k-step inside a row; with three ranks the
// rows of every record fit the slots only for small K x R, and at R = 1000 the merged rows are
// staged R in chunks (for K = 64 every type, for K = 16 F32), a chunk ending inside a row.
// Both placements, every float codebook type.
TEST(GpuLattice, EveryLoadWidthAndChunkOfR) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  struct Shape { int R, K; };
  for (Shape sh : {Shape{17, 8}, Shape{30, 16}, Shape{20, 16}, Shape{20, 64}, Shape{200, 16}, Shape{200, 64},
                   Shape{1000, 16}, Shape{1000, 64}})
    for (dfsel_type cb : {DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16})
      for (bool sharded : {false, true}) {
        SCOPED_TRACE("R=" + std::to_string(sh.R) + " K=" + std::to_string(sh.K) + " cb=" + dfsel_type_name(cb) +
                     (sharded ? " sharded" : ""));
        const Problem pb = make_problem(sh.K, sh.R, cb, 2, 5, Mode{0.7f, 0.05f, 0, 1}, rng());
        DevOut out;
        ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, 3, sharded, rng, &out));
      }
}

TEST(GpuLattice, AnchorOutOfRangeFlagsTheBlockAndEmitsNothing) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (bool sampling : {false, true})
    for (bool sharded : {false, true}) {
      SCOPED_TRACE(std::string(sharded ? "sharded" : "replicated") + (sampling ? " sampling" : " greedy"));
      const Problem pb = make_problem(8, 32, DFSEL_TYPE_BF16, 3, 6, Mode{sampling ? 1.0f : 0.0f, 0, 0, 1}, rng());
      const auto bounds = bounds_for(pb, 2, rng);
      std::vector<int32_t> anchors = pb.anchors;
      anchors[1] = (int32_t)pb.V;
      std::vector<std::vector<uint8_t>> sends;
      DevOut out;
      ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, sharded, anchors, &sends, &out));
      EXPECT_EQ(out.error, 2);
      ASSERT_NO_FATAL_FAILURE(compare(pb, expect(pb, sends, layout_of(pb, sharded), anchors), out, anchors));
      anchors[0] = -1;  // two bad blocks: one of them is reported
      ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, sharded, anchors, &sends, &out));
      EXPECT_TRUE(out.error == 1 || out.error == 2) << out.error;
      ASSERT_NO_FATAL_FAILURE(compare(pb, expect(pb, sends, layout_of(pb, sharded), anchors), out, anchors));
      ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, sharded, anchors, &sends, &out, 7));
      EXPECT_EQ(out.error, 7) << "an earlier error is never overwritten";
    }
}

class GpuLatticeRepeats : public testing::TestWithParam<int> {};
TEST_P(GpuLatticeRepeats, LaunchesAndGraphReplays) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const Problem pb = make_problem(GetParam(), 256, DFSEL_TYPE_BF16, 4, 16, Mode{0.9f, 0.05f, 0, 1}, rng());
  const auto bounds = bounds_for(pb, 3, rng);
  std::vector<std::vector<uint8_t>> sends;
  DevOut once, again, replay;
  ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, true, pb.anchors, &sends, &once));
  ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, true, pb.anchors, &sends, &again, 0, 3));
  ASSERT_NO_FATAL_FAILURE(run_lattice(pb, bounds, true, pb.anchors, &sends, &replay, 0, 3, true));
  ASSERT_NO_FATAL_FAILURE(compare(pb, expect(pb, sends, layout_of(pb, true), pb.anchors), once, pb.anchors));
  expect_bitwise(again, once);
  expect_bitwise(replay, once);
}
INSTANTIATE_TEST_SUITE_P(, GpuLatticeRepeats, testing::Values(16, 64),
                         [](const testing::TestParamInfo<int>& info) { return "K" + std::to_string(info.param); });

// Blocks longer than a cluster: each CTA takes several positions. L = 39 (K 16) pushes the
// choices to the walker but not the q rows; L = 79 at K = 64 leaves both in the workspace, and
// the walker stages the choices in two chunks. Every cluster size gives the same bits.
struct LongBlock {
  int K, block;
  float temperature;
};

void PrintTo(const LongBlock& c, std::ostream* os) { *os << "K=" << c.K << " block=" << c.block << " T=" << c.temperature; }

constexpr LongBlock kLongBlocks[] = {{16, 40, 0.0f}, {16, 40, 0.9f}, {64, 80, 0.0f}, {64, 80, 0.9f}};

class GpuLatticeLongBlocks : public testing::TestWithParam<LongBlock> {};
TEST_P(GpuLatticeLongBlocks, EveryClusterSize) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const LongBlock& lb = GetParam();
  Problem pb = make_problem(lb.K, 64, DFSEL_TYPE_BF16, 2, lb.block, Mode{lb.temperature, 0.02f, 0, 1}, rng());
  DevOut base;
  for (int cluster : {0, 1, 3, 8}) {
    SCOPED_TRACE("K=" + std::to_string(lb.K) + " block=" + std::to_string(lb.block) + " T=" +
                 std::to_string(lb.temperature) + " max_cluster=" + std::to_string(cluster));
    pb.max_cluster = cluster;
    DevOut out;
    ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, 2, cluster % 2 == 1, rng, &out));
    if (cluster == 0) base = out;
    else expect_bitwise(out, base);
  }
}
// Temperature in tenths: T9 is 0.9.
INSTANTIATE_TEST_SUITE_P(, GpuLatticeLongBlocks, testing::ValuesIn(kLongBlocks),
                         [](const testing::TestParamInfo<LongBlock>& info) {
                           const LongBlock& c = info.param;
                           return "K" + std::to_string(c.K) + "_block" + std::to_string(c.block) + "_T" +
                                  std::to_string((int)std::lround(c.temperature * 10));
                         });

// Codebooks whose rows are not 16-byte aligned are copied by the threads, 2 or 4 bytes a load,
// with the same results as aligned ones.
TEST(GpuLattice, UnalignedCodebooks) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (dfsel_type cb : {DFSEL_TYPE_F32, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0}) {
    Problem pb = make_problem(16, 64, cb, 2, 6, Mode{0.0f, 0.05f, 0, 1}, rng());
    DevOut aligned, shifted;
    ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, 2, false, rng, &aligned));
    pb.cb_offset = cb == DFSEL_TYPE_F32 ? 4 : 2;
    SCOPED_TRACE(std::string("cb=") + dfsel_type_name(cb) + " offset " + std::to_string(pb.cb_offset));
    ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, 2, false, rng, &shifted));
    expect_bitwise(shifted, aligned);
  }
}

// The lattice's paths at sanitizer sizes: K buckets 8, 16 and 64, every codebook type, one and
// three ranks, both placements, greedy and sampling with p_min.
TEST(GpuLattice, SmallShapesForSanitizers) {
  DFSEL_REQUIRE_GPUS(1);
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int K : {8, 16, 64})
    for (int ti = 0; ti < 4; ++ti) {
      const Mode m = ti % 2 ? Mode{0.8f, 0.05f, 20.0f, 1.0f} : Mode{0.0f, 0.1f, 0.0f, 1.5f};
      const Problem pb = make_problem(K, 32, kCbTypes[ti], 2, 5, m, rng());
      for (int S : {1, 3})
        for (bool sharded : {false, true}) {
          SCOPED_TRACE("K=" + std::to_string(K) + " cb=" + dfsel_type_name(pb.cb) + " S=" + std::to_string(S) +
                       (sharded ? " sharded" : " replicated"));
          DevOut out;
          ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, S, sharded, rng, &out));
        }
    }
  // Several positions per CTA (L = 39 over clusters of 16 or 3), and at K = 64 and L = 69 the
  // walker's tables in the workspace.
  struct Long { int K, block, cluster; };
  for (Long lg : {Long{8, 40, 0}, Long{8, 40, 3}, Long{64, 70, 0}}) {
    Problem pb = make_problem(lg.K, 32, DFSEL_TYPE_BF16, 2, lg.block, Mode{0.8f, 0.02f, 0.0f, 1.0f}, rng());
    pb.max_cluster = lg.cluster;
    SCOPED_TRACE("K=" + std::to_string(lg.K) + " block=" + std::to_string(lg.block));
    DevOut out;
    ASSERT_NO_FATAL_FAILURE(run_and_compare(pb, 2, lg.cluster == 3, rng, &out));
  }
}

}  // namespace
}  // namespace dfsel::test
