// How an engine on ggml-cuda drives dfsel under split-mode tensor (docs/ggml.md, "Under
// split-mode tensor"): between graph computes, each device's slice of the logits and its copy
// of the hidden state (ggml tensors in device memory) become dfsel_tensor views through
// dfsel_ggml_tensor, and one dfsel_run_group call over every device writes llama.cpp's packed
// lattice rows into each device's output tensor. A plan is created once per device when the
// draft is loaded.
//
//   ggml_op [--vocab V] [--blocks N]
//
// The vocabulary is split over every visible GPU, as llama.cpp splits output.weight under
// split-mode tensor. With NCCL the program creates one communicator per device itself
// (ncclCommInitAll): ggml-cuda's own are private to the comm context of ggml's meta backend.
// Without NCCL the plans exchange in process. The tensors are real `struct ggml_tensor`s whose
// data this program allocates with cudaMalloc; under split-mode tensor they are the meta
// backend's per-device tensors, which only ggml's static ggml_backend_meta_buffer_simple_tensor
// reaches today. The weights and inputs are synthetic; the program prints the drafted tokens
// that the packed rows encode.
#include <cuda_runtime.h>
#include <ggml.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "dfsel/dfsel.h"
#include "dfsel/ggml.h"

#if defined(DFSEL_WITH_NCCL)
#include <nccl.h>
#endif

namespace {

// The view of a ggml tensor; a tensor dfsel cannot read (a type, a layout) is reported with
// its name. An engine would report it and fall back to its CPU walker.
bool to_dfsel(const ggml_tensor* t, dfsel_tensor* v) {
  char msg[512];
  const dfsel_status s = dfsel_ggml_tensor(t, v, msg, sizeof msg);
  if (s != DFSEL_SUCCESS) std::fprintf(stderr, "dflash select: %s\n", msg);
  return s == DFSEL_SUCCESS;
}

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    const cudaError_t e_ = (x);                                                         \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                     \
      return false;                                                                     \
    }                                                                                   \
  } while (0)

// What the engine keeps per device between steps: created once, reused by every step (and by
// every replay of a CUDA graph that captured a step).
struct DeviceState {
  int device = 0;
  cudaStream_t stream = nullptr;  // the engine's own: ggml-cuda's streams are private to it
  dfsel_plan* plan = nullptr;
  void* nccl_comm = nullptr;  // an ncclComm_t the engine created for the split, or NULL
};

// One device's tensors of a step: its slice of the logits {v_end - v_begin, n_tokens}, its copy
// of the hidden states {n_embd, n_tokens}, its anchors (n_blocks token ids in device memory),
// and the packed lattice rows to write, F32 {n_embd, n_tokens}.
struct DeviceStep {
  const ggml_tensor* logits = nullptr;
  const ggml_tensor* hidden = nullptr;
  const int32_t* anchors = nullptr;
  ggml_tensor* packed = nullptr;
};

// The selector of one process that drives every device of the split from one thread, run
// between graph computes.
class SplitSelector {
 public:
  ~SplitSelector() {
    for (DeviceState& s : dev_) dfsel_plan_destroy(s.plan);
  }

  // Once per device, when the draft is loaded (not inside a graph capture: plans allocate).
  // e_prev / e_next are the device's codebook tensors ({R, V} replicated, {R, v_end - v_begin}
  // sharded), w_h {n_embd, R}.
  bool init_device(const dfsel_config& cfg, const dfsel_shard& shard, dfsel_placement placement,
                   const ggml_tensor* e_prev, const ggml_tensor* e_next, const ggml_tensor* w_h,
                   DeviceState state) {
    dfsel_plan_desc desc{};
    desc.config = cfg;
    desc.shard = shard;
    desc.backend = DFSEL_BACKEND_CUDA;
    desc.device = state.device;
    desc.placement = placement;
    if (!to_dfsel(e_prev, &desc.e_prev) || !to_dfsel(e_next, &desc.e_next) || !to_dfsel(w_h, &desc.w_h))
      return false;
    desc.nccl_comm = state.nccl_comm;
    char msg[512];
    const dfsel_status s = dfsel_plan_create(&desc, &state.plan, msg, sizeof msg);
    if (s != DFSEL_SUCCESS) {
      std::fprintf(stderr, "device %d: dfsel_plan_create: %s: %s\n", state.device, dfsel_status_string(s), msg);
      return false;
    }
    dev_.push_back(state);
    return true;
  }

