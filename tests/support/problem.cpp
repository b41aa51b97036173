#include "problem.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>

#include "kernels/common/numeric.cuh"

#include <thread>

#if defined(DFSEL_WITH_CUDA)
#include <cuda_runtime.h>
#endif
#if defined(DFSEL_WITH_NCCL)
#include <nccl.h>
#endif

namespace dfsel::test {

namespace {

size_t esize(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

// Stores v as type t at dst[i]; returns the value as stored (rounded).
float store(uint8_t* dst, size_t i, dfsel_type t, float v) {
  if (t == DFSEL_TYPE_F32) {
    std::memcpy(dst + 4 * i, &v, 4);
    return v;
  }
  const uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
  std::memcpy(dst + 2 * i, &h, 2);
  return t == DFSEL_TYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
}

void fill_weights(std::vector<uint8_t>* out, dfsel_type t, size_t rows, size_t cols, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.0f, sigma);
  if (t == DFSEL_TYPE_Q8_0) {
    const size_t nb = rows * cols / kQ8Block;
    out->assign(nb * sizeof(BlockQ8_0), 0);
    auto* b = reinterpret_cast<BlockQ8_0*>(out->data());
    std::uniform_int_distribution<int> q(-127, 127);
    for (size_t i = 0; i < nb; ++i) {
      b[i].d = float_to_f16(sigma / 64.0f * (0.5f + (float)(rng() % 1000) / 1000.0f));
      for (int j = 0; j < kQ8Block; ++j) b[i].qs[j] = (int8_t)q(rng);
    }
    return;
  }
  out->assign(rows * cols * esize(t), 0);
  for (size_t i = 0; i < rows * cols; ++i) store(out->data(), i, t, nd(rng));
}

float special_value(Special s, std::mt19937_64& rng, float v, int64_t col) {
  const unsigned roll = rng() % 100;
  switch (s) {
    case Special::kTies: return std::round(v);  // a handful of distinct values, many ties
    case Special::kNaN: return roll < 10 ? NAN : v;
    case Special::kNegInf: return roll < 30 ? -INFINITY : v;
    case Special::kShortRows: return col % 97 == 3 ? v : (roll < 50 ? -INFINITY : NAN);
    case Special::kAllEqual: return 0.5f;
    case Special::kMixed:
      return roll < 5 ? NAN : roll < 10 ? -INFINITY : roll < 12 ? INFINITY : roll < 20 ? -0.0f : roll < 30 ? 1.0f : v;
    case Special::kNone: break;
  }
  return v;
}

}  // namespace

std::string Case::str() const {
  std::ostringstream o;
  o << "V=" << V << " E=" << E << " R=" << R << " K=" << K << " block=" << block << " blocks=" << blocks
    << " logits=" << dfsel_type_name(logits_t) << " hidden=" << dfsel_type_name(hidden_t)
    << " cb=" << dfsel_type_name(cb_t) << " wh=" << dfsel_type_name(wh_t) << " scale=" << scale
    << " softcap=" << softcap << " pad=" << logits_pad << " special=" << (int)special;
  return o.str();
}

Data make_data(const Case& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  Data d;
  const size_t n_tokens = (size_t)c.blocks * c.block;
  const size_t row = (size_t)c.V + c.logits_pad;
  d.logits_nb1 = row * esize(c.logits_t);
  d.logits.assign(n_tokens * d.logits_nb1, 0xee);
  d.logits_f.assign(n_tokens * c.V, 0.0f);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (size_t t = 0; t < n_tokens; ++t)
    for (int64_t v = 0; v < c.V; ++v) {
      const float x = special_value(c.special, rng, nd(rng), v);
      d.logits_f[t * c.V + v] = store(d.logits.data(), t * row + v, c.logits_t, x);
    }
  d.hidden_nb1 = (size_t)c.E * esize(c.hidden_t);
  d.hidden.assign(n_tokens * d.hidden_nb1, 0);
  d.hidden_f.assign(n_tokens * c.E, 0.0f);
  std::normal_distribution<float> hn(0.0f, 1.0f);
  for (size_t i = 0; i < n_tokens * c.E; ++i) d.hidden_f[i] = store(d.hidden.data(), i, c.hidden_t, hn(rng));
  fill_weights(&d.e_prev, c.cb_t, c.V, c.R, 0.3f, rng);
  fill_weights(&d.e_next, c.cb_t, c.V, c.R, 0.3f, rng);
  fill_weights(&d.w_h, c.wh_t, c.R, c.E, 1.0f / std::sqrt((float)c.E), rng);
  d.anchors.resize(c.blocks);
  for (auto& a : d.anchors) a = (int32_t)(rng() % (uint64_t)c.V);
  return d;
}

std::vector<int64_t> random_bounds(int64_t V, int S, int64_t min_part, std::mt19937_64& rng) {
  std::vector<int64_t> b(S + 1, 0);
  const int64_t spare = V - (int64_t)S * min_part;
  std::vector<int64_t> cuts(S - 1);
  for (auto& x : cuts) x = spare > 0 ? (int64_t)(rng() % (uint64_t)(spare + 1)) : 0;
  std::sort(cuts.begin(), cuts.end());
  for (int s = 1; s < S; ++s) b[s] = cuts[s - 1] + (int64_t)s * min_part;
  b[S] = V;
  return b;
}

long first_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&a[i], &b[i], 4) != 0) return (long)i;
  return -1;
}

