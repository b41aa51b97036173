#include "dspark_gpu.h"

#include "kernels/common/numeric.cuh"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace dfsel::test {

namespace {

constexpr int kFields = 7;  // tokens, n_emitted, draft_ids, logits, probs, log_norm, confidence
constexpr size_t kWorkspaceAlign = 256;

// A host vector copied to the device: the descriptions made on the host vectors
// (dspark_desc, dspark_inputs) are moved onto the device by offset within it.
struct Upload {
  const uint8_t* host = nullptr;
  size_t bytes = 0;
  void* dev = nullptr;
};

}  // namespace

struct DSparkCudaSession::Impl {
  DSparkCase c;
  DSparkRunOpts r;
  DSparkCudaOpts o;
  std::vector<Upload> uploads;
  int logits_at = -1, hidden_at = -1, anchors_at = -1, d2t_at = -1;  // indices into uploads
  std::vector<dfsel_dspark_inputs> in;
  std::vector<dfsel_dspark_outputs> out;
  std::vector<std::vector<void*>> out_bufs;  // [rank][field]; null where the field is not asked for
  std::vector<size_t> out_cells;              // elements of each field
  void* workspace = nullptr;
  std::vector<cudaStream_t> owned_streams;

  // Uploads v (nothing for an empty one); the index of its Upload, or -1.
  template <class T>
  int put(const std::vector<T>& v, dfsel_status* st, std::string* err) {
    if (v.empty() || *st != DFSEL_SUCCESS) return -1;
    Upload u;
    u.host = reinterpret_cast<const uint8_t*>(v.data());
    u.bytes = v.size() * sizeof(T);
    cudaError_t e = cudaMalloc(&u.dev, u.bytes);
    if (e == cudaSuccess) e = cudaMemcpy(u.dev, u.host, u.bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      *st = DFSEL_CUDA_ERROR;
      *err = std::string("uploading the problem: ") + cudaGetErrorString(e);
      if (u.dev) cudaFree(u.dev);
      return -1;
    }
    uploads.push_back(u);
    return (int)uploads.size() - 1;
  }

  // The device address of a host address inside an uploaded vector (null stays null).
  template <class T>
  T* relocate(T* p) const {
    if (p == nullptr) return nullptr;
    const uint8_t* h = reinterpret_cast<const uint8_t*>(p);
    for (const Upload& u : uploads)
      if (h >= u.host && h < u.host + u.bytes)  // data always follows a pointer here
        return reinterpret_cast<T*>(static_cast<uint8_t*>(u.dev) + (h - u.host));
    return nullptr;  // not reached: every pointer of a description is into d's vectors
  }
};