  // One step, after the draft graph was computed: step[i] is device i's. Only enqueues work
  // on the devices' streams, so a graph capture can record it.
  bool compute(const DeviceStep* step) {
    const size_t n = dev_.size();
    std::vector<dfsel_plan*> plans(n);
    std::vector<dfsel_inputs> in(n);
    std::vector<dfsel_outputs> out(n);
    std::vector<void*> streams(n);
    for (size_t i = 0; i < n; ++i) {
      plans[i] = dev_[i].plan;
      streams[i] = dev_[i].stream;
      if (!to_dfsel(step[i].logits, &in[i].logits) || !to_dfsel(step[i].hidden, &in[i].hidden)) return false;
      in[i].anchors = step[i].anchors;
      in[i].n_blocks = int32_t(step[i].packed->ne[1] / block_size_);
      in[i].temperature = 0.0f;  // greedy; > 0 samples with draws keyed by (seed, block, position)
      // The packed rows are what llama.cpp's walker reads; path and n_emitted are required
      // outputs, kept in scratch space.
      out[i].packed = static_cast<float*>(step[i].packed->data);
      out[i].packed_row_stride = step[i].packed->nb[1];
      out[i].path = path_[i];
      out[i].n_emitted = n_emitted_[i];
    }
    // Every device of the split enters one call: the NCCL all-gathers of all of them are
    // grouped (or exchanged in process), as one thread may not wait on one rank at a time.
    const dfsel_status s = dfsel_run_group(int(n), plans.data(), in.data(), out.data(), streams.data());
    if (s != DFSEL_SUCCESS) {
      std::fprintf(stderr, "dfsel_run_group: %s: %s\n", dfsel_status_string(s), dfsel_plan_last_error(plans[0]));
      return false;
    }
    return true;
  }

  // Scratch for the required outputs: n_blocks * (block_size - 1) path entries, n_blocks counts.
  bool alloc_scratch(int32_t max_blocks, int32_t block_size) {
    block_size_ = block_size;
    for (DeviceState& s : dev_) {
      CHECK_CUDA(cudaSetDevice(s.device));
      int32_t *p = nullptr, *e = nullptr;
      CHECK_CUDA(cudaMalloc(&p, size_t(max_blocks) * size_t(block_size - 1) * sizeof(int32_t)));
      CHECK_CUDA(cudaMalloc(&e, size_t(max_blocks) * sizeof(int32_t)));
      path_.push_back(p);
      n_emitted_.push_back(e);
    }
    return true;
  }

  // Waits for the last step and reports errors found on the devices (an anchor outside [0, V)).
  bool check() {
    for (DeviceState& s : dev_) {
      const dfsel_status st = dfsel_plan_check(s.plan, s.stream);
      if (st != DFSEL_SUCCESS) {
        std::fprintf(stderr, "device %d: %s\n", s.device, dfsel_plan_last_error(s.plan));
        return false;
      }
    }
    return true;
  }

 private:
  std::vector<DeviceState> dev_;
  std::vector<int32_t*> path_, n_emitted_;
  int32_t block_size_ = 1;
};

