// The CPU reference backend: the selector of DESIGN sections 2 and 3 on host memory, built
// from the reference steps in cpu_reference.cpp. Its buffers are carved once at set-up.
#include <cinttypes>
#include <cstring>
#include <vector>

#include "host/backend/backend.h"
#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"

namespace dfsel {

namespace {

struct CpuCarve {
  size_t g, send, recv, merged, src, lattice, rows, total;
};

CpuCarve carve(const dfsel_plan_desc& desc, const PlanShape& sh) {
  const size_t maxd = (size_t)desc.config.max_blocks * sh.L;
  const ExchangeLayout l = sh.layout_for(desc.config.max_blocks);
  CpuCarve c{};
  size_t off = 0;
  auto take = [&](size_t bytes) { const size_t at = off; off += align16(bytes); return at; };
  c.g = take(maxd * sh.R * sizeof(float));
  c.send = take(l.bytes);
  // One rank exchanges with itself: its records are read where they were written.
  c.recv = desc.shard.n_ranks == 1 ? c.send : take((size_t)desc.shard.n_ranks * l.bytes);
  c.merged = take(maxd * sh.k * sizeof(CandRec));
  c.src = take(maxd * sh.k * sizeof(int32_t));
  c.lattice = take(maxd * sh.k * sh.k * sizeof(float));
  c.rows = take((size_t)2 * sh.k * sh.R * sizeof(float));
  c.total = off;
  return c;
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(const dfsel_plan_desc& desc, const PlanShape& sh) : desc_(desc), sh_(sh), c_(carve(desc, sh)) {
    if (desc.workspace) {
      base_ = static_cast<uint8_t*>(desc.workspace);
    } else {
      owned_.resize(c_.total + 16);
      base_ = owned_.data();
    }
  }

  dfsel_backend kind() const override { return DFSEL_BACKEND_CPU; }
  void* send_buffer() override { return base_ + c_.send; }
  void* recv_buffer() override { return base_ + c_.recv; }
  Status query(void*, bool* done) override {
    *done = true;  // a CPU run completes before dfsel_plan_run returns
    return Status::success();
  }
  Status wait(void*) override { return Status::success(); }
  Status report() override { return Status::success(); }  // errors return from the run itself

  Status select(const dfsel_inputs& in, void*) override {
    const ExchangeLayout l = sh_.layout_for(in.n_blocks);
    for (int32_t b = 0; b < in.n_blocks; ++b)
      if (in.anchors[b] < 0 || in.anchors[b] >= sh_.n_vocab)
        return fail(DFSEL_INVALID_ARGUMENT, "inputs.anchors[%d] = %d is outside [0, %" PRId64 ")", b,
                    in.anchors[b], sh_.n_vocab);
    const ref::RowMap map{sh_.L, sh_.block_size, 1};
    uint8_t* send = static_cast<uint8_t*>(send_buffer());
    ref::shard_topk(in.logits, map, l.n_drafted, sh_.k, sh_.v_begin, layout_cands(l, send));
    ref::gate(desc_.w_h, in.hidden, map, l.n_drafted, g());
    if (!sh_.sharded) return Status::success();
    // Vocabulary-sharded codebooks: ship the rows of every local candidate and of owned anchors.
    const CandRec* cands = layout_cands(l, send);
    for (int32_t d = 0; d < l.n_drafted; ++d)
      for (int32_t j = 0; j < sh_.k; ++j) {
        const int64_t local = cands[(size_t)d * sh_.k + j].id - sh_.v_begin;
        std::memcpy(layout_row(l, send, d, j, 0), cb_row(desc_.e_prev, local), sh_.cb_row_bytes);
        std::memcpy(layout_row(l, send, d, j, 1), cb_row(desc_.e_next, local), sh_.cb_row_bytes);
      }
    for (int32_t b = 0; b < in.n_blocks; ++b) {
      const int32_t a = in.anchors[b];
      const bool owned = a >= sh_.v_begin && a < sh_.v_end;
      *layout_anchor_owned(l, send, b) = owned ? 1 : 0;
      if (owned) std::memcpy(layout_anchor_row(l, send, b), cb_row(desc_.e_prev, a - sh_.v_begin), sh_.cb_row_bytes);
    }
    return Status::success();
  }

  Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void*) override {
    const ExchangeLayout l = sh_.layout_for(in.n_blocks);
    const int32_t S = desc_.shard.n_ranks, K = sh_.k, R = sh_.R, L = sh_.L;
    uint8_t* recv = static_cast<uint8_t*>(recv_buffer());
    CandRec* merged = reinterpret_cast<CandRec*>(base_ + c_.merged);
    int32_t* src = reinterpret_cast<int32_t*>(base_ + c_.src);
    float* lattice = reinterpret_cast<float*>(base_ + c_.lattice);
    float* prev_rows = reinterpret_cast<float*>(base_ + c_.rows);
    float* next_rows = prev_rows + (size_t)K * R;
    std::vector<CandRec> recs((size_t)S * K);
    float u[64];
    for (int32_t d = 0; d < l.n_drafted; ++d) {
      for (int32_t r = 0; r < S; ++r)
        std::memcpy(&recs[(size_t)r * K], layout_cands(l, recv + (size_t)r * l.bytes) + (size_t)d * K,
                    K * sizeof(CandRec));
      ref::merge_candidates_src(recs.data(), S * K, K, merged + (size_t)d * K, src + (size_t)d * K);
    }
    const Transform tr{desc_.config.logit_scale > 0.0f ? desc_.config.logit_scale : 1.0f, desc_.config.softcap};
    for (int32_t b = 0; b < in.n_blocks; ++b) {
      for (int32_t p = 1; p <= L; ++p) {
        const int32_t d = b * L + p - 1;
        const CandRec* c = merged + (size_t)d * K;
        for (int32_t j = 0; j < K; ++j) {
          u[j] = transform_logit(tr, c[j].z);
          ref::load_row(next_row(l, recv, d, j, src), desc_.e_next.type, R, next_rows + (size_t)j * R);
        }
        int32_t n_prev = K;
        if (p == 1) {
          n_prev = 1;
          ref::load_row(anchor_row(l, recv, b, in.anchors[b]), desc_.e_prev.type, R, prev_rows);
        } else {
          for (int32_t i = 0; i < K; ++i)
            ref::load_row(prev_row(l, recv, d - 1, i, src), desc_.e_prev.type, R, prev_rows + (size_t)i * R);
        }
        float* s = lattice + (size_t)d * K * K;
        ref::score_lattice(prev_rows, n_prev, g() + (size_t)d * R, next_rows, u, K, R, s);
        for (int32_t i = n_prev; i < K; ++i) std::memcpy(s + (size_t)i * K, s, K * sizeof(float));
        write_native(out, d, c, u, s);
      }
      float* q = (out.q && in.temperature > 0.0f) ? out.q + (size_t)b * L * K : nullptr;
      ref::walk_block(lattice + (size_t)b * L * K * K, merged + (size_t)b * L * K, L, K, in.temperature,
                      in.p_min, in.seed, (uint32_t)b, out.path + (size_t)b * L, out.n_emitted + b, q);
      if (out.packed) write_packed(out, b, merged, lattice);
    }
    return Status::success();
  }

