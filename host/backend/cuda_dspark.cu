// The CUDA backend of DSpark plans: one rank's part of the chain (docs/dspark.md) on one device,
// bitwise the reference for every shard count (kernels/dspark_chain.cuh). Plan creation checks
// d2t, sizes and allocates the workspace and chooses the pass's tile once; a run only enqueues
// kernels on the caller's stream (begin; per step the pass, and on several ranks the merge
// after the exchange), allocates nothing and can be captured in a CUDA graph.
#include <cuda_runtime.h>

#include <cinttypes>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "host/backend/cuda_status.h"
#include "host/backend/device_digest.h"
#include "host/backend/dspark_backend.h"
#include "host/backend/env_int.h"
#include "kernels/dspark_chain.cuh"
#include "kernels/dspark_launch.cuh"

namespace dfsel {

namespace {

int32_t padded8(int32_t R) { return (R + 7) / 8 * 8; }

struct DSparkCudaCarve {
  size_t send, recv, e, hconf, state, partials, l, ticket, inputs, error, slots, barrier, total;
};

// The workspace of a plan: the passes' per-CTA partials for `grid` CTAs (0: the plan runs the
// one-launch chain's kernel), or that kernel's slots and, on one rank, its grid barrier.
DSparkCudaCarve carve(const dfsel_dspark_plan_desc& desc, const DSparkShape& sh, int grid, bool one_launch) {
  const size_t maxb = (size_t)desc.config.max_blocks, vs = (size_t)(sh.v_end - sh.v_begin);
  const DSparkLayout lay = sh.layout_for(desc.config.max_blocks);
  DSparkCudaCarve c{};
  size_t off = 0;  // every buffer 256-byte aligned
  bool overflow = false;
  auto take = [&](size_t n, size_t size) {
    const size_t at = off;
    size_t bytes = 0, end = 0;
    if (__builtin_mul_overflow(n, size, &bytes) || __builtin_add_overflow(at, bytes, &end) || end > SIZE_MAX - 255)
      overflow = true;
    else
      off = (end + 255) & ~(size_t)255;
    return at;
  };
  c.send = take(lay.bytes, 1);
  c.recv = sh.n_ranks == 1 ? c.send : take((size_t)sh.n_ranks, lay.bytes);
  c.e = take(maxb * padded8(sh.R), sizeof(float));
  c.hconf = take(maxb * sh.N * kDotChains, sizeof(float));
  c.state = take(maxb, sizeof(DSparkChainState));
  c.partials = take((size_t)grid * maxb, sizeof(cuda::DSparkPartial));
  // Sampling keeps two steps of l: a step's normaliser waits for its row maximum.
  c.l = take(2 * maxb, vs * sizeof(float));
  c.ticket = take(1, sizeof(uint32_t));
  c.inputs = take(maxb, sizeof(uint32_t));
  c.error = take(cuda::kDSparkErrors, sizeof(int32_t));
  c.slots = take(one_launch ? (size_t)(sh.N + 2) * maxb : 0, sizeof(cuda::DSparkStepSlot));
  c.barrier = take(one_launch && sh.n_ranks == 1 ? 1 : 0, sizeof(uint32_t));
  c.total = overflow ? SIZE_MAX : off;
  return c;
}

// A tensor's rows as the chain's kernels take them: the first row, the row stride, the type.
void bind_rows(const dfsel_tensor& t, const uint8_t*& rows, size_t& stride, dfsel_type& type) {
  rows = static_cast<const uint8_t*>(t.data);
  stride = t.nb[1];
  type = t.type;
}

// The chain's arguments that hold for every run of the plan (the weights, the sizes).
cuda::DSparkChainArgs plan_args(const dfsel_dspark_plan_desc& d, const DSparkShape& sh) {
  cuda::DSparkChainArgs a{};
  bind_rows(d.w1, a.w1, a.w1_stride, a.w1_type);
  bind_rows(d.w2, a.w2, a.w2_stride, a.w2_type);
  a.scale = static_cast<const float*>(d.w2_scale.data);
  a.scale_rows = sh.scale_rows;
  a.conf_w = static_cast<const uint8_t*>(d.conf_w.data);
  a.conf_type = d.conf_w.type;
  a.conf_bias = d.conf_bias;
  a.n_embd = sh.n_embd;
  a.d2t = d.d2t;
  a.R = sh.R;
  a.R8 = padded8(sh.R);
  a.N = sh.N;
  a.v_begin = sh.v_begin;
  a.v_end = sh.v_end;
  a.n_target_vocab = sh.n_target_vocab;
  a.n_ranks = sh.n_ranks;
  a.max_blocks = d.config.max_blocks;
  a.sharded_w1 = sh.sharded_w1;
  a.transform = sh.transform;
  a.row_map = sh.row_map;
  return a;
}

// DFSEL_DSPARK_TILE ("ROWSxSTAGES"): a pass tile to measure instead of the list's; rows 0 when
// unset.
Status asked_tile(cuda::DSparkTile* t) {
  *t = cuda::DSparkTile{0, 0};
  const char* env = std::getenv("DFSEL_DSPARK_TILE");
  if (!env || !*env) return Status::success();
  int rows = 0, stages = 0;
  const int largest = 16 * cuda::kMaxMmaWarps;  // the chains' CTA holds kDSparkTiles[0]'s rows at most
  const char* x = read_env_int(env, 16, largest, &rows);
  const char* end = x && *x == 'x' ? read_env_int(x + 1, 2, 3, &stages) : nullptr;
  if (!end || *end || rows % 16 != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "DFSEL_DSPARK_TILE = \"%s\" must be ROWSxSTAGES: rows a multiple of 16 in [16, %d], "
                "stages 2 or 3 (unset it for the measured default)", env, largest);
  *t = cuda::DSparkTile{rows, stages};
  return Status::success();
}

// DFSEL_DSPARK_L2: the one launch's L2 policy (kernels/dspark_launch.cuh), to measure: "off"
// (none), or PERCENT of W2's slices kept; unset or "auto": dspark_l2_keep's share, sized at
// each run for the plans of the call on the device. *keep: the share, or auto (UINT32_MAX - 1).
constexpr uint32_t kKeepAuto = cuda::kDSparkKeepOff - 1;
Status asked_keep(uint32_t* keep) {
  *keep = kKeepAuto;
  const char* env = std::getenv("DFSEL_DSPARK_L2");
  if (!env || !*env || std::strcmp(env, "auto") == 0) return Status::success();
  if (std::strcmp(env, "off") == 0) return *keep = cuda::kDSparkKeepOff, Status::success();
  int pct = 0;
  const char* end = read_env_int(env, 0, 100, &pct);
  if (!end || *end)
    return fail(DFSEL_INVALID_ARGUMENT, "DFSEL_DSPARK_L2 = \"%s\" must be auto, off or a percentage of W2 to keep in "
                "the L2 (unset it for auto)", env);
  *keep = (uint32_t)(pct * 65536 / 100);
  return Status::success();
}

// DFSEL_DSPARK_PRODUCT: how the chain multiplies W2 by e. Unset, "" or "auto": on tensor cores
// where the plan allows it (cuda::dspark_mma_supported), in the one-launch chain's kernel
// (kernels/dspark_launch.cuh: one launch for the whole chain on one rank, a launch a step on
// several), else the eight chains; "chains": the eight chains always (bitwise the CPU backend);
// "mma": as auto, refused where tensor cores do not apply; "mma-steps": tensor cores in the pass,
// a launch a step with a last-CTA merge, on any number of ranks (to compare with the other).
Status asked_product(const cuda::DSparkChainArgs& a, const dfsel_dspark_plan_desc& d, bool* mma, bool* steps) {
  const char* env = std::getenv("DFSEL_DSPARK_PRODUCT");
  const bool supported = cuda::dspark_mma_supported(a);
  *mma = supported;
  *steps = false;
  if (!env || !*env || std::strcmp(env, "auto") == 0) return Status::success();
  if (std::strcmp(env, "chains") == 0) return *mma = false, Status::success();
  *steps = std::strcmp(env, "mma-steps") == 0;
  if (std::strcmp(env, "mma") != 0 && !*steps)
    return fail(DFSEL_INVALID_ARGUMENT, "DFSEL_DSPARK_PRODUCT = \"%s\" must be auto, chains, mma or mma-steps (unset it "
                "for auto)", env);
  if (!supported)
    return fail(DFSEL_UNSUPPORTED, "DFSEL_DSPARK_PRODUCT = %s needs desc.w2 stored as BF16 (it is %s), "
                "config.markov_rank a multiple of 32 up to 256 (it is %d) and W2's data and nb[1] multiples of 16 "
                "bytes (%p, %zu)", env, dfsel_type_name(d.w2.type), a.R, d.w2.data, d.w2.nb[1]);
  return Status::success();
}

// The pass's launch for a plan (and with it the grid the workspace is sized by), or where the
// tensor cores take the product, the one-launch chain kernel's (*one_launch).
Status plan_pass(const dfsel_dspark_plan_desc& d, const DSparkShape& sh, cuda::DSparkPassLaunch* out,
                 cuda::DSparkLaunch* launch, bool* one_launch) {
  cuda::DSparkTile asked{};
  DFSEL_TRY(asked_tile(&asked));
  const cuda::DSparkChainArgs a = plan_args(d, sh);
  bool mma = false, steps = false;
  DFSEL_TRY(asked_product(a, d, &mma, &steps));
  *one_launch = mma && !steps && cuda::dspark_launch_supported(a);
  if (*one_launch) {
    // DFSEL_DSPARK_LAUNCH ("NARROW" or "NARROW/WIDE"): builds of the one-launch kernel to
    // measure instead of the defaults (kernels/dspark_launch.cu names them).
    const char* env = std::getenv("DFSEL_DSPARK_LAUNCH");
    std::string narrow = env && *env ? env : "", wide;
    if (const size_t at = narrow.find('/'); at != std::string::npos) wide = narrow.substr(at + 1), narrow.resize(at);
    const cudaError_t e = cuda::dspark_launch_setup(a, d.device, narrow.empty() ? nullptr : narrow.c_str(),
                                                    wide.empty() ? nullptr : wide.c_str(), launch);
    if (e == cudaErrorNotSupported)
      return fail(DFSEL_INVALID_ARGUMENT, "DFSEL_DSPARK_LAUNCH = \"%s\" must be NARROW or NARROW/WIDE, each a build of "
                  "the one-launch chain: 8x2s, 16x1s16, 16x1s12, 8x2n or 16x2n (unset it for the defaults)", env);
    if (e == cudaErrorInvalidValue && env && *env)
      return fail(DFSEL_UNSUPPORTED, "DFSEL_DSPARK_LAUNCH = \"%s\": that build of the one-launch DSpark chain for R = %d "
                  "and config.max_blocks = %d does not fit the shared memory of device %d (unset it for the defaults, "
                  "which fall back to builds that fit)", env, sh.R, d.config.max_blocks, d.device);
    if (e == cudaErrorInvalidValue)
      return fail(DFSEL_UNSUPPORTED, "the one-launch DSpark chain for R = %d and config.max_blocks = %d does not fit the "
                  "shared memory of device %d (DFSEL_DSPARK_PRODUCT=mma-steps runs the pass instead)", sh.R,
                  d.config.max_blocks, d.device);
    DFSEL_CUDA_TRY(e, "setting up the one-launch DSpark chain");
    DFSEL_TRY(asked_keep(&launch->keep));
    *out = cuda::DSparkPassLaunch{};  // no pass runs: grid 0, no partials
    return Status::success();
  }
  const cudaError_t e = cuda::dspark_pass_setup(a, d.device, asked, mma, out);
  if (e == cudaErrorInvalidValue && asked.rows > cuda::kDSparkTiles[0].rows && !mma)
    return fail(DFSEL_UNSUPPORTED, "DFSEL_DSPARK_TILE = %dx%d: the eight-chain pass takes at most %d rows a tile (more "
                "are for the tensor-core pass, DFSEL_DSPARK_PRODUCT)", asked.rows, asked.stages, cuda::kDSparkTiles[0].rows);
  if (e == cudaErrorInvalidValue && asked.rows)
    return fail(DFSEL_UNSUPPORTED, "DFSEL_DSPARK_TILE = %dx%d does not fit the shared memory of device %d for R = %d and "
                "config.max_blocks = %d", asked.rows, asked.stages, d.device, sh.R, d.config.max_blocks);
  if (e == cudaErrorInvalidValue)
    return fail(DFSEL_UNSUPPORTED, "the DSpark pass for R = %d, w2 type %d and config.max_blocks = %d does not fit the "
                "shared memory of device %d", sh.R, (int)d.w2.type, d.config.max_blocks, d.device);
  DFSEL_CUDA_TRY(e, "setting up the DSpark pass");
  return Status::success();
}

class CudaDSpark final : public DSparkBackend {
 public:
  CudaDSpark(const dfsel_dspark_plan_desc& desc, const DSparkShape& sh) : d_(desc), sh_(sh), a_(plan_args(desc, sh)) {}