long first_diff(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  if (a.size() != b.size()) return 0;
  for (size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return (long)i;
  return -1;
}

namespace {

// Memory of the backend under test: host vectors, or device buffers for CUDA.
struct Mem {
  bool cuda = false;
  std::vector<std::vector<uint8_t>> host;
  std::vector<void*> dev;
  ~Mem() {
#if defined(DFSEL_WITH_CUDA)
    for (void* p : dev) cudaFree(p);
#endif
  }
  int device = 0;  // where put() allocates
  void* put(const void* src, size_t n) {
#if defined(DFSEL_WITH_CUDA)
    if (cuda) {
      cudaSetDevice(device);
      void* p = nullptr;
      if (cudaMalloc(&p, n ? n : 16) != cudaSuccess) return nullptr;
      dev.push_back(p);
      if (src) cudaMemcpy(p, src, n, cudaMemcpyHostToDevice);
      else cudaMemset(p, 0xff, n);
      return p;
    }
#endif
    host.emplace_back(n ? n : 16, (uint8_t)0xff);
    if (src) std::memcpy(host.back().data(), src, n);
    return host.back().data();
  }
  template <typename T>
  void get(std::vector<T>* out, const void* p, size_t count) {
    out->resize(count);
#if defined(DFSEL_WITH_CUDA)
    if (cuda) {
      cudaSetDevice(device);
      cudaMemcpy(out->data(), p, count * sizeof(T), cudaMemcpyDeviceToHost);
      return;
    }
#endif
    std::memcpy(out->data(), p, count * sizeof(T));
  }
};

}  // namespace

dfsel_tensor make_matrix(const void* data, dfsel_type t, int64_t ne0, int64_t ne1, size_t nb1) {
  return dfsel_tensor_2d(data, t, ne0, ne1, nb1);
}

namespace {
const auto matrix = make_matrix;

void release_comms(std::vector<void*>& comms, std::vector<void*>& streams) {
#if defined(DFSEL_WITH_NCCL)
  for (void* c : comms)
    if (c) ncclCommDestroy(static_cast<ncclComm_t>(c));
#endif
#if defined(DFSEL_WITH_CUDA)
  for (void* st : streams)
    if (st) cudaStreamDestroy(static_cast<cudaStream_t>(st));
#endif
  (void)comms;
  (void)streams;
}
}  // namespace

Result run_case(const Case& c, const Data& d, const RunOpts& r) {
  Result res;
  const std::vector<int64_t> bounds = r.bounds.empty() ? std::vector<int64_t>{0, c.V} : r.bounds;
  const int S = (int)bounds.size() - 1;
  const int L = c.block - 1;
  const size_t nd = (size_t)c.blocks * L, n_tokens = (size_t)c.blocks * c.block;
  const size_t cb_row = row_bytes(c.cb_t, c.R);
  Mem mem;
  mem.cuda = r.backend == DFSEL_BACKEND_CUDA;
  std::vector<dfsel_plan*> plans(S, nullptr);
  std::vector<dfsel_plan_desc> descs(S);
  std::vector<void*> streams(S, nullptr);
  std::vector<void*> comms(S, nullptr);
#if defined(DFSEL_WITH_NCCL)
  if (r.nccl) {
    std::vector<int> devs(S);
    for (int s = 0; s < S; ++s) devs[s] = s;
    std::vector<ncclComm_t> cs(S);
    if (ncclCommInitAll(cs.data(), S, devs.data()) != ncclSuccess) {
      res.status = DFSEL_NCCL_ERROR;
      res.error = "ncclCommInitAll failed";
      return res;
    }
    for (int s = 0; s < S; ++s) {
      comms[s] = cs[s];
      cudaSetDevice(s);
      cudaStream_t st;
      cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
      streams[s] = st;
    }
  }
#endif
  std::vector<dfsel_inputs> in(S);
  std::vector<dfsel_outputs> out(S);
  const size_t packed_floats = (size_t)c.E + r.packed_pad;
  for (int s = 0; s < S; ++s) {
    const int64_t vb = bounds[s], ve = bounds[s + 1];
    mem.device = r.nccl ? s : 0;
    const bool sh = r.placement == DFSEL_CODEBOOKS_SHARDED;
    const int64_t first = sh ? vb : 0, rows = sh ? ve - vb : c.V;
    dfsel_plan_desc& desc = descs[s];
    desc.device = mem.device;
    desc.nccl_comm = comms[s];
    desc.config = dfsel_config{c.V, c.E, c.R, c.K, c.block, c.scale, c.softcap, c.blocks};
    desc.shard = dfsel_shard{s, S, vb, ve};
    desc.backend = r.backend;
    desc.placement = r.placement;
    desc.e_prev = matrix(mem.put(d.e_prev.data() + first * cb_row, rows * cb_row), c.cb_t, c.R, rows, cb_row);
    desc.e_next = matrix(mem.put(d.e_next.data() + first * cb_row, rows * cb_row), c.cb_t, c.R, rows, cb_row);
    desc.w_h = matrix(mem.put(d.w_h.data(), d.w_h.size()), c.wh_t, c.E, c.R, row_bytes(c.wh_t, c.E));
    const uint8_t* lg = static_cast<const uint8_t*>(mem.put(d.logits.data(), d.logits.size()));
    in[s].logits = matrix(lg + vb * esize(c.logits_t), c.logits_t, ve - vb, n_tokens, d.logits_nb1);
    in[s].hidden = matrix(mem.put(d.hidden.data(), d.hidden.size()), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
    in[s].anchors = static_cast<const int32_t*>(mem.put(d.anchors.data(), d.anchors.size() * 4));
    in[s].n_blocks = c.blocks;
    in[s].temperature = r.temperature;
    in[s].p_min = r.p_min;
    in[s].seed = r.seed;
    out[s].cand_ids = static_cast<int32_t*>(mem.put(nullptr, nd * c.K * 4));
    out[s].unary = static_cast<float*>(mem.put(nullptr, nd * c.K * 4));
    out[s].scores = static_cast<float*>(mem.put(nullptr, nd * c.K * c.K * 4));
    out[s].q = r.temperature > 0 ? static_cast<float*>(mem.put(nullptr, nd * c.K * 4)) : nullptr;
    out[s].path = static_cast<int32_t*>(mem.put(nullptr, nd * 4));
    out[s].n_emitted = static_cast<int32_t*>(mem.put(nullptr, c.blocks * 4));
    if (r.packed && c.E >= (int64_t)c.K + (int64_t)c.K * c.K) {
      out[s].packed = static_cast<float*>(mem.put(nullptr, n_tokens * packed_floats * 4));
      out[s].packed_row_stride = packed_floats * 4;
    }
  }
  if (r.edit_desc)
    for (int s = 0; s < S; ++s) r.edit_desc(s, &descs[s]);
  // Plans of one communicator are created together: their set-up is a collective.
  std::vector<dfsel_status> created(S);
  std::vector<std::string> msgs(S);
  auto create = [&](int s) {
    char msg[512] = "";
    created[s] = dfsel_plan_create(&descs[s], &plans[s], msg, sizeof msg);
    msgs[s] = msg;
  };
  if (r.nccl) {
    std::vector<std::thread> threads;
    for (int s = 0; s < S; ++s) threads.emplace_back(create, s);
    for (auto& t : threads) t.join();
  } else {
    for (int s = 0; s < S; ++s) create(s);
  }
  for (int s = 0; s < S; ++s) {
    res.create_status.push_back(created[s]);
    res.create_errors.push_back(msgs[s]);
    if (created[s] != DFSEL_SUCCESS && res.status == DFSEL_SUCCESS) {
      res.status = created[s];
      res.error = msgs[s];
    }
  }
  if (res.status != DFSEL_SUCCESS) {
    for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
    release_comms(comms, streams);
    return res;
  }
  res.status = dfsel_run_group(S, plans.data(), in.data(), out.data(), r.nccl ? streams.data() : nullptr);
  for (int s = 0; s < S && res.status == DFSEL_SUCCESS; ++s) res.status = dfsel_plan_check(plans[s], streams[s]);
  if (res.status != DFSEL_SUCCESS) {
    res.error = dfsel_plan_last_error(plans[0]);
  } else {
#if defined(DFSEL_WITH_CUDA)
    if (mem.cuda) cudaDeviceSynchronize();
#endif
    const int dev0 = mem.device;
    // Every rank must hold the same result; rank S-1's is returned, the others compared.
    for (int s = S - 1; s >= 0; --s) {
      Result x;
      mem.device = r.nccl ? s : dev0;
      mem.get(&x.cand_ids, out[s].cand_ids, nd * c.K);
      mem.get(&x.unary, out[s].unary, nd * c.K);
      mem.get(&x.scores, out[s].scores, nd * c.K * c.K);
      if (out[s].q) mem.get(&x.q, out[s].q, nd * c.K);
      mem.get(&x.path, out[s].path, nd);
      mem.get(&x.n_emitted, out[s].n_emitted, c.blocks);
      if (out[s].packed) mem.get(&x.packed, out[s].packed, n_tokens * packed_floats);
      if (s == S - 1) {
        res.cand_ids = x.cand_ids; res.unary = x.unary; res.scores = x.scores; res.q = x.q;
        res.path = x.path; res.n_emitted = x.n_emitted; res.packed = x.packed;
        res.packed_row_floats = packed_floats;
      } else if (first_diff(x.cand_ids, res.cand_ids) >= 0 || first_diff(x.scores, res.scores) >= 0 ||
                 first_diff(x.path, res.path) >= 0 || first_diff(x.packed, res.packed) >= 0 ||
                 first_diff(x.q, res.q) >= 0 || first_diff(x.n_emitted, res.n_emitted) >= 0) {
        res.status = DFSEL_INTERNAL_ERROR;
        res.error = "rank " + std::to_string(s) + " holds another result than rank " + std::to_string(S - 1);
      }
    }
  }
  for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
  release_comms(comms, streams);
  return res;
}

}  // namespace dfsel::test
