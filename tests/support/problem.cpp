#include "problem.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
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
  out->assign(rows * cols * elem_size(t), 0);
  for (size_t i = 0; i < rows * cols; ++i) store_elem(out->data(), i, t, nd(rng));
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

Case model_case(int64_t V, int64_t E, int blocks) {
  Case c;
  c.V = V;
  c.K = 16;
  c.R = 256;
  c.E = E;
  c.block = 16;
  c.blocks = blocks;
  c.cb_t = DFSEL_TYPE_BF16;
  return c;
}

uint64_t fresh_seed() {
  if (const char* v = std::getenv("DFSEL_TEST_SEED"); v != nullptr && *v != '\0') {
    // Digits only: strtoull alone would take a sign, spaces or a tail and replay another seed.
    const bool digits = std::all_of(v, v + std::strlen(v), [](char ch) { return ch >= '0' && ch <= '9'; });
    errno = 0;
    const unsigned long long seed = std::strtoull(v, nullptr, 10);
    if (digits && errno == 0) return seed;
    ADD_FAILURE() << "DFSEL_TEST_SEED=" << v << " is not a decimal 64-bit value; a fresh seed is used";
  }
  static std::random_device rd;
  return ((uint64_t)rd() << 32) | rd();
}

size_t elem_size(dfsel_type t) { return t == DFSEL_TYPE_F32 ? 4 : 2; }

float store_elem(uint8_t* dst, size_t i, dfsel_type t, float v) {
  if (t == DFSEL_TYPE_F32) {
    std::memcpy(dst + 4 * i, &v, 4);
    return v;
  }
  const uint16_t h = t == DFSEL_TYPE_F16 ? float_to_f16(v) : float_to_bf16(v);
  std::memcpy(dst + 2 * i, &h, 2);
  return t == DFSEL_TYPE_F16 ? f16_to_float(h) : bf16_to_float(h);
}

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
  d.logits_nb1 = row * elem_size(c.logits_t);
  d.logits.assign(n_tokens * d.logits_nb1, 0xee);
  d.logits_f.assign(n_tokens * c.V, 0.0f);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (size_t t = 0; t < n_tokens; ++t)
    for (int64_t v = 0; v < c.V; ++v) {
      const float x = special_value(c.special, rng, nd(rng), v);
      d.logits_f[t * c.V + v] = store_elem(d.logits.data(), t * row + v, c.logits_t, x);
    }
  d.hidden_nb1 = (size_t)c.E * elem_size(c.hidden_t);
  d.hidden.assign(n_tokens * d.hidden_nb1, 0);
  d.hidden_f.assign(n_tokens * c.E, 0.0f);
  std::normal_distribution<float> hn(0.0f, 1.0f);
  for (size_t i = 0; i < n_tokens * c.E; ++i) d.hidden_f[i] = store_elem(d.hidden.data(), i, c.hidden_t, hn(rng));
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

