// Bytes as calls of the C API (include/dfsel/dfsel.h): a plan description, inputs and outputs
// with any sizes, shapes, strides, types, ranges and K, and NULL pointers here and there.
//
// Every tensor or output a call claims is either backed by a buffer of exactly the bytes the
// claim covers ((ne[1] - 1) * nb[1] + one row), so that one byte more is an AddressSanitizer
// report, or, when that would be too large, made wrong on purpose (a type, stride or shape the
// API must refuse) and pointed at a buffer of a few bytes. The API must refuse every wrong
// description before reading anything; a plan it accepts runs one step on the CPU backend and
// its outputs are checked for what the header promises. The run's own arguments are fuzzed as
// much: n_blocks, temperature, p_min, seed, the inputs' shapes and strides, anchors, outputs
// absent, strided, misaligned or placed over another buffer, the workspace under the anchors,
// one plan twice in a group, and waits with any stream and limit.
#include <fuzzer/FuzzedDataProvider.h>

#include <cfloat>
#include <cstddef>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "dfsel/dfsel.h"
#include "kernels/common/numeric.cuh"

namespace {

constexpr size_t kTensorCap = size_t(4) << 20;      // bytes one claimed tensor may take
constexpr size_t kWorkspaceCap = size_t(64) << 20;  // larger plans are not created
constexpr size_t kOutputCap = size_t(16) << 20;
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

void expect(bool ok, const char* what) {
  if (ok) return;
  std::fprintf(stderr, "fuzz_api: %s\n", what);
  std::abort();
}

// Buffers owned by one input. Each is allocated on its own, 256-byte aligned (the most a
// workspace needs: 256 on CUDA, 16 on the CPU), and AddressSanitizer knows its exact size: one
// byte past it is a report.
class Arena {
 public:
  Arena() = default;
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  ~Arena() {
    for (void* p : blocks_) std::free(p);
  }
  // n bytes; shift moves the start off the alignment.
  uint8_t* take(size_t n, size_t shift = 0) {
    void* p = nullptr;
    if (posix_memalign(&p, 256, n + shift + (n + shift == 0)) != 0) std::abort();
    blocks_.push_back(p);
    return static_cast<uint8_t*>(p) + shift;
  }
  template <typename T>
  T* take_array(size_t n) {
    return reinterpret_cast<T*>(take(n * sizeof(T)));
  }

