// The Runner: a synthetic problem (or a GGUF draft) run through the public C API on the CPU
// or on CUDA devices, for the dfsel command and the step benchmarks.
#include "synthetic.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <iterator>
#include <new>
#include <utility>

#include "field_names.h"
#include "kernels/common/numeric.cuh"

#if defined(DFSEL_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace dfsel::tools {

namespace {

// The kB of a line "name: N kB" of a /proc file, or -1.
double proc_kb(const char* file, const char* name) {
  std::FILE* f = std::fopen(file, "r");
  if (!f) return -1;
  char line[256];
  double kb = -1;
  const size_t n = std::strlen(name);
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, name, n) == 0 && std::sscanf(line + n, " %lf kB", &kb) == 1) break;
  std::fclose(f);
  return kb < 0 ? -1 : kb * 1024.0;
}

}  // namespace

double available_bytes() {
  double have = proc_kb("/proc/meminfo", "MemAvailable:");
  // A limit on the process: what it leaves above what the process uses already. RLIMIT_DATA
  // counts private writable memory (every allocation), RLIMIT_AS all of the address space.
  const std::pair<int, const char*> limits[] = {{RLIMIT_AS, "VmSize:"}, {RLIMIT_DATA, "VmData:"}};
  for (const auto& [resource, used_by] : limits) {
    struct rlimit rl {};
    if (getrlimit(resource, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY) continue;
    const double used = proc_kb("/proc/self/status", used_by);
    const double left = std::max(0.0, (double)rl.rlim_cur - std::max(0.0, used));
    have = have < 0 ? left : std::min(have, left);
  }
  return have;
}

namespace {

// The fields of a description as the command's user set them: a flag, or a draft's key.
constexpr FieldName kFlags[] = {
    {"config.n_vocab", "--vocab"},        {"config.n_embd", "--embd"},      {"config.codebook_rank", "--rank"},
    {"config.top_k", "--top-k"},          {"config.block_size", "--block-size"}, {"config.max_blocks", "--blocks"},
    {"shard.n_ranks", "--shards"},        {"n_threads", "--threads"},      {"inputs.temperature", "--temperature"},
    {"inputs.p_min", "--p-min"},          {"e_prev is Q8_0 but ne[0]", "--codebook-type q8_0 but --rank"}};
constexpr FieldName kDraftKeys[] = {
    {"config.n_vocab", "the draft's vocabulary (rows of selector_predecessor.weight)"},
    {"config.n_embd", "dflash.embedding_length"}, {"config.codebook_rank", "dflash.selector_rank"},
    {"config.top_k", "dflash.selector_top_k"},    {"config.block_size", "dflash.block_size"}};

constexpr UsersWords kWords{kFlags, std::size(kFlags), kDraftKeys, std::size(kDraftKeys)};

// A refusal of the library in the user's words (field_names.h: refusal).
std::string refusal(const Problem& p, dfsel_status st, const char* msg, bool* bad_request) {
  return dfsel::tools::refusal(st, msg, kWords, p.gguf.empty() ? "" : printable(p.gguf.c_str()), bad_request);
}

}  // namespace

struct Runner::Impl {
  Problem p;
  OpenDraft draft;  // until its weights are copied into h
  HostData h;
  bool cuda = false;
  int n_devices_used = 1;
  std::vector<dfsel_plan*> plans;
  std::vector<dfsel_inputs> in;
  std::vector<dfsel_outputs> out;
  std::vector<void*> streams;
  std::vector<void*> device_allocs;  // (device, pointer) pairs flattened: freed at the end
  std::vector<int> alloc_devices;
  std::vector<int32_t> host_path, host_emitted;
  std::vector<std::vector<uint8_t>> host_outputs;
  char note[64] = "";

  ~Impl() {
    for (dfsel_plan* pl : plans) dfsel_plan_destroy(pl);
#if defined(DFSEL_WITH_CUDA)
    for (size_t i = 0; i < device_allocs.size(); ++i) {
      cudaSetDevice(alloc_devices[i]);
      cudaFree(device_allocs[i]);
    }
    for (size_t i = 0; i < streams.size(); ++i) {
      if (streams[i]) cudaStreamDestroy(static_cast<cudaStream_t>(streams[i]));
    }
#endif
  }

  // Inputs in the memory the backend reads: a device copy for CUDA; the host data itself
  // for the CPU (every simulated shard reads the same buffers).
  const void* place(const void* src, size_t n, int device, std::string* err) {
#if defined(DFSEL_WITH_CUDA)
    if (cuda) return place_output(n, device, err, src);
#endif
    (void)n;
    (void)device;
    (void)err;
    return src;
  }

  // A buffer of n bytes the backend writes (with src: a copy of it).
  void* place_output(size_t n, int device, std::string* err, const void* src = nullptr) {
#if defined(DFSEL_WITH_CUDA)
    if (cuda) {
      void* d = nullptr;
      cudaSetDevice(device);
      const cudaError_t e = cudaMalloc(&d, n ? n : 16);
      if (e != cudaSuccess) {
        *err = "cudaMalloc of " + std::to_string(n) + " bytes on device " + std::to_string(device) +
               " failed: " + cudaGetErrorString(e);
        return nullptr;
      }
      device_allocs.push_back(d);
      alloc_devices.push_back(device);
      if (src) cudaMemcpy(d, src, n, cudaMemcpyHostToDevice);
      return d;
    }
#endif
    (void)device;
    (void)err;
    host_outputs.emplace_back(n ? n : 16);
    if (src) std::memcpy(host_outputs.back().data(), src, n);
    return host_outputs.back().data();
  }
};

Runner::Runner() : impl_(new Impl) {}
Runner::~Runner() = default;

static const auto matrix = dfsel_tensor_2d;

namespace {

// The description of shard s, on the weights given (or stand-ins that are never read).
dfsel_plan_desc describe(const Problem& p, int s, bool cuda, int dev, const void* ep, const void* en, const void* wh) {
  const int64_t vb = p.vocab * s / p.shards, ve = p.vocab * (s + 1) / p.shards;
  const size_t cb_row = row_bytes(p.cb_type, p.rank);
  const int64_t cb_rows = p.sharded ? ve - vb : p.vocab;
  dfsel_plan_desc d{};
  d.config = dfsel_config{p.vocab, p.embd, p.rank, p.top_k, p.block, p.logit_scale, p.softcap, p.blocks};
  d.shard = dfsel_shard{s, p.shards, vb, ve};
  d.backend = cuda ? DFSEL_BACKEND_CUDA : (p.backend == DFSEL_BACKEND_AUTO ? DFSEL_BACKEND_CPU : p.backend);
  d.device = dev;
  d.n_threads = p.threads;
  d.placement = p.sharded ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
  d.e_prev = matrix(ep, p.cb_type, p.rank, cb_rows, cb_row);
  d.e_next = matrix(en, p.cb_type, p.rank, cb_rows, cb_row);
  d.w_h = matrix(wh, p.wh_type, p.embd, p.rank, row_bytes(p.wh_type, p.embd));
  return d;
}

}  // namespace

// Validation first, through the library (dfsel_workspace_size judges every description by
// the rules plan creation applies), then the memory the problem needs against what the
// machine has: a request that cannot run is refused before anything is allocated.
bool Runner::setup(const Problem& problem, std::string* err, bool* bad_request) {
  Impl& m = *impl_;
  m.p = problem;
  bool unused;
  if (!bad_request) bad_request = &unused;
  *bad_request = false;
  const bool from_draft = !m.p.gguf.empty();
  if (from_draft && !open_gguf(&m.p, &m.draft, stdout, err)) return false;
  const Problem& p = m.p;
  *err = count_refusal(p.shards, p.blocks, p.vocab, from_draft);
  if (!err->empty()) return *bad_request = true, false;
  int n_gpus = 0;
  if (p.backend != DFSEL_BACKEND_CPU) dfsel_cuda_device_count(&n_gpus);
  m.cuda = p.backend == DFSEL_BACKEND_CUDA || (p.backend == DFSEL_BACKEND_AUTO && n_gpus > 0);
  const bool spread = m.cuda && n_gpus >= p.shards && p.shards > 1;
  alignas(64) static const uint8_t stand_in[64] = {};
  double plan_bytes = 0;
  for (int s = 0; s < p.shards; ++s) {
    const dfsel_plan_desc d = describe(p, s, m.cuda, spread ? s : 0, stand_in, stand_in, stand_in);
    size_t ws = 0;
    char msg[512] = "";
    const dfsel_status st = dfsel_workspace_size(&d, &ws, msg, sizeof msg);
    if (st != DFSEL_SUCCESS) {
      // Values the flags gave that no machine could run; a draft's own are the file's fault.
      const std::string why = refusal(p, st, msg, bad_request);
      *err = p.shards > 1 ? "shard " + std::to_string(s) + ": " + why : why;
      return false;
    }
    // The CPU backend also keeps W_h widened to floats.
    if (!m.cuda) plan_bytes += (double)ws + (double)p.embd * p.rank * 4.0;
  }
  // A draft's weights are copied too: counted in the inputs, copied only once they fit.
  const double inputs = host_bytes(p), need = inputs + plan_bytes, have = available_bytes();
  if (have >= 0 && need > have) {
    *err = "this problem needs about " + bytes_text(need) + " of memory (inputs" + (from_draft ? " and the draft's weights " : " ") +
           bytes_text(inputs) + ", plans " + bytes_text(plan_bytes) + ") and " + bytes_text(have) + " are available; " +
           (from_draft ? "lower --blocks or --shards, or run the draft where more memory is free"
                       : "lower --vocab, --embd, --blocks, --block-size or --shards");
    return false;
  }
  try {
    if (from_draft) copy_weights(&m.draft, &m.h, stdout, stderr);
    make_host_data(p, &m.h);
  } catch (const std::bad_alloc&) {
    *err = "the inputs (about " + bytes_text(inputs) + ") could not be allocated";
    return false;
  }
  m.n_devices_used = spread ? p.shards : 1;
  std::snprintf(m.note, sizeof m.note, "%s", !m.cuda ? "" : spread ? " on as many GPUs" : (p.shards > 1 ? " on one GPU" : ""));
  const size_t ls = elem_size(p.logits_type);
  const size_t cb_row = row_bytes(p.cb_type, p.rank);
  const int64_t n_tokens = (int64_t)p.blocks * p.block;
  const int L = p.block - 1;
  m.plans.assign(p.shards, nullptr);
  m.in.assign(p.shards, dfsel_inputs{});
  m.out.assign(p.shards, dfsel_outputs{});
  m.streams.assign(p.shards, nullptr);
  for (int s = 0; s < p.shards; ++s) {
    const int dev = spread ? s : 0;
    const int64_t vb = p.vocab * s / p.shards, ve = p.vocab * (s + 1) / p.shards;
#if defined(DFSEL_WITH_CUDA)
    if (m.cuda) {
      cudaSetDevice(dev);
      cudaStream_t st;
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
      m.streams[s] = st;
    }
#endif
    const int64_t cb_first = p.sharded ? vb : 0, cb_rows = p.sharded ? ve - vb : p.vocab;
    const void* ep = m.place(m.h.e_prev.data() + cb_first * cb_row, cb_rows * cb_row, dev, err);
    const void* en = m.place(m.h.e_next.data() + cb_first * cb_row, cb_rows * cb_row, dev, err);
    const void* wh = m.place(m.h.w_h.data(), m.h.w_h.size(), dev, err);
    // Each shard holds only its slice of every logits row, rows n_vocab elements apart.
    const void* lg = m.place(m.h.logits.data(), m.h.logits.size(), dev, err);
    const void* hd = m.place(m.h.hidden.data(), m.h.hidden.size(), dev, err);
    const void* an = m.place(m.h.anchors.data(), m.h.anchors.size() * 4, dev, err);
    if (!ep || !en || !wh || !lg || !hd || !an) return false;
    const dfsel_plan_desc d = describe(p, s, m.cuda, dev, ep, en, wh);
    char msg[512];
    const dfsel_status created = dfsel_plan_create(&d, &m.plans[s], msg, sizeof msg);
    if (created != DFSEL_SUCCESS) {
      *err = "plan for shard " + std::to_string(s) + ": " + refusal(p, created, msg, bad_request);
      return false;
    }
    dfsel_inputs& in = m.in[s];
    in.logits = matrix(static_cast<const uint8_t*>(lg) + vb * ls, p.logits_type, ve - vb, n_tokens, p.vocab * ls);
    in.hidden = matrix(hd, p.logits_type, p.embd, n_tokens, p.embd * ls);
    in.anchors = static_cast<const int32_t*>(an);
    in.n_blocks = p.blocks;
    in.temperature = p.temperature;
    in.p_min = p.p_min;
    in.seed = p.seed;
    dfsel_outputs& o = m.out[s];
    o.path = static_cast<int32_t*>(m.place_output((size_t)p.blocks * L * 4, dev, err));
    o.n_emitted = static_cast<int32_t*>(m.place_output((size_t)p.blocks * 4, dev, err));
    o.cand_ids = static_cast<int32_t*>(m.place_output((size_t)p.blocks * L * p.top_k * 4, dev, err));
    if (!o.path || !o.n_emitted || !o.cand_ids) return false;
  }
  return true;
}

bool Runner::step(double* us, std::string* err) {
  Impl& m = *impl_;
  const int n = (int)m.plans.size();
#if defined(DFSEL_WITH_CUDA)
  if (m.cuda) {
    cudaSetDevice(0);
    cudaEvent_t a, b;
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    cudaEventRecord(a, static_cast<cudaStream_t>(m.streams[0]));
    const dfsel_status st = dfsel_run_group(n, m.plans.data(), m.in.data(), m.out.data(), m.streams.data());
    if (st != DFSEL_SUCCESS) {
      *err = dfsel_plan_last_error(m.plans[0]);
      return false;
    }
    for (int s = 1; s < n; ++s) {
      cudaSetDevice(m.n_devices_used > 1 ? s : 0);
      cudaStreamSynchronize(static_cast<cudaStream_t>(m.streams[s]));
    }
    cudaSetDevice(0);
    cudaEventRecord(b, static_cast<cudaStream_t>(m.streams[0]));
    cudaEventSynchronize(b);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, b);
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    *us = ms * 1000.0;
    if (dfsel_plan_check(m.plans[0], m.streams[0]) != DFSEL_SUCCESS) {
      *err = dfsel_plan_last_error(m.plans[0]);
      return false;
    }
    return true;
  }
#endif
  const auto t0 = std::chrono::steady_clock::now();
  if (dfsel_run_group(n, m.plans.data(), m.in.data(), m.out.data(), nullptr) != DFSEL_SUCCESS) {
    *err = dfsel_plan_last_error(m.plans[0]);
    return false;
  }
  *us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
  return true;
}