  ~CudaDSpark() override {
    DeviceGuard g(d_.device);
    if (ready_) cudaEventDestroy(ready_);
    if (owned_) cudaFree(owned_);
  }

  Status init() {
    DFSEL_TRY(check_device(d_.device));
    DeviceGuard g(d_.device);
    DFSEL_TRY(plan_pass(d_, sh_, &pass_, &launch_, &one_launch_));
    asked_keep_ = launch_.keep;
    int l2 = 0;
    DFSEL_CUDA_TRY(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, d_.device), "cudaDeviceGetAttribute");
    l2_bytes_ = (size_t)l2;
    c_ = carve(d_, sh_, pass_.grid, one_launch_);
    if (c_.total == SIZE_MAX)
      return fail(DFSEL_OUT_OF_MEMORY, "the DSpark workspace for config.max_blocks = %d does not fit the address space",
                  d_.config.max_blocks);
    DFSEL_TRY(device_workspace(d_.workspace, d_.workspace_bytes, c_.total, &owned_, &base_));
    DFSEL_CUDA_TRY(cudaEventCreateWithFlags(&ready_, cudaEventDisableTiming), "cudaEventCreate");
    a_.send = base_ + c_.send;
    a_.recv = base_ + c_.recv;
    a_.e = reinterpret_cast<float*>(base_ + c_.e);
    a_.hconf = reinterpret_cast<float*>(base_ + c_.hconf);
    a_.state = reinterpret_cast<DSparkChainState*>(base_ + c_.state);
    a_.partials = reinterpret_cast<cuda::DSparkPartial*>(base_ + c_.partials);
    a_.l_store = reinterpret_cast<float*>(base_ + c_.l);
    a_.ticket = reinterpret_cast<uint32_t*>(base_ + c_.ticket);
    a_.inputs = reinterpret_cast<uint32_t*>(base_ + c_.inputs);
    a_.slots = one_launch_ ? reinterpret_cast<cuda::DSparkStepSlot*>(base_ + c_.slots) : nullptr;
    a_.barrier = one_launch_ && sh_.n_ranks == 1 ? reinterpret_cast<uint32_t*>(base_ + c_.barrier) : nullptr;
    // A group's ranks compare conf_w through their records: its digest, taken once here.
    if (sh_.n_ranks > 1 && d_.conf_w.data) DFSEL_TRY(device_matrix_digest(d_.conf_w, d_.device, "conf_w", &a_.conf_w_digest));
    a_.error = reinterpret_cast<int32_t*>(base_ + c_.error);
    DFSEL_CUDA_TRY(cudaDeviceSynchronize(), "set-up");
    return Status::success();
  }

