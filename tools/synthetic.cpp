#include "synthetic.h"

#include <chrono>
#include <cmath>
#include <cstring>

#include "dfsel/gguf.h"
#include "kernels/common/numeric.cuh"

#if defined(DFSEL_WITH_CUDA)
#include <cuda_runtime.h>
#endif

namespace dfsel::tools {

namespace {

uint64_t splitmix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Approximately normal: the sum of four uniforms, centred and scaled to unit variance.
float normalish(uint64_t* s) {
  const uint64_t a = splitmix(s), b = splitmix(s);
  const float u = ((a & 0xffffffu) + ((a >> 32) & 0xffffffu) + (b & 0xffffffu) + ((b >> 32) & 0xffffffu)) / 16777216.0f;
  return (u - 2.0f) * 1.7320508f;
}

size_t elem_size(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

}  // namespace

void fill_random(std::vector<uint8_t>* out, dfsel_type t, size_t n, float sigma, uint64_t seed) {
  uint64_t s = seed * 0x2545F4914F6CDD1Dull + 1;
  if (t == DFSEL_TYPE_Q8_0) {
    out->resize(n / kQ8Block * sizeof(BlockQ8_0));
    BlockQ8_0* blocks = reinterpret_cast<BlockQ8_0*>(out->data());
    for (size_t b = 0; b < n / kQ8Block; ++b) {
      float v[kQ8Block], amax = 0.0f;
      for (int i = 0; i < kQ8Block; ++i) amax = std::fmax(amax, std::fabs(v[i] = sigma * normalish(&s)));
      const float d = amax / 127.0f;
      blocks[b].d = float_to_f16(d);
      for (int i = 0; i < kQ8Block; ++i) blocks[b].qs[i] = (int8_t)(d > 0 ? std::lround(v[i] / d) : 0);
    }
    return;
  }
  out->resize(n * elem_size(t));
  for (size_t i = 0; i < n; ++i) {
    const float v = sigma * normalish(&s);
    if (t == DFSEL_TYPE_F32) std::memcpy(out->data() + 4 * i, &v, 4);
    else {
      const uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
      std::memcpy(out->data() + 2 * i, &h, 2);
    }
  }
}

namespace {

// Rows of a host view, packed contiguously.
void copy_rows(const dfsel_tensor& t, std::vector<uint8_t>* out) {
  const size_t rb = row_bytes(t.type, t.ne[0]);
  out->resize(rb * (size_t)t.ne[1]);
  for (int64_t r = 0; r < t.ne[1]; ++r)
    std::memcpy(out->data() + rb * r, static_cast<const uint8_t*>(t.data) + t.nb[1] * r, rb);
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool load_gguf(Problem* p, HostData* h, std::FILE* log, std::string* err) {
  const auto t0 = std::chrono::steady_clock::now();
  if (log) std::fprintf(log, "loading %s ...\n", p->gguf.c_str());
  dfsel_gguf* g = nullptr;
  char msg[512] = "";
  if (dfsel_gguf_open(p->gguf.c_str(), -1, -1, &g, msg, sizeof msg) != DFSEL_SUCCESS) {
    *err = msg;
    return false;
  }
  dfsel_config cfg{};
  dfsel_tensor ep{}, en{}, wh{};
  if (dfsel_gguf_config(g, &cfg) != DFSEL_SUCCESS || dfsel_gguf_tensors(g, &ep, &en, &wh) != DFSEL_SUCCESS) {
    *err = dfsel_gguf_last_error(g);
    dfsel_gguf_close(g);
    return false;
  }
  if (log) {
    uint32_t version = 0;
    int64_t n_kv = 0;
    dfsel_gguf_version(g, &version);
    dfsel_gguf_metadata_count(g, &n_kv);
    std::fprintf(log, "  GGUF v%u, %lld metadata keys, opened in %.2f s\n", version, (long long)n_kv, seconds_since(t0));
    for (int64_t i = 0; i < n_kv; ++i) {
      const char* key = nullptr;
      char value[96];
      dfsel_gguf_metadata_key(g, i, &key);
      dfsel_gguf_metadata_value_string(g, i, value, sizeof value);
      std::fprintf(log, "  %-40s %s\n", key, value);
    }
    std::fprintf(log, "  selector_predecessor %s {%lld, %lld}, selector_successor %s, selector_hidden %s {%lld, %lld}\n",
                 dfsel_type_name(ep.type), (long long)ep.ne[0], (long long)ep.ne[1], dfsel_type_name(en.type),
                 dfsel_type_name(wh.type), (long long)wh.ne[0], (long long)wh.ne[1]);
  }
  p->vocab = cfg.n_vocab;
  p->embd = cfg.n_embd;
  p->rank = cfg.codebook_rank;
  p->top_k = cfg.top_k;
  p->block = cfg.block_size;
  p->logit_scale = cfg.logit_scale;
  p->softcap = cfg.softcap;
  p->cb_type = ep.type;
  p->wh_type = wh.type;
  const auto t1 = std::chrono::steady_clock::now();
  copy_rows(ep, &h->e_prev);
  copy_rows(en, &h->e_next);
  copy_rows(wh, &h->w_h);
  dfsel_gguf_close(g);
  if (log) std::fprintf(log, "  weights read in %.2f s\n", seconds_since(t1));
  return true;
}

void make_host_data(const Problem& p, HostData* h) {
  const size_t n_tokens = (size_t)p.blocks * p.block;
  const bool weights = h->e_prev.empty();  // a GGUF draft supplied them
  fill_random(&h->logits, p.logits_type, n_tokens * p.vocab, 3.0f, p.seed * 7 + 1);
  fill_random(&h->hidden, p.logits_type, n_tokens * p.embd, 1.0f, p.seed * 7 + 2);
  if (weights) {
  fill_random(&h->e_prev, p.cb_type, (size_t)p.vocab * p.rank, 0.1f, p.seed * 7 + 3);
  fill_random(&h->e_next, p.cb_type, (size_t)p.vocab * p.rank, 0.1f, p.seed * 7 + 4);
  fill_random(&h->w_h, p.wh_type, (size_t)p.rank * p.embd, 1.0f / std::sqrt((float)p.embd), p.seed * 7 + 5);
  }
  uint64_t s = p.seed * 7 + 6;
  h->anchors.resize(p.blocks);
  for (auto& a : h->anchors) a = (int32_t)(splitmix(&s) % (uint64_t)p.vocab);
}

struct Runner::Impl {
  Problem p;
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

  // A copy of bytes [off, off + n) of a host buffer in the memory the backend reads.
  void* place(const void* src, size_t n, int device, std::string* err) {
#if defined(DFSEL_WITH_CUDA)
    if (cuda) {
      void* d = nullptr;
      cudaSetDevice(device);
      if (cudaMalloc(&d, n ? n : 16) != cudaSuccess) {
        *err = "cudaMalloc of " + std::to_string(n) + " bytes failed";
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

bool Runner::setup(const Problem& problem, std::string* err) {
  Impl& m = *impl_;
  m.p = problem;
  if (!m.p.gguf.empty() && !load_gguf(&m.p, &m.h, stdout, err)) return false;
  const Problem& p = m.p;
  int n_gpus = 0;
  dfsel_cuda_device_count(&n_gpus);
  m.cuda = p.backend == DFSEL_BACKEND_CUDA || (p.backend == DFSEL_BACKEND_AUTO && n_gpus > 0);
  if (p.shards < 1 || p.blocks < 1 || p.block < 2 || p.vocab < 1 || p.rank < 1) {
    *err = "shards, blocks, vocab and rank must be positive and block-size at least 2";
    return false;
  }
  make_host_data(p, &m.h);
  const bool spread = m.cuda && n_gpus >= p.shards && p.shards > 1;
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
    dfsel_plan_desc d{};
    d.config = dfsel_config{p.vocab, p.embd, p.rank, p.top_k, p.block, p.logit_scale, p.softcap, p.blocks};
    d.shard = dfsel_shard{s, p.shards, vb, ve};
    d.backend = m.cuda ? DFSEL_BACKEND_CUDA : DFSEL_BACKEND_CPU;
    d.device = dev;
    d.n_threads = p.threads;
    d.placement = p.sharded ? DFSEL_CODEBOOKS_SHARDED : DFSEL_CODEBOOKS_REPLICATED;
    const int64_t cb_first = p.sharded ? vb : 0, cb_rows = p.sharded ? ve - vb : p.vocab;
    void* ep = m.place(m.h.e_prev.data() + cb_first * cb_row, cb_rows * cb_row, dev, err);
    void* en = m.place(m.h.e_next.data() + cb_first * cb_row, cb_rows * cb_row, dev, err);
    void* wh = m.place(m.h.w_h.data(), m.h.w_h.size(), dev, err);
    // Each shard holds only its slice of every logits row, rows n_vocab elements apart.
    void* lg = m.place(m.h.logits.data(), m.h.logits.size(), dev, err);
    void* hd = m.place(m.h.hidden.data(), m.h.hidden.size(), dev, err);
    void* an = m.place(m.h.anchors.data(), m.h.anchors.size() * 4, dev, err);
    if (!ep || !en || !wh || !lg || !hd || !an) return false;
    d.e_prev = matrix(ep, p.cb_type, p.rank, cb_rows, cb_row);
    d.e_next = matrix(en, p.cb_type, p.rank, cb_rows, cb_row);
    d.w_h = matrix(wh, p.wh_type, p.embd, p.rank, row_bytes(p.wh_type, p.embd));
    char msg[512];
    if (dfsel_plan_create(&d, &m.plans[s], msg, sizeof msg) != DFSEL_SUCCESS) {
      *err = std::string("plan for shard ") + std::to_string(s) + ": " + msg;
      return false;
    }
    dfsel_inputs& in = m.in[s];
    in.logits = matrix(static_cast<uint8_t*>(lg) + vb * ls, p.logits_type, ve - vb, n_tokens, p.vocab * ls);
    in.hidden = matrix(hd, p.logits_type, p.embd, n_tokens, p.embd * ls);
    in.anchors = static_cast<const int32_t*>(an);
    in.n_blocks = p.blocks;
    in.temperature = p.temperature;
    in.p_min = p.p_min;
    in.seed = p.seed;
    dfsel_outputs& o = m.out[s];
    o.path = static_cast<int32_t*>(m.place(nullptr, (size_t)p.blocks * L * 4, dev, err));
    o.n_emitted = static_cast<int32_t*>(m.place(nullptr, (size_t)p.blocks * 4, dev, err));
    if (!o.path || !o.n_emitted) return false;
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
const Problem& Runner::problem() const { return impl_->p; }
const char* Runner::backend_name() const { return impl_->cuda ? "cuda" : "cpu"; }
const char* Runner::shard_note() const { return impl_->note; }
const char* Runner::timing_note() const {
  return impl_->cuda ? "CUDA events around one eager run" : "wall clock, CPU backend";
}

}  // namespace dfsel::tools