  Status local_exchange(Backend* const* group, int n, size_t bytes, void* const*) override {
    uint8_t* recv = static_cast<uint8_t*>(recv_buffer());
    if (n == 1 && recv == send_buffer()) return Status::success();
    for (int r = 0; r < n; ++r) std::memcpy(recv + (size_t)r * bytes, group[r]->send_buffer(), bytes);
    return Status::success();
  }

 private:
  float* g() { return reinterpret_cast<float*>(base_ + c_.g); }

  const uint8_t* cb_row(const dfsel_tensor& t, int64_t row) const {
    return static_cast<const uint8_t*>(t.data) + (size_t)row * t.nb[1];
  }

  // Codebook rows of merged candidate j of drafted row d: the local codebook when replicated,
  // the contributing rank's record when sharded (src says which record won).
  const void* next_row(const ExchangeLayout& l, uint8_t* recv, int32_t d, int32_t j, const int32_t* src) const {
    const int32_t s = src[(size_t)d * sh_.k + j];
    if (!sh_.sharded) return cb_row(desc_.e_next, merged_id(l, recv, d, s));
    return layout_row(l, recv + (size_t)(s / sh_.k) * l.bytes, d, s % sh_.k, 1);
  }
  const void* prev_row(const ExchangeLayout& l, uint8_t* recv, int32_t d, int32_t i, const int32_t* src) const {
    const int32_t s = src[(size_t)d * sh_.k + i];
    if (!sh_.sharded) return cb_row(desc_.e_prev, merged_id(l, recv, d, s));
    return layout_row(l, recv + (size_t)(s / sh_.k) * l.bytes, d, s % sh_.k, 0);
  }
  const void* anchor_row(const ExchangeLayout& l, uint8_t* recv, int32_t b, int32_t a) const {
    if (!sh_.sharded) return cb_row(desc_.e_prev, a);
    for (int32_t r = 0; r < desc_.shard.n_ranks; ++r)
      if (*layout_anchor_owned(l, recv + (size_t)r * l.bytes, b)) return layout_anchor_row(l, recv + (size_t)r * l.bytes, b);
    return nullptr;  // unreachable: the ranges tile [0, V) and anchors were checked
  }
  int32_t merged_id(const ExchangeLayout& l, uint8_t* recv, int32_t d, int32_t s) const {
    return layout_cands(l, recv + (size_t)(s / sh_.k) * l.bytes)[(size_t)d * sh_.k + s % sh_.k].id;
  }