  dfsel_backend kind() const override { return DFSEL_BACKEND_CUDA; }
  Endpoint endpoint() override { return Endpoint{base_ + c_.send, base_ + c_.recv, d_.device, ready_}; }

  Status begin(const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out, void* stream, int sharers) override {
    DeviceGuard guard(d_.device);
    launch_.keep = asked_keep_ != kKeepAuto ? asked_keep_
                                            : cuda::dspark_l2_keep((size_t)(sh_.v_end - sh_.v_begin) * d_.w2.nb[1],
                                                                   l2_bytes_, sharers);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    DFSEL_TRY(check_stream(st, d_.device, true));
    a_.layout = sh_.layout_for(in.n_blocks);
    bind_rows(in.logits, a_.logits, a_.logits_stride, a_.logits_type);
    bind_rows(in.hidden, a_.hidden, a_.hidden_stride, a_.hidden_type);
    a_.anchors = in.anchors;
    a_.n_blocks = in.n_blocks;
    a_.temperature = in.temperature;
    a_.p_min = in.p_min;
    a_.seed = in.seed;
    a_.out = out;
    last_anchors_ = in.anchors;
    DFSEL_CUDA_TRY(cuda::dspark_begin(a_, st), "dspark_begin launch");
    return Status::success();
  }

  // Exchange x: 0 was written by begin; 1..N step x; N + 1 step N's normaliser. The one-launch
  // chain runs every step at exchange 1 on one rank, its kernel a step at every exchange on
  // several.
  Status send(int32_t x, void* stream) override {
    DeviceGuard guard(d_.device);
    cudaStream_t st = static_cast<cudaStream_t>(stream);
    if (one_launch_ && sh_.n_ranks == 1 && x == 1)
      DFSEL_CUDA_TRY(cuda::dspark_launch_run(a_, launch_, st), "dspark_launch_run");
    if (one_launch_ && sh_.n_ranks > 1 && x >= 1)
      DFSEL_CUDA_TRY(cuda::dspark_launch_step(a_, launch_, x, st), "dspark_launch_step");
    if (!one_launch_ && x >= 1) DFSEL_CUDA_TRY(cuda::dspark_pass(a_, x, pass_, st), "dspark_pass launch");
    if (sh_.n_ranks > 1) DFSEL_CUDA_TRY(cudaEventRecord(ready_, st), "cudaEventRecord");
    return Status::success();
  }

