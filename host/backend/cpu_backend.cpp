// The CPU backend: the selector of SPEC sections 2 to 5 on host memory, with the rules the
// kernels share (kernels/common: where each codebook row comes from, the merge, the walk, the
// packed rows). It gives bitwise the results of the reference (host/reference): the same
// candidates (cpu_topk.cpp) and the same sums in the same order (cpu_simd.h), only faster.
// Everything is made at plan creation: W_h widened, the worker threads started, the buffers
// carved from one workspace; a run allocates nothing and starts no thread.
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <vector>

#include "host/backend/backend.h"
#include "host/backend/cpu_pool.h"
#include "host/backend/cpu_setup.h"
#include "host/backend/cpu_simd.h"
#include "host/backend/cpu_topk.h"
#include "host/backend/workspace_carve.h"
#include "host/reference/cpu_reference.h"
#include "kernels/common/agree_record.cuh"
#include "kernels/common/numeric.cuh"
#include "kernels/common/packed_row.cuh"
#include "kernels/common/row_source.cuh"

namespace dfsel {

namespace {

int32_t padded_rank(int32_t R) { return (R + kGateLanes - 1) / kGateLanes * kGateLanes; }
int32_t padded_k(int32_t k) { return (k + 15) / 16 * 16; }

struct CpuCarve {
  size_t g, h, send, recv, merged, src, recs, lattice, total;
};

CpuCarve carve(const dfsel_plan_desc& desc, const PlanShape& sh) {
  const size_t maxd = (size_t)desc.config.max_blocks * sh.L;
  const ExchangeLayout l = sh.layout_for(desc.config.max_blocks);
  CpuCarve c{};
  // max_blocks * (block_size - 1) * n_embd floats can exceed 64 bits: the carve saturates.
  WorkspaceCarve w;
  c.g = w.take(maxd * padded_rank(sh.R) * sizeof(float));
  c.h = w.take(WorkspaceCarve::product(maxd, (size_t)sh.n_embd * sizeof(float)));
  c.send = w.take(l.bytes);
  // One rank exchanges with itself: its records are read where they were written.
  c.recv = sh.n_ranks == 1 ? c.send : w.take((size_t)sh.n_ranks * l.bytes);
  c.merged = w.take(maxd * sh.k * sizeof(CandRec));
  c.src = w.take(maxd * sh.k * sizeof(int32_t));
  c.recs = w.take((size_t)sh.n_ranks * sh.k * sizeof(CandRec));
  c.lattice = w.take(maxd * sh.k * sh.k * sizeof(float));
  c.total = w.total;
  return c;
}

// One worker's rows for the lattice of a position.
struct LatticeScratch {
  std::vector<float> prev, next, next_t, t, u;
  LatticeScratch(int32_t k, int32_t R)
      : prev((size_t)k * R), next((size_t)k * R), next_t((size_t)R * padded_k(k)), t((size_t)4 * R), u((size_t)k) {}
};

void load_row_or_zeros(const uint8_t* row, dfsel_type t, int32_t R, float* out) {
  if (row) widen_row(row, t, R, out);
  else std::memset(out, 0, (size_t)R * sizeof(float));
}

class CpuBackend final : public CompletesInRun<Backend> {
 public:
  CpuBackend(const dfsel_plan_desc& desc, const PlanShape& sh)
      : desc_(desc), sh_(sh), c_(carve(desc, sh)), simd_(cpu_has_avx2_fma()), pool_(desc.n_threads) {
    base_ = workspace_base(desc.workspace, c_.total, &owned_);
    prepare_gate(desc.w_h, simd_, &gate_);
    scratch_.reserve((size_t)pool_.size());
    for (int32_t i = 0; i < pool_.size(); ++i) scratch_.emplace_back(sh.k, sh.R);
  }

  dfsel_backend kind() const override { return DFSEL_BACKEND_CPU; }
  Endpoint endpoint() override { return Endpoint{base_ + c_.send, base_ + c_.recv, -1, nullptr}; }