DSparkCudaSession::DSparkCudaSession(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r,
                                     const DSparkCudaOpts& o)
    : impl_(new Impl) {
  Impl& m = *impl_;
  m.c = c;
  m.r = r;
  m.o = o;
  const int S = r.bounds.empty() ? 1 : (int)r.bounds.size() - 1;
  plans.assign(S, nullptr);
  ws_bytes.assign(S, 0);
  auto cuda = [&](cudaError_t e, const char* what) {
    if (e == cudaSuccess || status != DFSEL_SUCCESS) return status == DFSEL_SUCCESS;
    status = DFSEL_CUDA_ERROR;
    error = std::string(what) + ": " + cudaGetErrorString(e);
    return false;
  };
  if (!cuda(cudaSetDevice(o.device), "cudaSetDevice")) return;
  if (o.stream != nullptr && !o.stream_per_rank) {
    streams.assign(S, o.stream);
  } else {
    for (int s = 0; s < (o.stream_per_rank ? S : 1); ++s) {
      cudaStream_t st = nullptr;
      if (!cuda(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking), "cudaStreamCreate")) return;
      m.owned_streams.push_back(st);
    }
    for (int s = 0; s < S; ++s) streams.push_back(m.owned_streams[o.stream_per_rank ? s : 0]);
  }

  m.put(d.w1, &status, &error);
  m.put(d.w2, &status, &error);
  m.put(d.conf_w, &status, &error);
  m.put(d.scale, &status, &error);
  m.d2t_at = m.put(d.d2t, &status, &error);
  m.logits_at = m.put(d.logits, &status, &error);
  m.hidden_at = m.put(d.hidden, &status, &error);
  m.anchors_at = m.put(d.anchors, &status, &error);
  const DSparkData* other = o.other_rank >= 0 ? o.other_data : nullptr;
  if (other) {
    m.put(other->conf_w, &status, &error);
    m.put(other->logits, &status, &error);
    m.put(other->hidden, &status, &error);
    m.put(other->anchors, &status, &error);
  }
  auto data_of = [&](int s) -> const DSparkData& { return other && s == o.other_rank ? *other : d; };
  if (!ok()) return;

  std::vector<dfsel_dspark_plan_desc> descs(S);
  for (int s = 0; s < S; ++s) {
    dfsel_dspark_plan_desc& desc = descs[s];
    desc = dspark_desc(c, d, r, s);
    desc.backend = DFSEL_BACKEND_CUDA;
    desc.device = o.device;
    desc.n_threads = 0;
    desc.w1.data = m.relocate(desc.w1.data);
    desc.w2.data = m.relocate(desc.w2.data);
    desc.w2_scale.data = m.relocate(desc.w2_scale.data);
    desc.conf_w.data = m.relocate(dspark_desc(c, data_of(s), r, s).conf_w.data);
    desc.d2t = m.relocate(desc.d2t);
    if (o.caller_workspace) {
      char msg[512] = "";
      status = dfsel_dspark_workspace_size(&desc, &ws_bytes[s], msg, sizeof msg);
      if (!ok()) {
        error = std::string("dfsel_dspark_workspace_size of rank ") + std::to_string(s) + ": " + msg;
        return;
      }
    }
  }
  if (o.caller_workspace) {  // one buffer, each rank's part 256-byte aligned
    size_t total = o.workspace_offset;
    for (size_t b : ws_bytes) total += (b + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    if (!cuda(cudaMalloc(&m.workspace, total ? total : 16), "cudaMalloc workspace") ||
        !cuda(cudaMemset(m.workspace, 0xff, total ? total : 16), "cudaMemset workspace"))
      return;
    size_t at = o.workspace_offset;
    for (int s = 0; s < S; ++s) {
      descs[s].workspace = static_cast<uint8_t*>(m.workspace) + at;
      descs[s].workspace_bytes = ws_bytes[s];
      at += (ws_bytes[s] + kWorkspaceAlign - 1) / kWorkspaceAlign * kWorkspaceAlign;
    }
  }
  for (int s = 0; s < S; ++s) {
    char msg[512] = "";
    status = dfsel_dspark_plan_create(&descs[s], &plans[s], msg, sizeof msg);
    if (!ok()) {
      error = std::string("dfsel_dspark_plan_create of rank ") + std::to_string(s) + ": " + msg;
      return;
    }
  }

  // Inputs on the device; outputs as the CPU tests bind them (run_dspark): tokens and
  // n_emitted always, the optional ones as the run asks for them.
  const size_t cells = (size_t)c.blocks * c.N;
  m.out_cells = {cells, (size_t)c.blocks, cells, cells, cells, cells, cells};
  bool want[kFields] = {true, true, r.optional_outputs, r.optional_outputs, r.optional_outputs && r.temperature > 0.0f,
                        r.optional_outputs && r.temperature > 0.0f, r.optional_outputs && c.E > 0};
  m.in.resize(S);
  m.out.resize(S);
  m.out_bufs.assign(S, std::vector<void*>(kFields, nullptr));
  for (int s = 0; s < S; ++s) {
    dfsel_dspark_inputs& in = m.in[s];
    in = dspark_inputs(c, data_of(s), r, s);
    in.logits.data = m.relocate(in.logits.data);
    in.hidden.data = m.relocate(in.hidden.data);
    in.anchors = m.relocate(in.anchors);
    for (int f = 0; f < kFields; ++f)
      if (want[f] && !cuda(cudaMalloc(&m.out_bufs[s][f], m.out_cells[f] * 4), "cudaMalloc outputs")) return;
    auto i32 = [&](int f) { return static_cast<int32_t*>(m.out_bufs[s][f]); };
    auto f32 = [&](int f) { return static_cast<float*>(m.out_bufs[s][f]); };
    m.out[s] = dfsel_dspark_outputs{c.blocks, i32(0), i32(1), i32(2), f32(3), f32(4), f32(5), f32(6)};
  }
}

