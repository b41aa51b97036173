// The CUDA backend: set-up allocates, reads the device once and decides every launch (the
// top-K's split per row count, the gate's device, the lattice's carve and shared-memory
// limit); a run only enqueues kernels on the caller's stream (top-K and gate [, record rows],
// exchange, lattice + walk; the gate on a side stream forked from it when the top-K is one
// wave), chained where that pays, allocates nothing and can be captured in a CUDA graph.
#include <cuda_runtime.h>

#include <algorithm>
#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "host/backend/backend.h"
#include "host/backend/cuda_status.h"
#include "host/backend/device_digest.h"
#include "host/backend/env_int.h"
#include "kernels/agree_records.cuh"
#include "kernels/cluster_launch.cuh"
#include "kernels/common/agree_record.cuh"
#include "kernels/gate.cuh"
#include "kernels/pack_records.cuh"
#include "kernels/score_lattice.cuh"
#include "kernels/shard_topk.cuh"

namespace dfsel {

namespace {

// The run's error words (LatticeArgs::error): 1 + a block whose anchor is out of range; 1 + the
// lowest block whose ranks were given different inputs.
constexpr int kErrorWords = 2;

struct CudaCarve {
  size_t scratch, g, send, recv, lattice, choices, error, agree_sums, agree_tickets, total;
};

CudaCarve carve(const dfsel_plan_desc& desc, const PlanShape& sh, int num_sms) {
  const int32_t maxd = desc.config.max_blocks * sh.L;
  const ExchangeLayout l = sh.layout_for(desc.config.max_blocks);
  CudaCarve c{};
  size_t off = 0;
  auto take = [&](size_t bytes) { const size_t at = off; off += (bytes + 255) & ~(size_t)255; return at; };
  c.scratch = take(cuda::shard_topk_scratch_bytes(maxd, sh.k, sh.v_end - sh.v_begin, num_sms));
  c.error = take(kErrorWords * sizeof(int32_t));
  c.g = take((size_t)maxd * sh.R * sizeof(float));
  c.send = take(l.bytes);
  c.recv = sh.n_ranks == 1 ? c.send : take((size_t)desc.shard.n_ranks * l.bytes);
  c.lattice = take((size_t)maxd * sh.k * sh.k * sizeof(float));
  c.choices = take((size_t)maxd * sh.k * sizeof(int2));
  if (l.agree_off) {  // a group: agree_records' scratch
    c.agree_sums = take((size_t)desc.config.max_blocks * sizeof(uint64_t));
    c.agree_tickets = take((size_t)desc.config.max_blocks * sizeof(uint32_t));
  }
  c.total = off;
  return c;
}

// DFSEL_MAX_CLUSTER (an integer in [1, 16]): the largest thread-block cluster the plan's
// launches use (the gate's n_embd split, the lattice's cluster), for tools that cannot follow
// the non-portable sizes above 8 (compute-sanitizer's synccheck: scripts/gpu-check.sh). Unset:
// the largest the device holds. Every rank of a group must see the same value, as the gate's
// split sets the order of its sums.
Status cluster_cap(int* cap) {
  *cap = cuda::kMaxCluster;
  const char* env = std::getenv("DFSEL_MAX_CLUSTER");
  if (!env || !*env) return Status::success();
  int v = 0;
  const char* end = read_env_int(env, 1, cuda::kMaxCluster, &v);
  if (!end || *end)
    return fail(DFSEL_INVALID_ARGUMENT, "DFSEL_MAX_CLUSTER = \"%s\" must be an integer in [1, %d] (unset it for the "
                "largest cluster the device holds)", env, cuda::kMaxCluster);
  *cap = v;
  return Status::success();
}

Status sm_count(int device, int* n) {
  DFSEL_CUDA_TRY(cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  return Status::success();
}

class CudaBackend final : public Backend {
 public:
  CudaBackend(const dfsel_plan_desc& desc, const PlanShape& sh) : desc_(desc), sh_(sh) {}

  ~CudaBackend() override {
    DeviceGuard g(desc_.device);
    if (ready_) cudaEventDestroy(ready_);
    if (fork_) cudaEventDestroy(fork_);
    if (join_) cudaEventDestroy(join_);
    if (side_) cudaStreamDestroy(side_);
    if (owned_) cudaFree(owned_);
    if (host_flag_) cudaFreeHost(host_flag_);
  }

  Status init() {
    DFSEL_TRY(check_device(desc_.device));
    DeviceGuard g(desc_.device);
    DFSEL_TRY(sm_count(desc_.device, &num_sms_));
    int cap = 0;
    DFSEL_TRY(cluster_cap(&cap));
    DFSEL_CUDA_TRY(cuda::gate_device(desc_.device, &gate_dev_), "reading the device's attributes");
    gate_dev_.max_split = std::min(gate_dev_.max_split, cap);
    c_ = carve(desc_, sh_, num_sms_);
    DFSEL_TRY(device_workspace(desc_.workspace, desc_.workspace_bytes, c_.total, &owned_, &base_));
    DFSEL_CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    DFSEL_CUDA_TRY(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming), "cudaEventCreate");
    DFSEL_CUDA_TRY(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming), "cudaEventCreate");
    DFSEL_CUDA_TRY(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking), "cudaStreamCreate");
    // Page-locked memory is mapped for the device under unified addressing: the lattice's walker
    // stores to it directly when it flags a block.
    DFSEL_CUDA_TRY(cudaMallocHost(&host_flag_, sizeof(int32_t)), "cudaMallocHost of the run's error flag");
    *host_flag_ = 0;
    plan_topk_splits();
    if (sh_.layout_for(desc_.config.max_blocks).agree_off) {
      // A group's ranks compare W_h through their records: its digest, taken once here.
      uint64_t w = 0;
      DFSEL_TRY(device_matrix_digest(desc_.w_h, desc_.device, "w_h", &w));
      weights_digest_ = digest_fold(w);
    }
    cuda::LatticeArgs shape = lattice_args(desc_.config.max_blocks);
    const cudaError_t e = cuda::lattice_launch(shape, desc_.device, &lattice_, cap);
    // A carve larger than the device allows is this plan's limit; a refusal before any carve
    // (K or the codebook type without an instance, which validation refuses first) is the
    // set-up's own failure, reported as such below.
    if (e == cudaErrorInvalidValue && lattice_.smem.bytes > 0)
      return fail(DFSEL_UNSUPPORTED, "the lattice for K = %d, R = %d, block_size = %d and %d ranks needs %zu bytes of shared "
                  "memory, more than device %d has per block", sh_.k, sh_.R, sh_.block_size, sh_.n_ranks,
                  lattice_.smem.bytes, desc_.device);
    DFSEL_CUDA_TRY(e, "setting up the lattice kernel");
    DFSEL_CUDA_TRY(cudaDeviceSynchronize(), "set-up");
    return Status::success();
  }

