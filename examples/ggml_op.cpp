// How a ggml-cuda backend op drives dfsel (docs/ggml.md): the op's ggml tensors (device
// memory of ggml-cuda buffers) become dfsel_tensor views through dfsel_ggml_tensor, a plan is
// created once per device when the op is set up, and every step runs the plans on the
// devices' streams and writes llama.cpp's packed lattice rows into the op's dst tensor.
//
//   ggml_op [--vocab V] [--blocks N]
//
// The vocabulary is split over every visible GPU, as the lm_head is under split-mode tensor.
// With NCCL the devices exchange through one communicator per device (ncclCommInitAll, as
// ggml-cuda's comm context holds them when built with NCCL); without it through the
// in-process exchange. The tensors are real `struct ggml_tensor`s whose data this program
// allocates with cudaMalloc where ggml-cuda would place them in its buffers; the weights and
// inputs are synthetic; the program prints the drafted tokens that the packed rows encode.
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
// its name. In ggml-cuda an op would GGML_ABORT with the message or fall back to the CPU walker.
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

// What the op keeps per device between steps: created once, reused by every step (and by
// every replay of a CUDA graph that captured a step).
struct DeviceState {
  int device = 0;
  cudaStream_t stream = nullptr;
  dfsel_plan* plan = nullptr;
  void* nccl_comm = nullptr;  // an ncclComm_t of the tensor split, or NULL
};

// The dflash selector op for one process that drives every device of the split from one
// thread. dst of a step is the packed lattice rows, F32 {n_embd, n_tokens}, on each device.
class DflashSelectOp {
 public:
  ~DflashSelectOp() {
    for (DeviceState& s : dev_) dfsel_plan_destroy(s.plan);
  }

  // Once per device, when the op is set up (not inside a graph capture: plans allocate).
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

  // One step, the op's compute: dst[i] is device i's node, F32 {n_embd, n_tokens}, with
  // src[0] the device's logits slice {v_end - v_begin, n_tokens} and src[1] the hidden states
  // {n_embd, n_tokens}; anchors[i] holds n_blocks token ids in device memory. Only enqueues
  // work on the devices' streams, so a graph capture can record it.
  bool compute(const ggml_tensor* const* dst, const int32_t* const* anchors) {
    const size_t n = dev_.size();
    std::vector<dfsel_plan*> plans(n);
    std::vector<dfsel_inputs> in(n);
    std::vector<dfsel_outputs> out(n);
    std::vector<void*> streams(n);
    for (size_t i = 0; i < n; ++i) {
      plans[i] = dev_[i].plan;
      streams[i] = dev_[i].stream;  // ggml-cuda: ctx.stream() of device i
      if (!to_dfsel(dst[i]->src[0], &in[i].logits) || !to_dfsel(dst[i]->src[1], &in[i].hidden)) return false;
      in[i].anchors = anchors[i];
      in[i].n_blocks = int32_t(dst[i]->ne[1] / block_size_);
      in[i].temperature = 0.0f;  // greedy; > 0 samples with draws keyed by (seed, block, position)
      // The packed rows are what llama.cpp's walker reads; path and n_emitted are required
      // outputs, kept in the op's scratch space next to dst.
      out[i].packed = static_cast<float*>(dst[i]->data);
      out[i].packed_row_stride = dst[i]->nb[1];
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
  DflashSelectOp op;
  std::vector<ggml_tensor*> dst(n);
  std::vector<int32_t*> anchors(n);
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
    dst[size_t(i)] = device_f32(ctx, "dflash_select", E, n_tokens, [](int64_t, int64_t) { return 0.0f; });
    if (!e_prev || !e_next || !w_h || !logits || !hidden || !dst[size_t(i)]) return false;
    dst[size_t(i)]->src[0] = logits;  // the op node's sources, as the graph builder sets them
    dst[size_t(i)]->src[1] = hidden;
    std::vector<int32_t> h_anchors(static_cast<size_t>(n_blocks));
    for (int32_t b = 0; b < n_blocks; ++b) h_anchors[size_t(b)] = int32_t((b * 7919 + 17) % V);
    CHECK_CUDA(cudaMalloc(&anchors[size_t(i)], h_anchors.size() * sizeof(int32_t)));
    CHECK_CUDA(cudaMemcpy(anchors[size_t(i)], h_anchors.data(), h_anchors.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice));
    if (!op.init_device(cfg, shard, DFSEL_CODEBOOKS_SHARDED, e_prev, e_next, w_h, state)) return false;
  }
  if (!op.alloc_scratch(n_blocks, B)) return false;
  if (!op.compute(dst.data(), anchors.data()) || !op.check()) return false;

  // The packed rows of device 0, read the way llama.cpp's walker reads them: row p of a block
  // holds the K candidate ids as floats, then the K x K scores (predecessor i, candidate j).
  std::vector<float> rows(static_cast<size_t>(n_tokens * E));
  CHECK_CUDA(cudaSetDevice(0));
  CHECK_CUDA(cudaMemcpy(rows.data(), dst[0]->data, rows.size() * sizeof(float), cudaMemcpyDeviceToHost));
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