DSparkCudaSession::~DSparkCudaSession() {
  Impl& m = *impl_;
  cudaSetDevice(m.o.device);
  for (cudaStream_t st : streams) cudaStreamSynchronize(st);
  for (dfsel_dspark_plan* p : plans)
    if (p) dfsel_dspark_plan_destroy(p);
  for (auto& bufs : m.out_bufs)
    for (void* p : bufs)
      if (p) cudaFree(p);
  for (const Upload& u : m.uploads) cudaFree(u.dev);
  if (m.workspace) cudaFree(m.workspace);
  for (cudaStream_t st : m.owned_streams) cudaStreamDestroy(st);
}

void DSparkCudaSession::upload_inputs(const DSparkData& d) {
  if (!ok()) return;
  Impl& m = *impl_;
  const struct {
    int at;
    const void* src;
    size_t bytes;
  } parts[] = {{m.logits_at, d.logits.data(), d.logits.size()},
               {m.hidden_at, d.hidden.data(), d.hidden.size()},
               {m.anchors_at, d.anchors.data(), d.anchors.size() * 4},
               {m.d2t_at, d.d2t.data(), d.d2t.size() * 4}};
  for (const auto& p : parts) {
    if (p.at < 0) continue;
    if (p.bytes != m.uploads[p.at].bytes) {
      status = DFSEL_INTERNAL_ERROR;
      error = "upload_inputs: the new inputs are not the size of the first (another case?)";
      return;
    }
    const cudaError_t e = cudaMemcpy(m.uploads[p.at].dev, p.src, p.bytes, cudaMemcpyHostToDevice);
    if (e != cudaSuccess) {
      status = DFSEL_CUDA_ERROR;
      error = std::string("upload_inputs: ") + cudaGetErrorString(e);
      return;
    }
  }
}

void DSparkCudaSession::poison_outputs() {
  if (!ok()) return;
  Impl& m = *impl_;
  for (auto& bufs : m.out_bufs)
    for (int f = 0; f < kFields; ++f)
      if (bufs[f]) cudaMemset(bufs[f], 0xff, m.out_cells[f] * 4);
  const cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    status = DFSEL_CUDA_ERROR;
    error = std::string("poisoning the outputs: ") + cudaGetErrorString(e);
  }
}

dfsel_status DSparkCudaSession::enqueue(int n_blocks) {
  if (!ok()) return status;
  Impl& m = *impl_;
  std::vector<dfsel_dspark_inputs> in = m.in;
  if (n_blocks > 0)
    for (dfsel_dspark_inputs& x : in) {
      const int64_t rows = (int64_t)n_blocks * m.c.rows();
      x.n_blocks = n_blocks;
      x.logits = make_matrix(x.logits.data, x.logits.type, x.logits.ne[0], rows, x.logits.nb[1]);
      if (x.hidden.data) x.hidden = make_matrix(x.hidden.data, x.hidden.type, x.hidden.ne[0], rows, x.hidden.nb[1]);
    }
  std::vector<void*> st(streams.begin(), streams.end());
  status = dfsel_dspark_run_group(ranks(), plans.data(), in.data(), m.out.data(), st.data());
  if (!ok()) {
    // The message is on the plan that found the problem: the first that has one.
    error = std::string("dfsel_dspark_run_group: ") + dfsel_status_string(status) + " and no plan has a message";
    for (dfsel_dspark_plan* p : plans) {
      const char* e = dfsel_dspark_plan_last_error(p);
      if (e != nullptr && *e != '\0') {
        error = std::string("dfsel_dspark_run_group: ") + e;
        break;
      }
    }
  }
  return status;
}