  void write_native(const dfsel_outputs& out, int32_t d, const CandRec* c, const float* u, const float* s) const {
    const int32_t K = sh_.k;
    for (int32_t j = 0; j < K; ++j) {
      if (out.cand_ids) out.cand_ids[(size_t)d * K + j] = c[j].id;
      if (out.unary) out.unary[(size_t)d * K + j] = u[j];
    }
    if (out.scores) std::memcpy(out.scores + (size_t)d * K * K, s, (size_t)K * K * sizeof(float));
  }

  // llama.cpp's packed lattice (DESIGN section 4): row 0 zero; row p = [ids | K*K scores | 0].
  void write_packed(const dfsel_outputs& out, int32_t b, const CandRec* merged, const float* lattice) const {
    const int32_t K = sh_.k, L = sh_.L;
    const size_t stride = out.packed_row_stride ? out.packed_row_stride : (size_t)sh_.n_embd * 4;
    for (int32_t p = 0; p <= L; ++p) {
      float* row = reinterpret_cast<float*>(reinterpret_cast<uint8_t*>(out.packed) + ((size_t)b * sh_.block_size + p) * stride);
      std::memset(row, 0, (size_t)sh_.n_embd * 4);
      if (p == 0) continue;
      const int32_t d = b * L + p - 1;
      for (int32_t j = 0; j < K; ++j) row[j] = (float)merged[(size_t)d * K + j].id;
      std::memcpy(row + K, lattice + (size_t)d * K * K, (size_t)K * K * sizeof(float));
    }
  }

  dfsel_plan_desc desc_;
  PlanShape sh_;
  CpuCarve c_;
  std::vector<uint8_t> owned_;
  uint8_t* base_ = nullptr;
};

}  // namespace

size_t cpu_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape) {
  return carve(desc, shape).total;
}

Status make_cpu_backend(const dfsel_plan_desc& desc, const PlanShape& shape, std::unique_ptr<Backend>* out) {
  if (desc.workspace && desc.workspace_bytes < cpu_workspace_bytes(desc, shape))
    return fail(DFSEL_INVALID_ARGUMENT, "workspace_bytes = %zu is less than the %zu bytes this plan needs",
                desc.workspace_bytes, cpu_workspace_bytes(desc, shape));
  // The carve places floats and records at 16-byte offsets from the base.
  if (desc.workspace && reinterpret_cast<uintptr_t>(desc.workspace) % 16 != 0)
    return fail(DFSEL_INVALID_ARGUMENT, "workspace = %p is not aligned to 16 bytes", desc.workspace);
  if (desc.nccl_comm)
    return fail(DFSEL_UNSUPPORTED, "nccl_comm is set but the CPU backend exchanges in process only; use the CUDA backend");
  try {
    out->reset(new CpuBackend(desc, shape));
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes could not be allocated", cpu_workspace_bytes(desc, shape));
  }
  return Status::success();
}

}  // namespace dfsel
