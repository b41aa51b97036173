// The CPU backend: the selector of DESIGN sections 2 and 3 on host memory, composed of the
// reference steps (host/reference) and the rules the kernels share (kernels/common): where
// each codebook row comes from, the walk, the packed rows. Its buffers are carved from one
// workspace at set-up; a run allocates nothing.
#include <cinttypes>
#include <cstring>
#include <vector>

#include "host/backend/backend.h"
#include "host/reference/cpu_reference.h"
#include "kernels/common/numeric.cuh"
#include "kernels/common/packed_row.cuh"
#include "kernels/common/row_source.cuh"

namespace dfsel {

namespace {

struct CpuCarve {
  size_t g, send, recv, merged, src, recs, lattice, rows, total;
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
  c.recv = sh.n_ranks == 1 ? c.send : take((size_t)sh.n_ranks * l.bytes);
  c.merged = take(maxd * sh.k * sizeof(CandRec));
  c.src = take(maxd * sh.k * sizeof(int32_t));
  c.recs = take((size_t)sh.n_ranks * sh.k * sizeof(CandRec));
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
  Endpoint endpoint() override { return Endpoint{base_ + c_.send, base_ + c_.recv, -1, nullptr}; }
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
    const RowMap map = drafted_rows(sh_.block_size);
    uint8_t* send = base_ + c_.send;
    ref::shard_topk(in.logits, map, l.n_drafted, sh_.k, sh_.v_begin, layout_cands(l, send));
    ref::gate(desc_.w_h, in.hidden, map, l.n_drafted, g());
    if (sh_.sharded) pack_records(l, in.anchors, send);
    return Status::success();
  }

  Status finish(const dfsel_inputs& in, const dfsel_outputs& out, void*) override {
    const RowSource src_rows = row_source(in.n_blocks);
    const int32_t K = sh_.k, R = sh_.R, L = sh_.L;
    CandRec* merged = reinterpret_cast<CandRec*>(base_ + c_.merged);
    int32_t* src = reinterpret_cast<int32_t*>(base_ + c_.src);
    CandRec* recs = reinterpret_cast<CandRec*>(base_ + c_.recs);
    float* lattice = reinterpret_cast<float*>(base_ + c_.lattice);
    float* prev_rows = reinterpret_cast<float*>(base_ + c_.rows);
    float* next_rows = prev_rows + (size_t)K * R;
    const int32_t n_recs = sh_.n_ranks * K;
    for (int32_t d = 0; d < src_rows.layout.n_drafted; ++d) {
      for (int32_t q = 0; q < n_recs; ++q) recs[q] = record_at(src_rows, d, q);
      ref::merge_candidates(recs, n_recs, K, merged + (size_t)d * K, src + (size_t)d * K);
    }
    const dfsel_type cb = desc_.e_prev.type;
    float u[kMaxTopK];
    for (int32_t b = 0; b < in.n_blocks; ++b) {
      const int owner = sh_.sharded ? anchor_owner(src_rows, b) : 0;
      for (int32_t p = 1; p <= L; ++p) {
        const int32_t d = b * L + p - 1;
        const CandRec* c = merged + (size_t)d * K;
        for (int32_t j = 0; j < K; ++j) {
          u[j] = transform_logit(sh_.transform, c[j].z);
          ref::load_row(candidate_row(src_rows, d, src[(size_t)d * K + j], c[j].id, 1), cb, R, next_rows + (size_t)j * R);
        }
        const int32_t n_prev = predecessor_count(p, K);
        if (p == 1) {
          ref::load_row(anchor_row(src_rows, b, in.anchors[b], owner), cb, R, prev_rows);
        } else {
          for (int32_t i = 0; i < K; ++i)
            ref::load_row(candidate_row(src_rows, d - 1, src[(size_t)(d - 1) * K + i], merged[(size_t)(d - 1) * K + i].id, 0),
                          cb, R, prev_rows + (size_t)i * R);
        }
        float* s = lattice + (size_t)d * K * K;
        ref::score_lattice(prev_rows, n_prev, g() + (size_t)d * R, next_rows, u, K, R, s);
        for (int32_t i = n_prev; i < K; ++i) std::memcpy(s + (size_t)i * K, s + (size_t)scored_row(p, i) * K, K * sizeof(float));
        write_native(out, d, c, u, s);
      }
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

  void write_native(const dfsel_outputs& out, int32_t d, const CandRec* c, const float* u, const float* s) const {
    const int32_t K = sh_.k;
    for (int32_t j = 0; j < K; ++j) {
      if (out.cand_ids) out.cand_ids[(size_t)d * K + j] = c[j].id;
      if (out.unary) out.unary[(size_t)d * K + j] = u[j];
    }
    if (out.scores) std::memcpy(out.scores + (size_t)d * K * K, s, (size_t)K * K * sizeof(float));
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
  try {
    out->reset(new CpuBackend(desc, shape));
  } catch (const std::bad_alloc&) {
    return fail(DFSEL_OUT_OF_MEMORY, "the CPU workspace of %zu bytes could not be allocated", cpu_workspace_bytes(desc, shape));
  }
  return Status::success();
}

}  // namespace dfsel