dfsel_status DSparkCudaSession::wait() {
  if (!ok()) return status;
  for (int s = 0; s < ranks(); ++s) {  // every rank waited for, the first failure kept
    const dfsel_status st = dfsel_dspark_plan_wait(plans[s], streams[s], -1);
    if (st != DFSEL_SUCCESS && ok()) {
      status = st;
      error = std::string("dfsel_dspark_plan_wait of rank ") + std::to_string(s) + ": " +
              dfsel_dspark_plan_last_error(plans[s]);
    }
  }
  return status;
}

DSparkResult DSparkCudaSession::download() const {
  const Impl& m = *impl_;
  std::vector<DSparkResult> res(std::max(ranks(), 1));
  res[0].status = status;
  res[0].error = error;
  if (m.out_bufs.empty()) return res[0];
  for (int s = 0; s < ranks(); ++s) {
    DSparkResult& x = res[s];
    std::vector<int32_t>* ints[] = {&x.tokens, &x.n_emitted, &x.draft_ids};
    std::vector<float>* floats[] = {&x.logits, &x.probs, &x.log_norm, &x.confidence};
    for (int f = 0; f < kFields; ++f) {
      void* dev = m.out_bufs[s][f];
      if (!dev) continue;
      void* host;
      if (f < 3) {
        ints[f]->resize(m.out_cells[f]);
        host = ints[f]->data();
      } else {
        floats[f - 3]->resize(m.out_cells[f]);
        host = floats[f - 3]->data();
      }
      const cudaError_t e = cudaMemcpy(host, dev, m.out_cells[f] * 4, cudaMemcpyDeviceToHost);
      if (e != cudaSuccess && res[0].status == DFSEL_SUCCESS) {
        res[0].status = DFSEL_CUDA_ERROR;
        res[0].error = std::string("reading the outputs back: ") + cudaGetErrorString(e);
      }
    }
  }
  for (int s = 1; s < ranks() && res[0].status == DFSEL_SUCCESS; ++s) {
    const std::string diff = dspark_bitwise_diff(res[0], res[s]);
    if (!diff.empty()) {
      res[0].status = DFSEL_INTERNAL_ERROR;
      res[0].error = "rank " + std::to_string(s) + " differs from rank 0: " + diff;
    }
  }
  // A failed run's outputs are kept: a device-side error still writes what it says it writes.
  return res[0];
}

DSparkResult DSparkCudaSession::run_once(int n_blocks) {
  poison_outputs();  // each step does nothing once one has failed; download reports that failure
  enqueue(n_blocks);
  wait();
  return download();
}

bool dspark_cuda_uses_mma(const DSparkCase& c) {
  const char* product = std::getenv("DFSEL_DSPARK_PRODUCT");
  if (product != nullptr && std::strcmp(product, "chains") == 0) return false;
  const bool bf16 = c.w2_t == DFSEL_TYPE_BF16 || is_widened_type(c.w2_t);  // widened to BF16 at creation
  const bool supported = bf16 && c.R % 32 == 0 && c.R <= 256;  // the test data's rows are 16-byte aligned
  return supported;  // auto, mma and mma-steps alike
}

DSparkResult run_dspark_cuda(const DSparkCase& c, const DSparkData& d, const DSparkRunOpts& r, const DSparkCudaOpts& o) {
  DSparkCudaSession session(c, d, r, o);
  return session.run_once();
}

}  // namespace dfsel::test