  Status select(const dfsel_inputs& in, void*, bool) override {
    const ExchangeLayout l = sh_.layout_for(in.n_blocks);
    for (int32_t b = 0; b < in.n_blocks; ++b)
      if (in.anchors[b] < 0 || in.anchors[b] >= sh_.n_vocab)
        return fail(DFSEL_INVALID_ARGUMENT, "inputs.anchors[%d] = %d is outside [0, %" PRId64 ")", b,
                    in.anchors[b], sh_.n_vocab);
    const RowMap map = drafted_rows(sh_.block_size);
    uint8_t* send = base_ + c_.send;
    CandRec* cands = layout_cands(l, send);
    const int32_t n = l.n_drafted;
    const int64_t n_cols = in.logits.ne[0];
    float* h = hidden_rows();
    // Top-K rows first (the long items), then the hidden rows the gate reads.
    auto rows = [&](int32_t item, int32_t) {
      if (item < n) {
        const uint8_t* row = static_cast<const uint8_t*>(in.logits.data) + (size_t)map_row(map, item) * in.logits.nb[1];
        row_topk(row, in.logits.type, n_cols, sh_.k, sh_.v_begin, simd_, cands + (size_t)item * sh_.k);
      } else {
        const int32_t s = item - n;
        const uint8_t* row = static_cast<const uint8_t*>(in.hidden.data) + (size_t)map_row(map, s) * in.hidden.nb[1];
        widen_row(row, in.hidden.type, sh_.n_embd, h + (size_t)s * sh_.n_embd);
      }
    };
    pool_.run(2 * n, rows);
    // The gate in chunks of 32 sums by ranges of at most 48 rows.
    constexpr int32_t kRowsPerItem = 48;
    const int32_t n_chunks = gate_.rp / kGateLanes, n_ranges = (n + kRowsPerItem - 1) / kRowsPerItem;
    auto gate = [&](int32_t item, int32_t) {
      const int32_t chunk = item % n_chunks, range = item / n_chunks;
      const int32_t s0 = range * kRowsPerItem, s1 = s0 + kRowsPerItem < n ? s0 + kRowsPerItem : n;
      gate_chunk(gate_, h, s0, s1, chunk, g());
    };
    pool_.run(n_chunks * n_ranges, gate);
    if (sh_.sharded) pack_records(l, in.anchors, send);
    // A group's agree section: CPU groups compared the inputs themselves before the run (step.cpp),
    // so only the anchors are written, and the digests left zero.
    for (int32_t b = 0; l.agree_off && b < in.n_blocks; ++b) *layout_agree(l, send, b) = AgreeRecord{in.anchors[b], 0, 0, 0};
    return Status::success();
  }

  Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void*) override {
    const RowSource src_rows = row_source(in.n_blocks);
    const int32_t K = sh_.k, L = sh_.L;
    CandRec* merged = reinterpret_cast<CandRec*>(base_ + c_.merged);
    int32_t* src = reinterpret_cast<int32_t*>(base_ + c_.src);
    CandRec* recs = reinterpret_cast<CandRec*>(base_ + c_.recs);
    float* lattice = reinterpret_cast<float*>(base_ + c_.lattice);
    const int32_t n_recs = sh_.n_ranks * K;
    for (int32_t d = 0; d < src_rows.layout.n_drafted; ++d) {
      for (int32_t q = 0; q < n_recs; ++q) recs[q] = record_at(src_rows, d, q);
      merge_top_k(recs, n_recs, K, merged + (size_t)d * K, src + (size_t)d * K);
    }
    auto position = [&](int32_t d, int32_t worker) { score_position(in, out, src_rows, d, scratch_[worker]); };
    pool_.run(src_rows.layout.n_drafted, position);
    for (int32_t b = 0; b < in.n_blocks; ++b) {
      float* q = (out.q && in.temperature > 0.0f) ? out.q + (size_t)b * L * K : nullptr;
      ref::walk_block(lattice + (size_t)b * L * K * K, merged + (size_t)b * L * K, L, K,
                      WalkParams{in.temperature, in.p_min, in.seed}, (uint32_t)b, out.path + (size_t)b * L,
                      out.n_emitted + b, q);
      if (out.packed) write_packed(out, b, merged, lattice);
    }
    return Status::success();
  }

 private:
  float* g() { return reinterpret_cast<float*>(base_ + c_.g); }
  float* hidden_rows() { return reinterpret_cast<float*>(base_ + c_.h); }

  // The unary values and the lattice of drafted row d (block b, position p), and its outputs.
  void score_position(const dfsel_inputs& in, const dfsel_outputs& out, const RowSource& src_rows, int32_t d,
                      LatticeScratch& w) {
    const int32_t K = sh_.k, R = sh_.R, L = sh_.L, kp = padded_k(K);
    const int32_t b = d / L, p = d % L + 1;
    const CandRec* merged = reinterpret_cast<const CandRec*>(base_ + c_.merged);
    const int32_t* src = reinterpret_cast<const int32_t*>(base_ + c_.src);
    const dfsel_type cb = desc_.e_prev.type;
    const CandRec* c = merged + (size_t)d * K;
    for (int32_t j = 0; j < K; ++j) {
      w.u[j] = transform_logit(sh_.transform, c[j].z);
      load_row_or_zeros(candidate_row(src_rows, d, src[(size_t)d * K + j], c[j].id, 1), cb, R, &w.next[(size_t)j * R]);
    }
    for (int32_t r = 0; r < R; ++r)
      for (int32_t j = 0; j < K; ++j) w.next_t[(size_t)r * kp + j] = w.next[(size_t)j * R + r];
    const int32_t n_prev = predecessor_count(p, K);
    if (p == 1) {
      const int owner = sh_.sharded ? anchor_owner(src_rows, b) : 0;
      load_row_or_zeros(anchor_row(src_rows, b, in.anchors[b], owner), cb, R, w.prev.data());
    } else {
      for (int32_t i = 0; i < K; ++i)
        load_row_or_zeros(candidate_row(src_rows, d - 1, src[(size_t)(d - 1) * K + i], merged[(size_t)(d - 1) * K + i].id, 0),
                          cb, R, &w.prev[(size_t)i * R]);
    }
    float* s = reinterpret_cast<float*>(base_ + c_.lattice) + (size_t)d * K * K;
    lattice_rows(w.prev.data(), n_prev, g() + (size_t)d * gate_.rp, w.next_t.data(), kp, w.u.data(), K, R, simd_,
                 w.t.data(), s);
    for (int32_t i = n_prev; i < K; ++i) std::memcpy(s + (size_t)i * K, s + (size_t)scored_row(p, i) * K, K * sizeof(float));
    for (int32_t j = 0; j < K; ++j) {
      if (out.cand_ids) out.cand_ids[(size_t)d * K + j] = c[j].id;
      if (out.unary) out.unary[(size_t)d * K + j] = w.u[j];
    }
    if (out.scores) std::memcpy(out.scores + (size_t)d * K * K, s, (size_t)K * K * sizeof(float));
  }