  dfsel_backend kind() const override { return DFSEL_BACKEND_CUDA; }
  Endpoint endpoint() override { return Endpoint{send_buffer(), recv_buffer(), desc_.device, ready_}; }

  Status select(const dfsel_inputs& in, void* stream, bool follows_select) override {
    DeviceGuard guard(desc_.device);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    DFSEL_TRY(check_stream(st, desc_.device, true));
    const ExchangeLayout l = sh_.layout_for(in.n_blocks);
    last_anchors_ = in.anchors;
    last_layout_ = l;
    const RowMap map = drafted_rows(sh_.block_size);
    cuda::ShardTopKArgs t{};
    t.logits = in.logits.data;
    t.type = in.logits.type;
    t.n_cols = sh_.v_end - sh_.v_begin;
    t.row_stride = in.logits.nb[1];
    t.map = map;
    t.n_rows = l.n_drafted;
    t.k = sh_.k;
    t.id_offset = sh_.v_begin;
    t.out = layout_cands(l, send_buffer());
    t.out_stride = (size_t)sh_.k;
    t.scratch = base_ + c_.scratch;
    t.shares_sms = 1;  // the gate runs beside it
    const std::vector<int>& splits = splits_[row_bytes(in.logits.type, 1) == 4 ? 0 : 1];
    t.splits = in.n_blocks < (int32_t)splits.size() ? splits[in.n_blocks] : 1;
    cuda::GateArgs g{};
    g.w_h = desc_.w_h.data;
    g.w_type = desc_.w_h.type;
    g.w_row_stride = desc_.w_h.nb[1];
    g.hidden = in.hidden.data;
    g.h_type = in.hidden.type;
    g.h_row_stride = in.hidden.nb[1];
    g.n_embd = sh_.n_embd;
    g.R = sh_.R;
    g.map = map;
    g.n_rows = l.n_drafted;
    g.g = reinterpret_cast<float*>(base_ + c_.g);
    // The gate runs beside the top-K, one of two ways (kernels/common/chain.cuh for chaining;
    // measured on one H200, bench/results/README.md, 2026-12-01):
    //  - the top-K's grid is one resident wave: the top-K goes first on the caller's stream, so
    //    its CTAs spread evenly over the SMs, and the gate on the side stream, forked here and
    //    joined before the lattice (the gate first cost 256 tokens 117.7 us against 89.7);
    //  - several waves: a gate on the side stream finds no SM until the top-K drains (at 1024
    //    tokens it started at 212 us of 242), so it goes first on the caller's stream, and the
    //    top-K is chained to it and starts beside it (293 against 318 us).
    // After another plan's select on the same stream (a group of plans on one GPU), the first
    // kernel is chained too, so that the two selects share the GPU.
    forked_ = cuda::shard_topk_one_wave(t, num_sms_);
    if (forked_) {
      DFSEL_CUDA_TRY(cudaEventRecord(fork_, st), "cudaEventRecord");
      DFSEL_CUDA_TRY(cudaStreamWaitEvent(side_, fork_, 0), "cudaStreamWaitEvent");
    }
    if (forked_) {
      t.chained = follows_select ? 1 : 0;
      DFSEL_CUDA_TRY(cuda::shard_topk(t, num_sms_, st), "shard_topk launch");
      DFSEL_CUDA_TRY(cuda::gate(g, gate_dev_, side_), "gate launch");
      DFSEL_CUDA_TRY(cudaEventRecord(join_, side_), "cudaEventRecord");
    } else {
      g.chained = follows_select ? 1 : 0;
      t.chained = 1;
      DFSEL_CUDA_TRY(cuda::gate(g, gate_dev_, st), "gate launch");
      DFSEL_CUDA_TRY(cuda::shard_topk(t, num_sms_, st), "shard_topk launch");
    }
    if (sh_.sharded) {
      cuda::PackRecordsArgs p{};
      p.send = static_cast<uint8_t*>(send_buffer());
      p.layout = l;
      p.e_prev = desc_.e_prev.data;
      p.e_next = desc_.e_next.data;
      p.cb_row_stride = desc_.e_prev.nb[1];
      p.cb_row_bytes = sh_.cb_row_bytes;
      p.v_begin = sh_.v_begin;
      p.v_end = sh_.v_end;
      p.anchors = in.anchors;
      DFSEL_CUDA_TRY(cuda::pack_records(p, st), "pack_records launch");
    }
    // A group's ranks also write what they were given, chained last on the caller's stream: it
    // runs beside the top-K's tail, and the exchange after it waits for every kernel before.
    if (l.agree_off) {
      cuda::AgreeRecordsArgs r{};
      r.send = static_cast<uint8_t*>(send_buffer());
      r.layout = l;
      r.hidden = static_cast<const uint8_t*>(in.hidden.data);
      r.h_row_stride = in.hidden.nb[1];
      r.h_type = in.hidden.type;
      r.n_embd = sh_.n_embd;
      r.map = map;
      r.L = sh_.L;
      r.anchors = in.anchors;
      r.scalars = digest_fold(digest_scalars(in.temperature, in.p_min, in.seed, in.n_blocks));
      r.weights = weights_digest_;
      r.sums = reinterpret_cast<uint64_t*>(base_ + c_.agree_sums);
      r.tickets = reinterpret_cast<uint32_t*>(base_ + c_.agree_tickets);
      DFSEL_CUDA_TRY(cuda::agree_records(r, st), "agree_records launch");
    }
    if (sh_.n_ranks > 1) DFSEL_CUDA_TRY(cudaEventRecord(ready_, st), "cudaEventRecord");
    return Status::success();
  }

  Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void* stream) override {
    DeviceGuard guard(desc_.device);
    // The gate's side stream (select) joins here: the lattice reads g.
    if (forked_) DFSEL_CUDA_TRY(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream), join_, 0), "cudaStreamWaitEvent");
    cuda::LatticeArgs a = lattice_args(in.n_blocks);
    a.anchors = in.anchors;
    a.walk = WalkParams{in.temperature, in.p_min, in.seed};
    a.cand_ids = out.cand_ids;
    a.unary = out.unary;
    a.scores = out.scores;
    a.q = in.temperature > 0.0f ? out.q : nullptr;
    a.path = out.path;
    a.n_emitted = out.n_emitted;
    a.packed = out.packed;
    a.packed_row_stride = out.packed_row_stride;
    a.host_flag = host_flag_;
    DFSEL_CUDA_TRY(cuda::score_lattice(a, lattice_, static_cast<cudaStream_t>(stream)), "score_lattice launch");
    return Status::success();
  }

  Status query(void* stream, bool* done) override { return query_run(static_cast<cudaStream_t>(stream), desc_.device, done); }
  Status wait(void* stream) override { return wait_run(static_cast<cudaStream_t>(stream), desc_.device); }

  // What the completed run found on the device: ranks given different inputs, an anchor id out
  // of range. A clean run leaves host_flag_ 0 and costs no copy: reading the flags back after
  // every wait took about 10 us of a step between graph computes (one H200, dfsel_ggml_bench
  // DfselParts); copying them with the run, as many in a graph replay.
  Status report() override {
    if (*static_cast<volatile int32_t*>(host_flag_) == 0) return Status::success();
    DeviceGuard guard(desc_.device);
    int32_t err[kErrorWords] = {};
    int32_t* dev_err = reinterpret_cast<int32_t*>(base_ + c_.error);
    DFSEL_CUDA_TRY(cudaMemcpy(err, dev_err, sizeof err, cudaMemcpyDeviceToHost), "reading the run's error flags");
    DFSEL_CUDA_TRY(cudaMemset(dev_err, 0, sizeof err), "clearing the run's error flags");
    *host_flag_ = 0;
    if (err[0] == 0 && err[1] == 0) return Status::success();
    if (err[1] != 0) return ranks_disagree(err[1] - 1);
    const int b = err[0] - 1;
    int32_t a = 0;
    if (last_anchors_) cudaMemcpy(&a, last_anchors_ + b, sizeof a, cudaMemcpyDeviceToHost);
    return fail(DFSEL_INVALID_ARGUMENT, "inputs.anchors[%d] = %d is outside [0, %" PRId64 "); that block emitted nothing",
                b, a, sh_.n_vocab);
  }

 private:
  void* send_buffer() { return base_ + c_.send; }
  void* recv_buffer() { return base_ + c_.recv; }

  // The lattice found block b's agree records different (kernels/common/agree_record.cuh): the
  // first rank that differs from rank 0 and what, from every rank's records of the last run.
  Status ranks_disagree(int b) {
    const ExchangeLayout& l = last_layout_;
    std::vector<uint8_t> recv((size_t)sh_.n_ranks * l.bytes);
    DFSEL_CUDA_TRY(cudaMemcpy(recv.data(), recv_buffer(), recv.size(), cudaMemcpyDeviceToHost), "reading the run's records");
    uint32_t diff = 0;
    const int r = first_disagreeing_rank(l, recv.data(), sh_.n_ranks, b, &diff);
    if (r == sh_.n_ranks)
      return fail(DFSEL_INTERNAL_ERROR, "the lattice found the ranks' inputs for block %d different; their records agree", b);
    const AgreeRecord& a = *layout_agree(l, recv.data(), b);
    const AgreeRecord& o = *layout_agree(l, recv.data() + (size_t)r * l.bytes, b);
    if (diff & kAgreeAnchor)
      return fail(DFSEL_INVALID_ARGUMENT, "the ranks of this group were given different inputs: inputs.anchors[%d] is %d on "
                  "rank 0 and %d on rank %d; every rank must get the same anchors (that block emitted nothing)",
                  b, a.anchor, o.anchor, r);
    if (diff & kAgreeScalars)
      return fail(DFSEL_INVALID_ARGUMENT, "the ranks of this group were given different inputs: rank %d's temperature, p_min, "
                  "seed or n_blocks differ from rank 0's; every rank must get the same", r);
    if (diff & kAgreeHidden)
      return fail(DFSEL_INVALID_ARGUMENT, "the ranks of this group were given different inputs for block %d: rank %d's "
                  "inputs.hidden rows (type or bytes) differ from rank 0's; every rank must get the same", b, r);
    return fail(DFSEL_INVALID_ARGUMENT, "rank %d's plan holds a w_h with other values than rank 0's (a digest of its bytes "
                "taken at plan creation); every rank of a group must hold the same W_h", r);
  }

  // The lattice's arguments that do not change between runs of n_blocks blocks.
  cuda::LatticeArgs lattice_args(int32_t n_blocks) {
    cuda::LatticeArgs a{};
    a.rows = RowSource{static_cast<const uint8_t*>(recv_buffer()), sh_.layout_for(n_blocks), sh_.n_ranks,
                       static_cast<const uint8_t*>(desc_.e_prev.data), static_cast<const uint8_t*>(desc_.e_next.data),
                       desc_.e_prev.nb[1], sh_.n_vocab};
    a.k = sh_.k;
    a.R = sh_.R;
    a.block_size = sh_.block_size;
    a.n_blocks = n_blocks;
    a.cb_type = desc_.e_prev.type;
    a.transform = sh_.transform;
    a.g = reinterpret_cast<const float*>(base_ + c_.g);
    a.n_embd = sh_.n_embd;
    a.lattice = reinterpret_cast<float*>(base_ + c_.lattice);
    a.choices = reinterpret_cast<int2*>(base_ + c_.choices);
    a.error = reinterpret_cast<int32_t*>(base_ + c_.error);
    return a;
  }

  // The top-K's split for every block count that splits rows (more rows split less; past the
  // table every row is one CTA), for 4-byte and for 2-byte logits (a chunk is a number of
  // 16-byte vectors, so 2-byte rows split half as much).
  void plan_topk_splits() {
    cuda::ShardTopKArgs t{};
    t.n_cols = sh_.v_end - sh_.v_begin;
    t.k = sh_.k;
    t.id_offset = sh_.v_begin;
    t.shares_sms = 1;
    for (int w = 0; w < 2; ++w) {
      t.type = w == 0 ? DFSEL_TYPE_F32 : DFSEL_TYPE_BF16;
      splits_[w].assign(1, 1);
      for (int32_t nb = 1; nb <= desc_.config.max_blocks; ++nb) {
        t.n_rows = nb * sh_.L;
        const int s = cuda::shard_topk_splits(t, num_sms_);
        if (s <= 1) break;
        splits_[w].push_back(s);
      }
    }
  }

  dfsel_plan_desc desc_;
  PlanShape sh_;
  CudaCarve c_{};
  int num_sms_ = 0;
  cuda::GateDevice gate_dev_{};
  cuda::LatticeLaunch lattice_{};
  std::vector<int> splits_[2];  // top-K CTAs per row for n_blocks = index: 4-byte, 2-byte logits
  void* owned_ = nullptr;
  uint8_t* base_ = nullptr;
  int32_t* host_flag_ = nullptr;  // page-locked: 1 once a run flagged a block (report clears it)
  cudaEvent_t ready_ = nullptr;
  cudaEvent_t fork_ = nullptr, join_ = nullptr;
  cudaStream_t side_ = nullptr;  // the gate's, when it runs beside a one-wave top-K
  bool forked_ = false;          // this run's select put the gate on side_
  const int32_t* last_anchors_ = nullptr;
  ExchangeLayout last_layout_{};
  uint32_t weights_digest_ = 0;  // digest_fold of W_h's matrix_digest (a group's plans)
};

}  // namespace

Status cuda_device_count(int* n) {
  *n = 0;
  const cudaError_t e = cudaGetDeviceCount(n);
  if (e != cudaSuccess) {
    *n = 0;
    cudaGetLastError();
    return fail(DFSEL_NO_DEVICE, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
  }
  return Status::success();
}

Status cuda_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape, size_t* bytes) {
  DFSEL_TRY(check_device(desc.device));
  int num_sms = 0;
  DFSEL_TRY(sm_count(desc.device, &num_sms));
  *bytes = carve(desc, shape, num_sms).total;
  return Status::success();
}

Status make_cuda_backend(const dfsel_plan_desc& desc, const PlanShape& shape, std::unique_ptr<Backend>* out) {
  std::unique_ptr<CudaBackend> b(new CudaBackend(desc, shape));
  DFSEL_TRY(b->init());
  *out = std::move(b);
  return Status::success();
}

}  // namespace dfsel