  // One rank's records were merged by the pass's last CTA; several ranks merge here.
  Status receive(int32_t x, void* stream) override {
    if (sh_.n_ranks == 1) return Status::success();
    DeviceGuard guard(d_.device);
    DFSEL_CUDA_TRY(cuda::dspark_merge(a_, x, static_cast<cudaStream_t>(stream)), "dspark_merge launch");
    return Status::success();
  }

  Status query(void* stream, bool* done) override { return query_run(static_cast<cudaStream_t>(stream), d_.device, done); }
  Status wait(void* stream) override { return wait_run(static_cast<cudaStream_t>(stream), d_.device); }

  // What the completed run found on the device: ranks given different inputs, an anchor out of
  // range, (sharded W1) an anchor whose W1 row no rank held, or a d2t entry changed out of
  // range after creation.
  Status report() override {
    DeviceGuard guard(d_.device);
    int32_t err[cuda::kDSparkErrors] = {};
    DFSEL_CUDA_TRY(cudaMemcpy(err, a_.error, sizeof err, cudaMemcpyDeviceToHost), "reading the run's error flags");
    if (err[0] == 0 && err[1] == 0 && err[2] == 0 && err[7] == 0) return Status::success();
    DFSEL_CUDA_TRY(cudaMemset(a_.error, 0, sizeof err), "clearing the run's error flags");
    if (err[7] != 0) {  // every rank's records of the block still hold what each was given
      const DSparkLayout& lay = a_.layout;
      std::vector<uint8_t> recv((size_t)sh_.n_ranks * lay.bytes);
      DFSEL_CUDA_TRY(cudaMemcpy(recv.data(), a_.recv, recv.size(), cudaMemcpyDeviceToHost), "reading the run's records");
      const Status s = ranks_given_different_inputs(lay, recv.data(), sh_.n_ranks, err[7] - 1);
      if (!s.ok()) return s;
      return fail(DFSEL_INTERNAL_ERROR, "the device found the ranks' inputs for block %d different; their records agree",
                  err[7] - 1);
    }
    if (err[0] == 0 && err[1] == 0) return bad_d2t_entry(err[3], err[4], err[5], err[6], sh_.n_target_vocab);
    const int b = (err[0] != 0 ? err[0] : err[1]) - 1;
    int32_t anchor = 0;
    if (last_anchors_) cudaMemcpy(&anchor, last_anchors_ + b, sizeof anchor, cudaMemcpyDeviceToHost);
    if (err[0] != 0)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs.anchors[%d] = %d is outside [0, config.n_target_vocab = %" PRId64
                  "); that block emitted nothing", b, anchor, sh_.n_target_vocab);
    return fail(DFSEL_INTERNAL_ERROR, "no rank holds the W1 row of inputs.anchors[%d] = %d", b, anchor);
  }