std::vector<int64_t> aligned_bounds(int64_t V, int S, int64_t unit, int64_t min_part, std::mt19937_64& rng) {
  std::vector<int64_t> b = random_bounds(V / unit, S, (min_part + unit - 1) / unit, rng);
  for (int64_t& x : b) x *= unit;
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

std::string bitwise_diff(const Result& a, const Result& b) {
  struct F { const char* name; long at; };
  const F fields[] = {{"cand_ids", first_diff(a.cand_ids, b.cand_ids)}, {"unary", first_diff(a.unary, b.unary)},
                      {"scores", first_diff(a.scores, b.scores)},       {"q", first_diff(a.q, b.q)},
                      {"path", first_diff(a.path, b.path)},             {"n_emitted", first_diff(a.n_emitted, b.n_emitted)},
                      {"packed", first_diff(a.packed, b.packed)}};
  for (const F& f : fields)
    if (f.at >= 0) return std::string(f.name) + " differ at " + std::to_string(f.at);
  return "";
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
  void poison(void* p, size_t n) {
#if defined(DFSEL_WITH_CUDA)
    if (cuda) {
      cudaSetDevice(device);
      cudaMemset(p, 0xff, n);
      return;
    }
#endif
    std::memset(p, 0xff, n);
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

dfsel_plan_desc cpu_desc(const Case& c, const Data& d, int32_t rank, int32_t n_ranks, int64_t v_begin, int64_t v_end) {
  const size_t cb_row = row_bytes(c.cb_t, c.R);
  dfsel_plan_desc desc{};
  desc.config = dfsel_config{c.V, c.E, c.R, c.K, c.block, 1.0f, 0.0f, c.blocks};
  desc.shard = dfsel_shard{rank, n_ranks, v_begin, v_end};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.e_prev = make_matrix(d.e_prev.data(), c.cb_t, c.R, c.V, cb_row);
  desc.e_next = make_matrix(d.e_next.data(), c.cb_t, c.R, c.V, cb_row);
  desc.w_h = make_matrix(d.w_h.data(), c.wh_t, c.E, c.R, row_bytes(c.wh_t, c.E));
  return desc;
}

dfsel_inputs cpu_inputs(const Case& c, const Data& d) {
  const int64_t n_tokens = (int64_t)c.blocks * c.block;
  dfsel_inputs in{};
  in.logits = make_matrix(d.logits.data(), c.logits_t, c.V, n_tokens, d.logits_nb1);
  in.hidden = make_matrix(d.hidden.data(), c.hidden_t, c.E, n_tokens, d.hidden_nb1);
  in.anchors = d.anchors.data();
  in.n_blocks = c.blocks;
  return in;
}

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

struct Session::Impl {
  Case c;
  RunOpts r;
  Mem mem;
  std::vector<dfsel_plan_desc> descs;
  std::vector<dfsel_inputs> in;
  std::vector<dfsel_outputs> out;
  size_t nd = 0, n_tokens = 0, packed_floats = 0;
  dfsel_status init = DFSEL_SUCCESS;
  std::string init_error;
  int device_of(int s) const { return r.nccl ? s : 0; }
};

Session::Session(const Case& c, const Data& d, const RunOpts& r) : impl_(new Impl) {
  Impl& m = *impl_;
  m.c = c;
  m.r = r;
  const std::vector<int64_t> bounds = r.bounds.empty() ? std::vector<int64_t>{0, c.V} : r.bounds;
  const int S = (int)bounds.size() - 1;
  const int L = c.block - 1;
  m.nd = (size_t)c.blocks * L;
  m.n_tokens = (size_t)c.blocks * c.block;
  const size_t cb_row = row_bytes(c.cb_t, c.R);
  m.mem.cuda = r.backend == DFSEL_BACKEND_CUDA;
  plans.assign(S, nullptr);
  streams.assign(S, nullptr);
  comms.assign(S, nullptr);
  m.descs.resize(S);
#if defined(DFSEL_WITH_NCCL)
  if (r.nccl) {
    std::vector<int> devs(S);
    for (int s = 0; s < S; ++s) devs[s] = s;
    std::vector<ncclComm_t> cs(S);
    if (ncclCommInitAll(cs.data(), S, devs.data()) != ncclSuccess) {
      m.init = DFSEL_NCCL_ERROR;
      m.init_error = "ncclCommInitAll failed";
      return;
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
  m.in.resize(S);
  m.out.resize(S);
  m.packed_floats = (size_t)c.E + r.packed_pad;
  Mem& mem = m.mem;
  for (int s = 0; s < S; ++s) {
    const int64_t vb = bounds[s], ve = bounds[s + 1];
    mem.device = m.device_of(s);
    const bool sh = r.placement == DFSEL_CODEBOOKS_SHARDED;
    const int64_t first = sh ? vb : 0, rows = sh ? ve - vb : c.V;
    dfsel_plan_desc& desc = m.descs[s];
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
    dfsel_inputs& in = m.in[s];
    in.logits = matrix(lg + vb * elem_size(c.logits_t), c.logits_t, ve - vb, m.n_tokens, d.logits_nb1);
    in.hidden = matrix(mem.put(d.hidden.data(), d.hidden.size()), c.hidden_t, c.E, m.n_tokens, d.hidden_nb1);
    in.anchors = static_cast<const int32_t*>(mem.put(d.anchors.data(), d.anchors.size() * 4));
    in.n_blocks = c.blocks;
    in.temperature = r.temperature;
    in.p_min = r.p_min;
    in.seed = r.seed;
    dfsel_outputs& out = m.out[s];
    out.cand_ids = static_cast<int32_t*>(mem.put(nullptr, m.nd * c.K * 4));
    out.unary = static_cast<float*>(mem.put(nullptr, m.nd * c.K * 4));
    out.scores = static_cast<float*>(mem.put(nullptr, m.nd * c.K * c.K * 4));
    out.q = r.temperature > 0 ? static_cast<float*>(mem.put(nullptr, m.nd * c.K * 4)) : nullptr;
    out.path = static_cast<int32_t*>(mem.put(nullptr, m.nd * 4));
    out.n_emitted = static_cast<int32_t*>(mem.put(nullptr, c.blocks * 4));
    if (r.packed && c.E >= (int64_t)c.K + (int64_t)c.K * c.K) {
      out.packed = static_cast<float*>(mem.put(nullptr, m.n_tokens * m.packed_floats * 4));
      out.packed_row_stride = m.packed_floats * 4;
    }
  }
  if (r.edit_desc)
    for (int s = 0; s < S; ++s) r.edit_desc(s, &m.descs[s]);
}

Session::~Session() {
  for (dfsel_plan* p : plans) dfsel_plan_destroy(p);
  release_comms(comms, streams);
  delete impl_;
}

dfsel_status Session::create(Result* res) {
  Impl& m = *impl_;
  if (m.init != DFSEL_SUCCESS) {
    res->status = m.init;
    res->error = m.init_error;
    return m.init;
  }
  const int S = n_shards();
  std::vector<dfsel_status> created(S);
  std::vector<std::string> msgs(S);
  auto create_one = [&](int s) {
    char msg[512] = "";
    created[s] = dfsel_plan_create(&m.descs[s], &plans[s], msg, sizeof msg);
    msgs[s] = msg;
  };
  if (m.r.nccl) {  // plans of one communicator are created together: their set-up is a collective
    std::vector<std::thread> threads;
    for (int s = 0; s < S; ++s) threads.emplace_back(create_one, s);
    for (auto& t : threads) t.join();
  } else {
    for (int s = 0; s < S; ++s) create_one(s);
  }
  for (int s = 0; s < S; ++s) {
    res->create_status.push_back(created[s]);
    res->create_errors.push_back(msgs[s]);
    if (created[s] != DFSEL_SUCCESS && res->status == DFSEL_SUCCESS) {
      res->status = created[s];
      res->error = msgs[s];
    }
  }
  return res->status;
}

void Session::poison() {
  Impl& m = *impl_;
  const int S = n_shards();
  for (int s = 0; s < S; ++s) {
    m.mem.device = m.device_of(s);
    const dfsel_outputs& o = m.out[s];
    m.mem.poison(o.cand_ids, m.nd * m.c.K * 4);
    m.mem.poison(o.unary, m.nd * m.c.K * 4);
    m.mem.poison(o.scores, m.nd * m.c.K * m.c.K * 4);
    if (o.q) m.mem.poison(o.q, m.nd * m.c.K * 4);
    m.mem.poison(o.path, m.nd * 4);
    m.mem.poison(o.n_emitted, m.c.blocks * 4);
    if (o.packed) m.mem.poison(o.packed, m.n_tokens * m.packed_floats * 4);
  }
}

dfsel_status Session::enqueue_shard(int s) {
  Impl& m = *impl_;
  return dfsel_plan_run(plans[s], &m.in[s], &m.out[s], streams[s]);
}

dfsel_status Session::enqueue() {
  Impl& m = *impl_;
  const int S = n_shards();
  bool any_stream = false;
  for (void* st : streams) any_stream = any_stream || st != nullptr;
  return dfsel_run_group(S, plans.data(), m.in.data(), m.out.data(), any_stream ? streams.data() : nullptr);
}

Result Session::collect() {
  Impl& m = *impl_;
  const Case& c = m.c;
  const int S = n_shards();
  Result res;
  for (int s = 0; s < S && res.status == DFSEL_SUCCESS; ++s) res.status = dfsel_plan_check(plans[s], streams[s]);
  if (res.status != DFSEL_SUCCESS) {
    res.error = dfsel_plan_last_error(plans[0]);
    return res;
  }
#if defined(DFSEL_WITH_CUDA)
  if (m.mem.cuda) cudaDeviceSynchronize();
#endif
  // Every rank must hold the same result; rank S-1's is returned, the others compared.
  for (int s = S - 1; s >= 0; --s) {
    Result x;
    m.mem.device = m.device_of(s);
    const dfsel_outputs& o = m.out[s];
    m.mem.get(&x.cand_ids, o.cand_ids, m.nd * c.K);
    m.mem.get(&x.unary, o.unary, m.nd * c.K);
    m.mem.get(&x.scores, o.scores, m.nd * c.K * c.K);
    if (o.q) m.mem.get(&x.q, o.q, m.nd * c.K);
    m.mem.get(&x.path, o.path, m.nd);
    m.mem.get(&x.n_emitted, o.n_emitted, c.blocks);
    if (o.packed) m.mem.get(&x.packed, o.packed, m.n_tokens * m.packed_floats);
    if (s == S - 1) {
      res.cand_ids = x.cand_ids; res.unary = x.unary; res.scores = x.scores; res.q = x.q;
      res.path = x.path; res.n_emitted = x.n_emitted; res.packed = x.packed;
      res.packed_row_floats = m.packed_floats;
    } else {
      const std::string why = bitwise_diff(x, res);
      if (!why.empty()) {
        res.status = DFSEL_INTERNAL_ERROR;
        res.error = "rank " + std::to_string(s) + " holds another result than rank " + std::to_string(S - 1) + ": " + why;
      }
    }
  }
  return res;
}

Result run_case(const Case& c, const Data& d, const RunOpts& r) {
  Session session(c, d, r);
  Result created;
  if (session.create(&created) != DFSEL_SUCCESS) return created;
  Result res;
  res.status = session.run();
  if (res.status != DFSEL_SUCCESS) {
    res.error = dfsel_plan_last_error(session.plans[0]);
  } else {
    res = session.collect();
  }
  res.create_status = created.create_status;
  res.create_errors = created.create_errors;
  return res;
}

}  // namespace dfsel::test