void Runner::results(std::vector<int32_t>* path, std::vector<int32_t>* n_emitted) const {
  const Impl& m = *impl_;
  const size_t L = m.p.block - 1;
  path->assign((size_t)m.p.blocks * L, -1);
  n_emitted->assign(m.p.blocks, 0);
#if defined(DFSEL_WITH_CUDA)
  if (m.cuda) {
    cudaSetDevice(0);
    cudaMemcpy(path->data(), m.out[0].path, path->size() * 4, cudaMemcpyDeviceToHost);
    cudaMemcpy(n_emitted->data(), m.out[0].n_emitted, n_emitted->size() * 4, cudaMemcpyDeviceToHost);
    return;
  }
#endif
  std::memcpy(path->data(), m.out[0].path, path->size() * 4);
  std::memcpy(n_emitted->data(), m.out[0].n_emitted, n_emitted->size() * 4);
}

int32_t Runner::anchor(int b) const { return impl_->h.anchors[b]; }

void Runner::walk_stats(int* left_top, int* emitted) const {
  const Impl& m = *impl_;
  const size_t L = m.p.block - 1, K = m.p.top_k;
  std::vector<int32_t> path, n_emitted, cands((size_t)m.p.blocks * L * K);
  results(&path, &n_emitted);
#if defined(DFSEL_WITH_CUDA)
  if (m.cuda) {
    cudaSetDevice(0);
    cudaMemcpy(cands.data(), m.out[0].cand_ids, cands.size() * 4, cudaMemcpyDeviceToHost);
  } else
#endif
    std::memcpy(cands.data(), m.out[0].cand_ids, cands.size() * 4);
  *left_top = *emitted = 0;
  for (int b = 0; b < m.p.blocks; ++b)
    for (int p = 0; p < n_emitted[b]; ++p) {
      const size_t d = (size_t)b * L + p;
      *left_top += path[d] != cands[d * K] ? 1 : 0;
      ++*emitted;
    }
}
const Problem& Runner::problem() const { return impl_->p; }
const char* Runner::backend_name() const { return impl_->cuda ? "cuda" : "cpu"; }
const char* Runner::shard_note() const { return impl_->note; }
const char* Runner::timing_note() const {
  return impl_->cuda ? "CUDA events around one eager run" : "wall clock, CPU backend";
}

}  // namespace dfsel::tools
