// One selector step's plan, weights and rotated inputs on one device, shared by the step
// benchmarks (selector_step_bench.cu, step_timeline.cu). V = 248320, R = 256, K = 16, block 16,
// n_embd 5120, BF16 codebooks and W_h, F32 hidden, greedy.
#pragma once

#include <benchmark/benchmark.h>
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "bench_data.cuh"
#include "bench_util.cuh"

namespace dfsel::bench {

constexpr int kR = 256, kK = 16;
constexpr int64_t kEmbd = 5120;

struct StepShape {
  int blocks;
  int64_t vocab;
  int ranks;
  dfsel_placement placement;
  int block = 16;  // tokens per block (one anchor, block - 1 drafted rows)
  dfsel_type logits = DFSEL_TYPE_F32;
  bool all_outputs = false;  // every output a greedy step writes, packed rows included; else path and n_emitted
  int rows() const { return blocks * (block - 1); }
  std::string name(const char* family) const {
    std::string n = std::string(family) + "/";
    if (ranks > 1) n += "ranks:" + std::to_string(ranks) + "/";
    n += "tokens:" + std::to_string(blocks * block) + "/vocab:" + std::to_string(vocab) + "/k:16/" +
         (logits == DFSEL_TYPE_BF16 ? "bf16" : "f32") + "/bf16";
    if (ranks > 1) n += placement == DFSEL_CODEBOOKS_SHARDED ? "/sharded" : "/replicated";
    if (all_outputs) n += "/all_outputs";
    return n;
  }
  // Bytes read (logits rows, W_h, hidden rows, codebook rows gathered) and written (outputs).
  double bytes() const {
    const double rows = (double)this->rows();
    double b = rows * vocab * elem_bytes(logits) + (double)kR * kEmbd * 2 + rows * kEmbd * 4 + rows * kK * 2 * kR * 2;
    if (all_outputs) b += rows * kK * (4 + 4 + kK * 4) + (double)blocks * block * kEmbd * 4;
    return b;
  }
};

// One rank's plan, weights and rotated inputs on one device.
struct Rank {
  int device = 0;
  DeviceMem e_prev, e_next, w_h, hidden, anchors, path, n_emitted, cand_ids, unary, scores, packed;
  std::vector<std::unique_ptr<DeviceMem>> logits;  // rotated copies
  dfsel_plan* plan = nullptr;
  std::vector<dfsel_inputs> in;
  dfsel_outputs out{};
  cudaStream_t stream = nullptr;
  size_t workspace = 0;
  ~Rank() {
    cudaSetDevice(device);
    if (plan) dfsel_plan_destroy(plan);
    if (stream) cudaStreamDestroy(stream);
  }
};

inline bool setup_rank(benchmark::State& state, const StepShape& s, int rank, int device, int copies, void* comm, Rank* r) {
  r->device = device;
  cudaSetDevice(device);
  const int64_t vb = s.vocab * rank / s.ranks, ve = s.vocab * (rank + 1) / s.ranks, vs = ve - vb;
  const bool sharded = s.placement == DFSEL_CODEBOOKS_SHARDED;
  const int64_t cb_rows = sharded ? vs : s.vocab, cb_first = sharded ? vb : 0;
  const int64_t n_tokens = (int64_t)s.blocks * s.block;
  const size_t cb_row = (size_t)kR * 2;
  if (!cuda_ok(state, cudaStreamCreateWithFlags(&r->stream, cudaStreamNonBlocking), "cudaStreamCreate") ||
      !cuda_ok(state, r->e_prev.alloc(cb_rows * cb_row, device), "cudaMalloc e_prev") ||
      !cuda_ok(state, r->e_next.alloc(cb_rows * cb_row, device), "cudaMalloc e_next") ||
      !cuda_ok(state, r->w_h.alloc((size_t)kR * kEmbd * 2, device), "cudaMalloc w_h") ||
      !cuda_ok(state, r->hidden.alloc((size_t)n_tokens * kEmbd * 4, device), "cudaMalloc hidden") ||
      !cuda_ok(state, r->anchors.alloc((size_t)s.blocks * 4, device), "cudaMalloc anchors") ||
      !cuda_ok(state, r->path.alloc((size_t)s.rows() * 4, device), "cudaMalloc path") ||
      !cuda_ok(state, r->n_emitted.alloc((size_t)s.blocks * 4, device), "cudaMalloc n_emitted"))
    return false;
  if (s.all_outputs &&
      (!cuda_ok(state, r->cand_ids.alloc((size_t)s.rows() * kK * 4, device), "cudaMalloc cand_ids") ||
       !cuda_ok(state, r->unary.alloc((size_t)s.rows() * kK * 4, device), "cudaMalloc unary") ||
       !cuda_ok(state, r->scores.alloc((size_t)s.rows() * kK * kK * 4, device), "cudaMalloc scores") ||
       !cuda_ok(state, r->packed.alloc((size_t)n_tokens * kEmbd * 4, device), "cudaMalloc packed")))
    return false;
  // Rank-independent values: every rank sees the same global codebooks and hidden states.
  fill_hashed(r->e_prev.get(), DFSEL_TYPE_BF16, cb_rows * kR, 0.1f, 11 + cb_first * kR);
  fill_hashed(r->e_next.get(), DFSEL_TYPE_BF16, cb_rows * kR, 0.1f, 12 + cb_first * kR);
  fill_hashed(r->w_h.get(), DFSEL_TYPE_BF16, (size_t)kR * kEmbd, 0.02f, 13);
  fill_hashed(r->hidden.get(), DFSEL_TYPE_F32, (size_t)n_tokens * kEmbd, 1.0f, 14);
  std::vector<int32_t> anchors(s.blocks);
  for (int b = 0; b < s.blocks; ++b) anchors[b] = (int32_t)(hash64(b) % (uint64_t)s.vocab);
  cudaMemcpy(r->anchors.get(), anchors.data(), anchors.size() * 4, cudaMemcpyHostToDevice);
  for (int c = 0; c < copies; ++c) {
    r->logits.emplace_back(new DeviceMem());
    const size_t eb = elem_bytes(s.logits);
    if (!cuda_ok(state, r->logits.back()->alloc((size_t)n_tokens * vs * eb, device), "cudaMalloc logits")) return false;
    fill_hashed(r->logits.back()->get(), s.logits, (size_t)n_tokens * vs, 8.0f, 100 + c * 7919 + rank);
  }
  dfsel_plan_desc d{};
  d.config = dfsel_config{s.vocab, kEmbd, kR, kK, s.block, 1.0f, 0.0f, s.blocks};
  d.shard = dfsel_shard{rank, s.ranks, vb, ve};
  d.backend = DFSEL_BACKEND_CUDA;
  d.device = device;
  d.placement = s.placement;
  d.e_prev = matrix(r->e_prev.get(), DFSEL_TYPE_BF16, kR, cb_rows, cb_row);
  d.e_next = matrix(r->e_next.get(), DFSEL_TYPE_BF16, kR, cb_rows, cb_row);
  d.w_h = matrix(r->w_h.get(), DFSEL_TYPE_BF16, kEmbd, kR, (size_t)kEmbd * 2);
  d.nccl_comm = comm;
  char msg[512];
  if (dfsel_plan_create(&d, &r->plan, msg, sizeof msg) != DFSEL_SUCCESS) {
    state.SkipWithError(msg);
    return false;
  }
  dfsel_workspace_size(&d, &r->workspace, msg, sizeof msg);
  for (int c = 0; c < copies; ++c) {
    dfsel_inputs in{};
    in.logits = matrix(r->logits[c]->get(), s.logits, vs, n_tokens, (size_t)vs * elem_bytes(s.logits));
    in.hidden = matrix(r->hidden.get(), DFSEL_TYPE_F32, kEmbd, n_tokens, (size_t)kEmbd * 4);
    in.anchors = r->anchors.as<int32_t>();
    in.n_blocks = s.blocks;
    r->in.push_back(in);
  }
  r->out.path = r->path.as<int32_t>();
  r->out.n_emitted = r->n_emitted.as<int32_t>();
  if (s.all_outputs) {
    r->out.cand_ids = r->cand_ids.as<int32_t>();
    r->out.unary = r->unary.as<float>();
    r->out.scores = r->scores.as<float>();
    r->out.packed = r->packed.as<float>();
  }
  return cuda_ok(state, cudaDeviceSynchronize(), "set-up");
}

// The S ranks of one step on one GPU, driven by one thread (SimulatedShards, StepTimeline): each
// rank's plan and rotated inputs; enqueue runs call c's step of them all on one stream (one rank
// alone through dfsel_plan_run, a group through dfsel_run_group).
struct SimulatedGroup {
  std::vector<std::unique_ptr<Rank>> ranks;
  std::vector<dfsel_plan*> plans;
  std::vector<dfsel_inputs> in;
  std::vector<dfsel_outputs> out;

  bool setup(benchmark::State& state, const StepShape& s, int copies) {
    for (int i = 0; i < s.ranks; ++i) {
      ranks.emplace_back(new Rank());
      if (!setup_rank(state, s, i, 0, copies, nullptr, ranks.back().get())) return false;
      plans.push_back(ranks.back()->plan);
    }
    in.resize(s.ranks);
    out.resize(s.ranks);
    return true;
  }

  bool enqueue(int copy, cudaStream_t st) {
    const int n = (int)ranks.size();
    for (int i = 0; i < n; ++i) {
      in[i] = ranks[i]->in[copy];
      out[i] = ranks[i]->out;
    }
    if (n == 1) return dfsel_plan_run(plans[0], &in[0], &out[0], st) == DFSEL_SUCCESS;
    std::vector<void*> streams(n, st);
    return dfsel_run_group(n, plans.data(), in.data(), out.data(), streams.data()) == DFSEL_SUCCESS;
  }
};

}  // namespace dfsel::bench