// Seeded values in [-1, 1), the same on every device for the same global index.
float value(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9e3779b97f4a7c15ull + i * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 31)) * 0x94d049bb133111ebull;
  z ^= z >> 29;
  return float(double(z >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

// A named F32 ggml tensor {ne0, ne1} in ctx (no_alloc: ggml lays out ne/nb, the data is
// placed apart), its data in device memory filled by f(row, col).
template <typename F>
ggml_tensor* device_f32(ggml_context* ctx, const char* name, int64_t ne0, int64_t ne1, F f) {
  std::vector<float> h(size_t(ne0 * ne1));
  for (int64_t r = 0; r < ne1; ++r)
    for (int64_t c = 0; c < ne0; ++c) h[size_t(r * ne0 + c)] = f(r, c);
  ggml_tensor* t = ggml_new_tensor_2d(ctx, GGML_TYPE_F32, ne0, ne1);
  ggml_set_name(t, name);
  if (cudaMalloc(&t->data, ggml_nbytes(t)) != cudaSuccess ||
      cudaMemcpy(t->data, h.data(), ggml_nbytes(t), cudaMemcpyHostToDevice) != cudaSuccess) {
    std::fprintf(stderr, "%s: cannot place it in device memory\n", name);
    return nullptr;
  }
  return t;
}

bool run(int64_t V, int32_t n_blocks) {
  const int64_t E = 1024;  // n_embd: at least K + K * K for the packed rows
  const int32_t R = 256, K = 16, B = 16;
  int n_dev = 0;
  if (cudaGetDeviceCount(&n_dev) != cudaSuccess || n_dev == 0) {
    std::fprintf(stderr, "ggml_op: no CUDA device\n");
    return false;
  }
  const size_t n = static_cast<size_t>(n_dev);
  // The engine's own communicators, rank i on device i (the meta device's order): ggml-cuda
  // does not export the ones of its comm context.
  std::vector<void*> comms(n, nullptr);
#if defined(DFSEL_WITH_NCCL)
  std::vector<ncclComm_t> nccl(n);
  if (n_dev > 1) {
    if (ncclCommInitAll(nccl.data(), n_dev, nullptr) != ncclSuccess) return false;
    for (int i = 0; i < n_dev; ++i) comms[size_t(i)] = nccl[size_t(i)];
  }
#endif
  const dfsel_config cfg{V, E, R, K, B, 1.0f, 0.0f, n_blocks};
  const int64_t n_tokens = int64_t(n_blocks) * B;
  // The tensors' descriptions, as the draft's ggml context holds them (data placed apart).
  ggml_init_params params{};
  params.mem_size = 16 * n * ggml_tensor_overhead();
  params.no_alloc = true;
  ggml_context* ctx = ggml_init(params);
  if (!ctx) return false;
  SplitSelector selector;
  std::vector<DeviceStep> step(n);
  for (int i = 0; i < n_dev; ++i) {
    CHECK_CUDA(cudaSetDevice(i));
    DeviceState state;
    state.device = i;
    state.nccl_comm = comms[size_t(i)];
    CHECK_CUDA(cudaStreamCreateWithFlags(&state.stream, cudaStreamNonBlocking));
    // This device's vocabulary slice [vb, ve) and its rows of the codebooks (sharded).
    const int64_t vb = V * i / n_dev, ve = V * (i + 1) / n_dev;
    const dfsel_shard shard{i, n_dev, vb, ve};
    ggml_tensor* e_prev = device_f32(ctx, "selector_predecessor.weight", R, ve - vb,
                                     [&](int64_t r, int64_t c) { return 0.1f * value(1, uint64_t((vb + r) * R + c)); });
    ggml_tensor* e_next = device_f32(ctx, "selector_successor.weight", R, ve - vb,
                                     [&](int64_t r, int64_t c) { return 0.1f * value(2, uint64_t((vb + r) * R + c)); });
    ggml_tensor* w_h = device_f32(ctx, "selector_hidden.weight", E, R,
                                  [&](int64_t r, int64_t c) { return 0.03f * value(3, uint64_t(r * E + c)); });
    ggml_tensor* logits = device_f32(ctx, "result_output", ve - vb, n_tokens,
                                     [&](int64_t t, int64_t v) { return 3.0f * value(4, uint64_t(t * V + vb + v)); });
    ggml_tensor* hidden = device_f32(ctx, "result_norm", E, n_tokens,
                                     [&](int64_t t, int64_t c) { return value(5, uint64_t(t * E + c)); });
    ggml_tensor* packed = device_f32(ctx, "dflash_packed", E, n_tokens, [](int64_t, int64_t) { return 0.0f; });
    if (!e_prev || !e_next || !w_h || !logits || !hidden || !packed) return false;
    std::vector<int32_t> h_anchors(static_cast<size_t>(n_blocks));
    for (int32_t b = 0; b < n_blocks; ++b) h_anchors[size_t(b)] = int32_t((b * 7919 + 17) % V);
    int32_t* anchors = nullptr;
    CHECK_CUDA(cudaMalloc(&anchors, h_anchors.size() * sizeof(int32_t)));
    CHECK_CUDA(cudaMemcpy(anchors, h_anchors.data(), h_anchors.size() * sizeof(int32_t), cudaMemcpyHostToDevice));
    step[size_t(i)] = DeviceStep{logits, hidden, anchors, packed};
    if (!selector.init_device(cfg, shard, DFSEL_CODEBOOKS_SHARDED, e_prev, e_next, w_h, state)) return false;
  }
  if (!selector.alloc_scratch(n_blocks, B)) return false;
  if (!selector.compute(step.data()) || !selector.check()) return false;

  // The packed rows of device 0, read the way llama.cpp's walker reads them: row p of a block
  // holds the K candidate ids as floats, then the K x K scores (predecessor i, candidate j).
  std::vector<float> rows(static_cast<size_t>(n_tokens * E));
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaMemcpy(rows.data(), step[0].packed->data, rows.size() * sizeof(float), cudaMemcpyDeviceToHost));
  for (int32_t b = 0; b < n_blocks; ++b) {
    std::printf("block %d, greedy over the packed rows:", b);
    int prev = 0;
    for (int32_t p = 1; p < B; ++p) {
      const float* row = &rows[size_t((b * B + p) * E)];
      int best = 0;
      for (int j = 1; j < K; ++j)
        if (row[K + prev * K + j] > row[K + prev * K + best]) best = j;
      std::printf(" %d", int(row[best]));
      prev = best;
    }
    std::printf("\n");
  }
  ggml_free(ctx);
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t V = 248320;
  int32_t blocks = 1;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string a = argv[i];
    if (a == "--vocab") V = std::atoll(argv[i + 1]);
    else if (a == "--blocks") blocks = std::atoi(argv[i + 1]);
  }
  return run(V, blocks) ? 0 : 1;
}