 private:
  std::vector<void*> blocks_;
};

// An enum field set to any int, as C code may set it.
template <typename E>
void store_int(E* e, int v) {
  static_assert(sizeof(E) == sizeof(int), "the C enums are int-sized");
  std::memcpy(e, &v, sizeof v);
}

// The int an enum field holds.
template <typename E>
int load_int(const E& e) {
  int v;
  std::memcpy(&v, &e, sizeof v);
  return v;
}

// DFSEL_FUZZ_VERBOSE=1 prints every claim, for reading a finding.
bool verbose() {
  static const bool v = std::getenv("DFSEL_FUZZ_VERBOSE") != nullptr;
  return v;
}

void describe(const char* name, const dfsel_tensor& t) {
  if (!verbose()) return;
  std::fprintf(stderr, "%s: type %d ne {%lld, %lld, %lld, %lld} nb {%zu, %zu} data %p\n", name, load_int(t.type),
               (long long)t.ne[0], (long long)t.ne[1], (long long)t.ne[2], (long long)t.ne[3], t.nb[0], t.nb[1],
               t.data);
}

uint64_t mix(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Usually a value in [lo, hi], one time in sixteen one of the edge values.
template <typename T>
T pick(FuzzedDataProvider& in, T lo, T hi, std::initializer_list<T> edges) {
  if (in.ConsumeIntegralInRange<int>(0, 15) == 15)
    return edges.begin()[in.ConsumeIntegralInRange<size_t>(0, edges.size() - 1)];
  return in.ConsumeIntegralInRange<T>(lo, hi);
}

float pick_float(FuzzedDataProvider& in, float lo, float hi, std::initializer_list<float> edges) {
  if (in.ConsumeIntegralInRange<int>(0, 7) == 7)
    return edges.begin()[in.ConsumeIntegralInRange<size_t>(0, edges.size() - 1)];
  return in.ConsumeFloatingPointInRange<float>(lo, hi);
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

// Whether t is a dfsel_type (every one may hold weights).
bool is_type_id(int t) { return t >= 0 && t <= DFSEL_TYPE_BF16 && dfsel::is_weight_type(dfsel_type(t)); }

size_t elem_bytes(int t) { return is_type_id(t) ? dfsel::type_block_bytes(dfsel_type(t)) : 1; }

// Fills a buffer: raw bytes (NaN, infinities and denormals included) or moderate values.
void fill(uint8_t* p, size_t n, int t, bool raw, uint64_t seed) {
  if (raw || (t != DFSEL_TYPE_F32 && t != DFSEL_TYPE_F16 && t != DFSEL_TYPE_BF16)) {
    for (size_t i = 0; i < n; ++i) p[i] = uint8_t(mix(&seed));
    if (t != DFSEL_TYPE_F32 && t != DFSEL_TYPE_F16 && t != DFSEL_TYPE_BF16)
      for (size_t i = 1; i < n; i += 2) p[i] &= 0x3b;  // keep most f16 scales finite
    return;
  }
  for (size_t i = 0; i + elem_bytes(t) <= n; i += elem_bytes(t)) {
    const uint64_t r = mix(&seed);
    const float v = float(int64_t(r % 8001) - 4000) / 1000.0f;
    if (t == DFSEL_TYPE_F32) {
      std::memcpy(p + i, &v, 4);
    } else if (t == DFSEL_TYPE_BF16) {
      const uint16_t b = dfsel::float_to_bf16(v);
      std::memcpy(p + i, &b, 2);
    } else {  // an f16 of magnitude in [0.25, 8)
      const uint16_t h = uint16_t((r >> 20) & 0x83ff) | uint16_t((13 + (r >> 40) % 5) << 10);
      std::memcpy(p + i, &h, 2);
    }
  }
}

// Bytes of one row of n elements, computed without wrapping; 0 for a type no tensor holds.
unsigned __int128 row_bytes_exact(int t, int64_t n) {
  using u128 = unsigned __int128;
  switch (t) {
    case DFSEL_TYPE_F32: return u128(n) * 4;
    case DFSEL_TYPE_F16:
    case DFSEL_TYPE_BF16: return u128(n) * 2;
    case DFSEL_TYPE_Q8_0: return u128(n / dfsel::kQ8Block) * sizeof(dfsel::BlockQ8_0);
  }
  if (!is_type_id(t)) return 0;
  const dfsel::WidenedBlock b = dfsel::widened_block(dfsel_type(t));
  return u128(n / b.elems) * unsigned(b.bytes);
}

int64_t plus(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_add_overflow(a, b, &r) ? kI64Max : r;
}

bool sane(int64_t v, int64_t hi) { return v >= 1 && v <= hi; }

struct Claim {
  int64_t ne0, ne1;  // what a consistent caller passes; negative: no sensible value
  bool weight;       // codebooks and W_h take the quantised types too
};

// A tensor as the input describes it. prefer (may be NULL) is a tensor whose type and row
// stride this one usually copies (e_next follows e_prev).
dfsel_tensor make_tensor(FuzzedDataProvider& in, Arena& arena, const Claim& c, const dfsel_tensor* prefer) {
  dfsel_tensor t{};
  // The type as an int: ids that are no dfsel_type are stored as a C caller would store them.
  int type;
  const int type_choice = in.ConsumeIntegralInRange<int>(0, 15);
  if (prefer && type_choice < 12)
    type = load_int(prefer->type);
  else if (type_choice < 15)
    type = c.weight ? in.PickValueInArray({DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16, DFSEL_TYPE_Q8_0,
                                           DFSEL_TYPE_Q4_0, DFSEL_TYPE_Q4_1, DFSEL_TYPE_Q5_0, DFSEL_TYPE_Q5_1,
                                           DFSEL_TYPE_Q2_K, DFSEL_TYPE_Q3_K, DFSEL_TYPE_Q4_K, DFSEL_TYPE_Q5_K,
                                           DFSEL_TYPE_Q6_K})
                    : in.PickValueInArray({DFSEL_TYPE_F32, DFSEL_TYPE_F16, DFSEL_TYPE_BF16});
  else
    type = in.PickValueInArray({4, 9, 16, 20, 29, 31, 77, -1, 1 << 20, 2, 8, 12, 13, 14});  // ggml's, retired, none
  store_int(&t.type, type);
  const int64_t ne0 = c.ne0 > 0 ? c.ne0 : in.ConsumeIntegralInRange<int64_t>(1, 64);
  const int64_t ne1 = c.ne1 > 0 ? c.ne1 : in.ConsumeIntegralInRange<int64_t>(1, 64);
  t.ne[0] = pick<int64_t>(in, ne0, ne0, {plus(ne0, 1), ne0 - 1, 0, -1, 256, kI64Max, kI64Min});
  t.ne[1] = pick<int64_t>(in, ne1, plus(ne1, 2), {ne1 - 1, 0, -1, kI32Max, kI64Max});
  t.ne[2] = pick<int64_t>(in, 1, 1, {0, 2, -1});
  t.ne[3] = pick<int64_t>(in, 1, 1, {0, 2});
  const size_t eb = elem_bytes(type);
  t.nb[0] = pick<size_t>(in, eb, eb, {0, 1, 3, eb + 1, 2 * eb});
  // Bytes of one row and of the whole claim, exact (no wrapping): 0 rows for an unknown type.
  using u128 = unsigned __int128;
  const u128 rb = t.ne[0] > 0 ? row_bytes_exact(type, t.ne[0]) : 0;
  const size_t pad = (type == DFSEL_TYPE_F32 || type == DFSEL_TYPE_F16 || type == DFSEL_TYPE_BF16) ? eb : 1;
  const size_t rbs = rb <= kTensorCap ? size_t(rb) : kTensorCap;
  if (prefer && load_int(prefer->type) == type && in.ConsumeIntegralInRange<int>(0, 7) < 6)
    t.nb[1] = prefer->nb[1];
  else if (rb <= kTensorCap)
    t.nb[1] = pick<size_t>(in, rbs, rbs + 3 * pad, {rbs - 1, 0, rbs + 1, SIZE_MAX / 2, SIZE_MAX});
  else
    t.nb[1] = in.PickValueInArray<size_t>({0, 4, size_t(rb), size_t(rb) + 4, SIZE_MAX / 2, SIZE_MAX});
  t.nb[2] = t.nb[1] * size_t(t.ne[1] > 0 ? t.ne[1] : 1);
  t.nb[3] = t.nb[2];

  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) return t;  // data NULL
  const bool shaped = t.ne[0] > 0 && t.ne[1] > 0 && rb > 0 && t.nb[1] >= rb;
  const u128 need = shaped ? u128(t.ne[1] - 1) * t.nb[1] + rb : 0;
  if (shaped && need <= kTensorCap) {
    const size_t shift = in.ConsumeIntegralInRange<int>(0, 15) == 0 ? 1 : 0;  // misaligned now and then
    uint8_t* p = arena.take(size_t(need), shift);
    fill(p, size_t(need), type, in.ConsumeIntegralInRange<int>(0, 7) == 0, in.ConsumeIntegral<uint64_t>());
    t.data = p;
    return t;
  }
  // A claim no buffer can back (rows that overlap, or more than 2^63 bytes) must be refused as
  // it is.
  if (!shaped || need > u128(PTRDIFF_MAX)) {
    uint8_t* p = arena.take(16);
    std::memset(p, 0x7f, 16);
    t.data = p;
    return t;
  }
  // Too large to back: make the claim one the API must refuse, over a few bytes.
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0: store_int(&t.type, 20); break;  // IQ4_NL, which dfsel does not read
    case 1: t.nb[0] = elem_bytes(type) + 1; break;
    default: t.ne[2] = 2; break;
  }
  uint8_t* p = arena.take(16);
  std::memset(p, 0x7f, 16);
  t.data = p;
  return t;
}

struct Outputs {
  dfsel_outputs out{};
  bool sized = false;  // backed for the claimed n_blocks
  bool hazard = false;  // a buffer misaligned or over another one: the run must be refused
};

// Now and then one buffer of the run made wrong on purpose: an output or the anchors moved off
// their alignment, or an output (or the anchors, when the plan has a caller-owned workspace)
// placed over another buffer the run touches. The API must refuse the run before writing.
void add_hazard(FuzzedDataProvider& in, const dfsel_plan_desc& d, dfsel_inputs* inputs, Outputs* o) {
  if (in.ConsumeIntegralInRange<int>(0, 7) != 0) return;
  int32_t** ints[] = {&o->out.cand_ids, &o->out.path, &o->out.n_emitted};
  float** floats[] = {&o->out.unary, &o->out.scores, &o->out.q, &o->out.packed};
  void** slot = in.ConsumeBool() ? reinterpret_cast<void**>(ints[in.ConsumeIntegralInRange<int>(0, 2)])
                                 : reinterpret_cast<void**>(floats[in.ConsumeIntegralInRange<int>(0, 3)]);
  if (!*slot || (slot == reinterpret_cast<void**>(&o->out.q) && !(inputs->temperature > 0.0f))) return;
  const void* over[] = {inputs->logits.data, inputs->hidden.data, inputs->anchors, d.e_prev.data, d.w_h.data,
                        o->out.path, o->out.n_emitted};
  switch (in.ConsumeIntegralInRange<int>(0, 2)) {
    case 0:  // misaligned: every output holds int32 or float
      *slot = static_cast<uint8_t*>(*slot) + in.ConsumeIntegralInRange<int>(1, 3);
      break;
    case 1: {  // over another buffer of the run
      const void* target = over[in.ConsumeIntegralInRange<size_t>(0, 6)];
      if (!target || target == *slot) return;
      *slot = const_cast<void*>(target);
      break;
    }
    default:  // the anchors inside a caller-owned workspace, which the run writes
      if (!d.workspace || !inputs->anchors || inputs->n_blocks < 1 || d.workspace_bytes < (size_t)inputs->n_blocks * 4)
        return;
      std::memcpy(d.workspace, inputs->anchors, (size_t)inputs->n_blocks * 4);
      inputs->anchors = static_cast<const int32_t*>(d.workspace);
      break;
  }
  o->hazard = true;
}

Outputs make_outputs(FuzzedDataProvider& in, Arena& arena, const dfsel_plan_desc& d, int32_t n_blocks) {
  Outputs o;
  const dfsel_config& c = d.config;
  const bool valid_blocks = n_blocks >= 1 && n_blocks <= c.max_blocks;
  const int64_t L = int64_t(c.block_size) - 1, K = c.top_k, E = c.n_embd;
  if (!valid_blocks) {  // the API must refuse the run before writing anything
    int32_t* small = arena.take_array<int32_t>(1);
    o.out.path = small;
    o.out.n_emitted = small;
    o.out.cand_ids = small;
    return o;
  }
  o.sized = true;
  const size_t drafted = size_t(n_blocks) * size_t(L);
  auto optional = [&](size_t n, size_t elem) -> uint8_t* {
    if (in.ConsumeBool() || n > kOutputCap / elem) return nullptr;
    return arena.take(n * elem);
  };
  o.out.cand_ids = reinterpret_cast<int32_t*>(optional(drafted * size_t(K), 4));
  o.out.unary = reinterpret_cast<float*>(optional(drafted * size_t(K), 4));
  o.out.scores = reinterpret_cast<float*>(optional(drafted * size_t(K) * size_t(K), 4));
  o.out.q = reinterpret_cast<float*>(optional(drafted * size_t(K), 4));
  if (in.ConsumeIntegralInRange<int>(0, 31) != 0) o.out.path = arena.take_array<int32_t>(drafted);
  if (in.ConsumeIntegralInRange<int>(0, 31) != 0) o.out.n_emitted = arena.take_array<int32_t>(size_t(n_blocks));
  if (in.ConsumeBool()) {
    const size_t row = size_t(E) * 4;
    o.out.packed_row_stride = pick<size_t>(in, 0, 0, {row, row + 4, row + 64, row - 4, row + 2, 3, SIZE_MAX / 8});
    if (in.ConsumeBool()) o.out.packed_row_stride = row;
    const size_t stride = o.out.packed_row_stride ? o.out.packed_row_stride : row;
    const size_t rows = size_t(n_blocks) * size_t(c.block_size);
    if (stride >= row && row <= kOutputCap && (rows - 1) <= (kOutputCap - row) / stride) {
      o.out.packed = reinterpret_cast<float*>(arena.take((rows - 1) * stride + row));
    } else {  // a stride the API must refuse
      o.out.packed_row_stride = 2;
      o.out.packed = arena.take_array<float>(1);
    }
  }
  return o;
}

void check_outputs(const dfsel_plan_desc& d, const dfsel_inputs& in, const dfsel_outputs& out) {
  const int64_t L = int64_t(d.config.block_size) - 1, K = d.config.top_k, V = d.config.n_vocab;
  for (int32_t b = 0; b < in.n_blocks; ++b) {
    const int32_t n = out.n_emitted[b];
    expect(n >= 0 && n <= L, "n_emitted is outside [0, L]");
    for (int64_t p = 0; p < L; ++p) {
      const int32_t tok = out.path[b * L + p];
      if (p >= n) {
        expect(tok == -1, "the path is not -1 after the last emitted token");
        continue;
      }
      expect(tok >= 0 && tok < V, "a drafted token is outside [0, V)");
      if (!out.cand_ids) continue;
      bool found = false;
      for (int64_t j = 0; j < K; ++j) found |= out.cand_ids[(b * L + p) * K + j] == tok;
      expect(found, "a drafted token is not one of its position's candidates");
    }
  }
  if (out.cand_ids)
    for (int64_t i = 0; i < int64_t(in.n_blocks) * L * K; ++i)
      expect(out.cand_ids[i] >= 0 && out.cand_ids[i] < V, "a candidate id is outside [0, V)");
}

void run_plan(FuzzedDataProvider& in, Arena& arena, dfsel_plan* plan, const dfsel_plan_desc& d) {
  const dfsel_config& c = d.config;
  dfsel_inputs inputs{};
  inputs.n_blocks = pick<int32_t>(in, 1, c.max_blocks < 8 ? c.max_blocks : 8,
                                  {0, -1, c.max_blocks, c.max_blocks == kI32Max ? 0 : c.max_blocks + 1, int32_t(kI32Max)});
  inputs.temperature = pick_float(in, 0.0f, 2.0f, {0.0f, -1.0f, kNaN, kInf, 1e-30f, 1e30f, FLT_MIN});
  inputs.p_min = pick_float(in, 0.0f, 0.5f, {0.0f, 1.0f, -0.1f, 1.5f, kNaN, 1e-30f});
  inputs.seed = in.ConsumeIntegral<uint64_t>();
  const bool valid_blocks = inputs.n_blocks >= 1 && inputs.n_blocks <= c.max_blocks;
  const int64_t n_tokens = valid_blocks ? int64_t(inputs.n_blocks) * c.block_size : -1;
  inputs.logits = make_tensor(in, arena, Claim{d.shard.v_end - d.shard.v_begin, n_tokens, false}, nullptr);
  inputs.hidden = make_tensor(in, arena, Claim{c.n_embd, n_tokens, false}, nullptr);
  describe("logits", inputs.logits);
  describe("hidden", inputs.hidden);
  if (verbose()) std::fprintf(stderr, "n_blocks %d temperature %g p_min %g\n", inputs.n_blocks, inputs.temperature, inputs.p_min);
  if (in.ConsumeIntegralInRange<int>(0, 31) != 0) {
    const size_t n = valid_blocks ? size_t(inputs.n_blocks) : 1;
    int32_t* a = arena.take_array<int32_t>(n);
    for (size_t b = 0; b < n; ++b)
      a[b] = pick<int32_t>(in, 0, int32_t(c.n_vocab - 1), {-1, int32_t(c.n_vocab), int32_t(kI32Max), INT32_MIN});
    inputs.anchors = a;
  }
  Outputs o = make_outputs(in, arena, d, inputs.n_blocks);
  if (o.sized) add_hazard(in, d, &inputs, &o);

  dfsel_status s;
  if (in.ConsumeBool()) {
    s = dfsel_plan_run(plan, &inputs, &o.out, nullptr);
  } else {
    void* streams[1] = {nullptr};
    s = dfsel_run_group(1, &plan, &inputs, &o.out, in.ConsumeBool() ? streams : nullptr);
  }
  expect(dfsel_plan_last_error(plan) != nullptr, "no last error");
  if (s == DFSEL_SUCCESS) {
    expect(o.sized, "a run with n_blocks outside [1, max_blocks] succeeded");
    expect(!o.hazard, "a run with a misaligned or overlapping buffer succeeded");
    expect(dfsel_plan_check(plan, nullptr) == DFSEL_SUCCESS, "check after a good run failed");
    expect(dfsel_plan_wait(plan, nullptr, (int64_t)in.ConsumeIntegral<int32_t>()) == DFSEL_SUCCESS,
           "a bounded wait after a good run failed");
    check_outputs(d, inputs, o.out);
  } else {
    expect(std::strlen(dfsel_plan_last_error(plan)) > 0, "a failed run left no message");
  }
  // Calls with pieces missing.
  expect(dfsel_plan_run(plan, nullptr, &o.out, nullptr) == DFSEL_INVALID_ARGUMENT, "inputs NULL passed");
  expect(dfsel_plan_run(plan, &inputs, nullptr, nullptr) == DFSEL_INVALID_ARGUMENT, "outputs NULL passed");
  expect(dfsel_run_group(0, &plan, &inputs, &o.out, nullptr) == DFSEL_INVALID_ARGUMENT, "n = 0 passed");
  dfsel_plan* none = nullptr;
  expect(dfsel_run_group(1, &none, &inputs, &o.out, nullptr) == DFSEL_INVALID_ARGUMENT, "plans[0] NULL passed");
  dfsel_plan* twice[2] = {plan, plan};
  const dfsel_inputs ins[2] = {inputs, inputs};
  const dfsel_outputs outs[2] = {o.out, o.out};
  expect(dfsel_run_group(2, twice, ins, outs, nullptr) == DFSEL_INVALID_ARGUMENT, "one plan twice in a group passed");
  // A CPU plan has no stream and no device work: any stream, any limit, no wait.
  void* stream = reinterpret_cast<void*>(in.ConsumeIntegral<uintptr_t>());
  expect(dfsel_plan_wait(plan, stream, in.ConsumeIntegral<int64_t>()) == DFSEL_SUCCESS, "a wait on a CPU plan failed");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  Arena arena;
  dfsel_plan_desc d{};
  dfsel_config& c = d.config;
  c.n_vocab = pick<int64_t>(in, 1, 300, {0, -1, kI32Max, kI32Max + 1, kI64Max, kI64Min, 20000});
  c.n_embd = pick<int64_t>(in, 1, 300, {0, -1, kI64Max, int64_t(1) << 40, int64_t(1) << 62, (int64_t(1) << 62) + 8, 4096});
  c.codebook_rank = in.ConsumeIntegralInRange<int>(0, 7) == 0 ? 256  // K-quant codebooks need R % 256 == 0
                                                     : pick<int32_t>(in, 1, 48, {0, -1, 512, 1024, 1025, int32_t(kI32Max)});
  c.top_k = pick<int32_t>(in, 1, 20, {0, -1, 64, 65, int32_t(kI32Max)});
  c.block_size = pick<int32_t>(in, 2, 17, {0, 1, 1024, 1025, INT32_MIN});
  c.logit_scale = pick_float(in, 0.1f, 4.0f, {0.0f, 1.0f, -1.0f, kNaN, kInf, 1e-30f, FLT_MAX});
  c.softcap = pick_float(in, 0.0f, 50.0f, {0.0f, -1.0f, kNaN, kInf, -kInf, 1e-30f, FLT_MAX});
  c.max_blocks = pick<int32_t>(in, 1, 4, {0, -1, int32_t(kI32Max), 1 << 20, 1 << 21, 64});

  dfsel_shard& s = d.shard;
  s.n_ranks = pick<int32_t>(in, 1, 3, {0, -1, int32_t(kI32Max)});
  s.rank = pick<int32_t>(in, 0, s.n_ranks > 1 ? s.n_ranks - 1 : 0, {-1, s.n_ranks, INT32_MIN});
  const int64_t V = c.n_vocab;
  if (sane(V, 1 << 20) && in.ConsumeBool()) {
    s.v_begin = in.ConsumeIntegralInRange<int64_t>(0, V);
    s.v_end = in.ConsumeIntegralInRange<int64_t>(s.v_begin, V + 1);
  } else {
    s.v_begin = pick<int64_t>(in, 0, 0, {-1, 1, kI64Max, kI64Min});
    s.v_end = pick<int64_t>(in, V, V, {0, 1, kI64Max, kI64Min, V == kI64Min ? 0 : V - 1});
  }
  store_int(&d.backend, in.PickValueInArray<int>({DFSEL_BACKEND_AUTO, DFSEL_BACKEND_CPU, DFSEL_BACKEND_CPU,
                                             DFSEL_BACKEND_CUDA, 3, -1}));
  d.device = pick<int32_t>(in, 0, 0, {1, -1});
  store_int(&d.placement, in.PickValueInArray<int>({DFSEL_CODEBOOKS_REPLICATED, DFSEL_CODEBOOKS_REPLICATED,
                                               DFSEL_CODEBOOKS_SHARDED, 2, -1}));
  static uint8_t not_a_comm[64];
  if (in.ConsumeIntegralInRange<int>(0, 31) == 0) d.nccl_comm = not_a_comm;

  const bool range_ok = s.v_begin >= 0 && s.v_end > s.v_begin && s.v_end - s.v_begin <= (1 << 20);
  const int64_t cb_rows = load_int(d.placement) == DFSEL_CODEBOOKS_SHARDED ? (range_ok ? s.v_end - s.v_begin : -1)
                                                                 : (sane(V, 1 << 20) ? V : -1);
  const int64_t R = sane(c.codebook_rank, 1 << 20) ? c.codebook_rank : -1;
  const int64_t E = c.n_embd > 0 ? c.n_embd : -1;
  d.e_prev = make_tensor(in, arena, Claim{R, cb_rows, true}, nullptr);
  d.e_next = make_tensor(in, arena, Claim{R, cb_rows, true}, &d.e_prev);
  d.w_h = make_tensor(in, arena, Claim{E, R, true}, nullptr);
  if (verbose())
    std::fprintf(stderr, "V %lld n_embd %lld R %d K %d block %d max_blocks %d scale %g softcap %g shard %d/%d [%lld, %lld) backend %d placement %d\n",
                 (long long)c.n_vocab, (long long)c.n_embd, c.codebook_rank, c.top_k, c.block_size, c.max_blocks, c.logit_scale,
                 c.softcap, s.rank, s.n_ranks, (long long)s.v_begin, (long long)s.v_end, load_int(d.backend), load_int(d.placement));
  describe("e_prev", d.e_prev);
  describe("e_next", d.e_next);
  describe("w_h", d.w_h);

  // The workspace the description needs, which also keeps plans small enough to run here.
  size_t need = 0;
  char msg[160];
  const size_t msg_len = in.PickValueInArray<size_t>({sizeof msg, sizeof msg, 0, 1, 7});
  const dfsel_status ws = dfsel_workspace_size(&d, &need, msg_len ? msg : nullptr, msg_len);
  if (ws == DFSEL_SUCCESS && need > kWorkspaceCap) return 0;
  if (ws == DFSEL_SUCCESS) {
    switch (in.ConsumeIntegralInRange<int>(0, 7)) {
      case 0:  // exactly what it needs
        d.workspace = arena.take(need, in.PickValueInArray<size_t>({0, 0, 16, 1}));
        d.workspace_bytes = need;
        break;
      case 1:  // less than it needs: refused
        d.workspace_bytes = need > 0 ? need - 1 - in.ConsumeIntegralInRange<size_t>(0, need - 1) : 0;
        d.workspace = arena.take(d.workspace_bytes > 0 ? d.workspace_bytes : 1);
        break;
      case 2:  // a pointer without a size: refused
        d.workspace = arena.take(16);
        d.workspace_bytes = 0;
        break;
      default:
        break;
    }
  }

  size_t bytes;
  dfsel_plan* plan = nullptr;
  expect(dfsel_workspace_size(nullptr, &bytes, nullptr, 0) == DFSEL_INVALID_ARGUMENT, "desc NULL passed");
  expect(dfsel_workspace_size(&d, nullptr, nullptr, 0) == DFSEL_INVALID_ARGUMENT, "bytes NULL passed");
  expect(dfsel_plan_create(nullptr, &plan, nullptr, 0) == DFSEL_INVALID_ARGUMENT, "desc NULL passed");
  expect(dfsel_plan_create(&d, nullptr, nullptr, 0) == DFSEL_INVALID_ARGUMENT, "plan NULL passed");
  plan = reinterpret_cast<dfsel_plan*>(&d);  // create must overwrite it
  const dfsel_status created = dfsel_plan_create(&d, &plan, msg_len ? msg : nullptr, msg_len);
  if (msg_len > 0) expect(std::memchr(msg, '\0', msg_len) != nullptr, "the message is not terminated");
  if (created != DFSEL_SUCCESS) {
    expect(plan == nullptr, "a failed create left a plan");
    return 0;
  }
  expect(ws == DFSEL_SUCCESS, "create accepted what workspace_size refused");
  expect(dfsel_plan_backend(plan) == DFSEL_BACKEND_CPU, "a plan on another backend than the CPU");
  run_plan(in, arena, plan, d);
  dfsel_plan_destroy(plan);
  return 0;
}