  RowSource row_source(int32_t n_blocks) const {
    return RowSource{base_ + c_.recv, sh_.layout_for(n_blocks), sh_.n_ranks,
                     static_cast<const uint8_t*>(desc_.e_prev.data), static_cast<const uint8_t*>(desc_.e_next.data),
                     desc_.e_prev.nb[1], sh_.n_vocab};
  }

  // Vocabulary-sharded codebooks: ship the rows of every local candidate and of owned anchors.
  void pack_records(const ExchangeLayout& l, const int32_t* anchors, uint8_t* send) const {
    const CandRec* cands = layout_cands(l, send);
    const uint8_t* ep = static_cast<const uint8_t*>(desc_.e_prev.data);
    const uint8_t* en = static_cast<const uint8_t*>(desc_.e_next.data);
    const size_t stride = desc_.e_prev.nb[1];
    for (int32_t d = 0; d < l.n_drafted; ++d)
      for (int32_t j = 0; j < sh_.k; ++j) {
        const int64_t local = cands[(size_t)d * sh_.k + j].id - sh_.v_begin;
        std::memcpy(layout_row(l, send, d, j, 0), ep + (size_t)local * stride, sh_.cb_row_bytes);
        std::memcpy(layout_row(l, send, d, j, 1), en + (size_t)local * stride, sh_.cb_row_bytes);
      }
    for (int32_t b = 0; b < l.n_blocks; ++b) {
      const bool owned = owns_token(sh_.v_begin, sh_.v_end, anchors[b]);
      *layout_anchor_owned(l, send, b) = owned ? 1 : 0;
      if (owned) std::memcpy(layout_anchor_row(l, send, b), ep + (size_t)(anchors[b] - sh_.v_begin) * stride, sh_.cb_row_bytes);
    }
  }

  void write_packed(const dfsel_outputs& out, int32_t b, const CandRec* merged, const float* lattice) const {
    const int32_t K = sh_.k, L = sh_.L;
    for (int32_t p = 0; p <= L; ++p) {
      float* row = packed_row(out.packed, out.packed_row_stride, b, sh_.block_size, p);
      if (p == 0) {
        std::memset(row, 0, (size_t)sh_.n_embd * 4);
        continue;
      }
      const int32_t d = b * L + p - 1;
      const CandRec* c = merged + (size_t)d * K;
      const float* s = lattice + (size_t)d * K * K;
      for (int64_t e = 0; e < sh_.n_embd; ++e)
        row[e] = packed_value(e, K, [&](int j) { return c[j].id; }, [&](int i, int j) { return s[(size_t)i * K + j]; });
    }
  }

  dfsel_plan_desc desc_;
  PlanShape sh_;
  CpuCarve c_;
  bool simd_;
  GateWeights gate_;
  std::vector<LatticeScratch> scratch_;  // one per worker
  std::vector<uint8_t> owned_;
  uint8_t* base_ = nullptr;
  WorkerPool pool_;  // last: its threads are joined before the buffers they use are freed
};

}  // namespace

size_t cpu_workspace_bytes(const dfsel_plan_desc& desc, const PlanShape& shape) {
  return carve(desc, shape).total;
}

Status make_cpu_backend(const dfsel_plan_desc& desc, const PlanShape& shape, std::unique_ptr<Backend>* out) {
  const CpuSetup setup{desc.workspace, desc.workspace_bytes, cpu_workspace_bytes(desc, shape), desc.config.max_blocks,
                       desc.shard.n_ranks,  shape.n_embd,        desc.n_threads};
  DFSEL_TRY(check_cpu_setup(setup));
  char widened[96];
  std::snprintf(widened, sizeof widened, " and W_h widened to %" PRId64 " x %d floats", shape.n_embd,
                padded_rank(shape.R));
  return build_cpu_backend(setup, widened, out, [&] { return new CpuBackend(desc, shape); });
}

}  // namespace dfsel