 private:
  dfsel_dspark_plan_desc d_;
  DSparkShape sh_;
  cuda::DSparkChainArgs a_;
  cuda::DSparkPassLaunch pass_{};
  cuda::DSparkLaunch launch_{};
  uint32_t asked_keep_ = 0;  // DFSEL_DSPARK_L2's share, or kKeepAuto
  size_t l2_bytes_ = 0;
  bool one_launch_ = false;
  DSparkCudaCarve c_{};
  void* owned_ = nullptr;
  uint8_t* base_ = nullptr;
  cudaEvent_t ready_ = nullptr;
  const int32_t* last_anchors_ = nullptr;
};

}  // namespace

Status cuda_dspark_workspace_bytes(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape, size_t* bytes) {
  DFSEL_TRY(check_device(desc.device));
  DeviceGuard g(desc.device);
  cuda::DSparkPassLaunch pass{};
  cuda::DSparkLaunch launch{};
  bool one_launch = false;
  DFSEL_TRY(plan_pass(desc, shape, &pass, &launch, &one_launch));
  *bytes = carve(desc, shape, pass.grid, one_launch).total;
  return Status::success();
}

Status make_cuda_dspark_backend(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape,
                                std::unique_ptr<DSparkBackend>* out) {
  std::unique_ptr<CudaDSpark> b(new CudaDSpark(desc, shape));
  DFSEL_TRY(b->init());
  *out = std::move(b);
  return Status::success();
}

}  // namespace dfsel
