// The CPU backend of DSpark plans: one rank's part of the chain (docs/dspark.md) on host memory,
// bitwise the reference (host/reference/dspark_reference.cpp) for every shard count. Each step
// reads the shard's W2 rows once for all blocks on the worker threads (cpu_dspark_pass.h),
// keeps the shard's best per block in a record, and after the exchange every rank merges the
// same records (kernels/common/dspark_record.cuh) into the same winner. Everything is made at
// plan creation; a run allocates nothing and starts no thread.
#include <cinttypes>
#include <cstring>
#include <vector>

#include "host/backend/cpu_dspark_pass.h"
#include "host/backend/cpu_pool.h"
#include "host/backend/cpu_setup.h"
#include "host/backend/cpu_simd.h"
#include "host/backend/dspark_backend.h"
#include "host/backend/workspace_carve.h"

namespace dfsel {

namespace {

constexpr int64_t kRowsPerItem = 2048;  // rows a worker takes at a time: 1 MB of BF16 W2 at R 256

int32_t padded8(int32_t R) { return (R + 7) / 8 * 8; }

struct DSparkCarve {
  size_t send, recv, e, h, l, total;
};

DSparkCarve carve(const dfsel_dspark_plan_desc& desc, const DSparkShape& sh) {
  const size_t maxb = (size_t)desc.config.max_blocks, vs = (size_t)(sh.v_end - sh.v_begin);
  const DSparkLayout lay = sh.layout_for(desc.config.max_blocks);
  DSparkCarve c{};
  WorkspaceCarve w;
  c.send = w.take(lay.bytes);
  // One rank exchanges with itself: its records are read where they were written.
  c.recv = sh.n_ranks == 1 ? c.send : w.take(WorkspaceCarve::product((size_t)sh.n_ranks, lay.bytes));
  c.e = w.take(maxb * padded8(sh.R) * sizeof(float));
  c.h = w.take(WorkspaceCarve::product(maxb, (size_t)sh.n_embd * sizeof(float)));
  // Sampling keeps two steps of l: the last one's normaliser waits for its row maximum.
  c.l = w.take(WorkspaceCarve::product(2 * maxb, vs * sizeof(float)));
  c.total = w.total;
  return c;
}

class CpuDSpark final : public CompletesInRun<DSparkBackend> {
 public:
  CpuDSpark(const dfsel_dspark_plan_desc& desc, const DSparkShape& sh)
      : d_(desc), sh_(sh), c_(carve(desc, sh)), isa_(cpu_pass_isa()), pool_(desc.n_threads) {
    base_ = workspace_base(desc.workspace, c_.total, &owned_);
    const size_t maxb = (size_t)desc.config.max_blocks;
    n_items_ = (int32_t)((sh.v_end - sh.v_begin + kRowsPerItem - 1) / kRowsPerItem);
    best_.resize((size_t)n_items_ * maxb);
    norm_.resize((size_t)n_items_ * maxb);
    block_.resize(maxb);
    inputs_.resize(maxb);
    state_.resize(maxb);
    e_.resize(maxb);
    e_pass_.resize(maxb);
    z_.resize(maxb);
    l_.resize(maxb);
    pass_best_.resize(maxb);
    last_norm_.resize(maxb);
    for (size_t b = 0; b < maxb; ++b) e_[b] = floats(c_.e) + b * padded8(sh.R);
    if (sh.conf) conf_w_digest_ = matrix_digest(static_cast<const uint8_t*>(desc.conf_w.data),
                                                row_bytes(desc.conf_w.type, desc.conf_w.ne[0]), 1, desc.conf_w.nb[1]);
  }

  dfsel_backend kind() const override { return DFSEL_BACKEND_CPU; }
  Endpoint endpoint() override { return Endpoint{base_ + c_.send, base_ + c_.recv, -1, nullptr}; }

  Status begin(const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out, void*, int) override;
  Status send(int32_t x, void*) override;
  Status receive(int32_t x, void*) override;

 private:
  float* floats(size_t at) const { return reinterpret_cast<float*>(base_ + at); }
  size_t cell(int32_t b, int32_t k) const { return dspark_cell(b, sh_.N, k); }
  DSparkLayout layout() const { return sh_.layout_for(in_.n_blocks); }
  float* stored_l(int32_t b, int32_t k) const {
    return floats(c_.l) + ((size_t)(k & 1) * d_.config.max_blocks + b) * (size_t)(sh_.v_end - sh_.v_begin);
  }
  const uint8_t* w1_row(int64_t row) const { return static_cast<const uint8_t*>(d_.w1.data) + (size_t)row * d_.w1.nb[1]; }
  void set_e(int32_t b, const uint8_t* row) const {
    widen_row(row, d_.w1.type, sh_.R, e_[b]);
    for (int32_t r = sh_.R; r < padded8(sh_.R); ++r) e_[b][r] = 0.0f;
  }
  bool owns_row(int64_t id) const { return id >= sh_.v_begin && id < sh_.v_end; }
  bool stops(int32_t b, int32_t k);
  uint32_t inputs_digest(int32_t b) const;
  void local_pass(int32_t k);
  void norm_pass(int32_t k);
  void write_records(int32_t k);

  dfsel_dspark_plan_desc d_;
  DSparkShape sh_;
  DSparkCarve c_;
  PassIsa isa_;
  int32_t n_items_ = 0;
  uint8_t* base_ = nullptr;
  std::vector<uint8_t> owned_;
  dfsel_dspark_inputs in_{};
  dfsel_dspark_outputs out_{};
  // Per block: the blocks of the current pass, each block's chain state, its W1 row, base
  // logits and stored l.
  std::vector<int32_t> block_;
  std::vector<uint32_t> inputs_;  // per block: the digest its records carry
  uint64_t conf_w_digest_ = 0;    // matrix_digest of conf_w, for inputs_
  int32_t n_pass_ = 0;
  std::vector<DSparkChainState> state_;
  std::vector<float*> e_;
  std::vector<const float*> e_pass_;
  std::vector<const uint8_t*> z_;
  std::vector<float*> l_;
  std::vector<MarkovBest> best_, pass_best_;  // per item and block; per pass block
  std::vector<NormSum> norm_, last_norm_;     // per item and block; per block
  WorkerPool pool_;  // last: its threads are joined before the buffers they use are freed
};

Status CpuDSpark::begin(const dfsel_dspark_inputs& in, const dfsel_dspark_outputs& out, void*, int) {
  for (int32_t b = 0; b < in.n_blocks; ++b)
    if (in.anchors[b] < 0 || in.anchors[b] >= sh_.n_target_vocab)
      return fail(DFSEL_INVALID_ARGUMENT, "inputs.anchors[%d] = %d is outside [0, config.n_target_vocab = %" PRId64 ")", b,
                  in.anchors[b], sh_.n_target_vocab);
  in_ = in;
  out_ = out;
  const size_t cells = (size_t)in.n_blocks * sh_.N;
  for (size_t i = 0; i < cells; ++i) clear_dspark_cell(out_, i);
  for (int32_t b = 0; b < in.n_blocks; ++b) {
    out.n_emitted[b] = 0;
    inputs_[b] = inputs_digest(b);
    state_[b] = DSparkChainState{1, 0, -INFINITY, 0.0f};
    if (!sh_.sharded_w1) set_e(b, w1_row(in.anchors[b]));
  }
  return Status::success();
}

// What block b's records say of the run's inputs (dspark_record.cuh): the scalars and, with a
// confidence head, the hidden rows the block reads, which every rank holds whole.
uint32_t CpuDSpark::inputs_digest(int32_t b) const {
  uint64_t rows = 0;
  if (sh_.conf) {
    const size_t n = row_bytes(in_.hidden.type, sh_.n_embd);
    for (int32_t k = 1; k <= sh_.N; ++k)
      rows += digest_row(static_cast<const uint8_t*>(in_.hidden.data) +
                             (size_t)map_row(sh_.row_map, (int64_t)cell(b, k)) * in_.hidden.nb[1],
                         n, (uint64_t)(k - 1), 0, 1);
  }
  return dspark_inputs_word(digest_scalars(in_.temperature, in_.p_min, in_.seed, in_.n_blocks), sh_.conf, rows,
                            in_.hidden.type, conf_w_digest_);
}

// The confidence head before step k: the block stops when c_k < p_min.
bool CpuDSpark::stops(int32_t b, int32_t k) {
  if (!sh_.conf) return false;
  const int64_t row = map_row(sh_.row_map, (int64_t)cell(b, k));
  float* h = floats(c_.h) + (size_t)b * sh_.n_embd;
  widen_row(static_cast<const uint8_t*>(in_.hidden.data) + (size_t)row * in_.hidden.nb[1], in_.hidden.type, sh_.n_embd, h);
  const float conf = markov_confidence(d_.conf_w.data, d_.conf_w.type, h, sh_.n_embd, e_[b], sh_.R, d_.conf_bias);
  if (out_.confidence) out_.confidence[cell(b, k)] = conf;
  return in_.p_min > 0.0f && conf < in_.p_min;
}

void CpuDSpark::local_pass(int32_t k) {
  n_pass_ = 0;
  for (int32_t b = 0; b < in_.n_blocks; ++b) {
    if (state_[b].drafting && stops(b, k)) state_[b].drafting = 0;
    if (!state_[b].drafting) continue;
    const int64_t row = map_row(sh_.row_map, (int64_t)cell(b, k));
    block_[n_pass_] = b;
    z_[n_pass_] = static_cast<const uint8_t*>(in_.logits.data) + (size_t)row * in_.logits.nb[1];
    e_pass_[n_pass_] = e_[b];
    l_[n_pass_] = stored_l(b, k);
    ++n_pass_;
  }
  const bool sampling = in_.temperature > 0.0f;
  const MarkovPass p{static_cast<const uint8_t*>(d_.w2.data), d_.w2.nb[1], d_.w2.type, sh_.R, padded8(sh_.R),
                     static_cast<const float*>(d_.w2_scale.data), sh_.scale_rows, sh_.transform, in_.logits.type,
                     sh_.v_begin, sampling, in_.temperature, in_.seed, (uint32_t)k, n_pass_, block_.data(), z_.data(),
                     e_pass_.data(), sampling ? l_.data() : nullptr};
  const int64_t vs = sh_.v_end - sh_.v_begin;
  auto rows = [&](int32_t item, int32_t) {
    MarkovBest* best = &best_[(size_t)item * d_.config.max_blocks];
    for (int32_t i = 0; i < n_pass_; ++i) best[i] = MarkovBest{0, -1, 0.0f, -INFINITY};
    const int64_t r0 = item * kRowsPerItem, r1 = r0 + kRowsPerItem < vs ? r0 + kRowsPerItem : vs;
    markov_rows(p, r0, r1, isa_, best);
  };
  if (n_pass_ > 0) pool_.run(n_items_, rows);
  // Keys and maxima combine exactly, so the items' order does not matter.
  for (int32_t i = 0; i < n_pass_; ++i) {
    MarkovBest m{0, -1, 0.0f, -INFINITY};
    for (int32_t item = 0; item < n_items_; ++item) {
      const MarkovBest& x = best_[(size_t)item * d_.config.max_blocks + i];
      if (x.id >= 0 && (m.id < 0 || x.key > m.key)) m.key = x.key, m.id = x.id, m.logit = x.logit;
      if (x.row_max > m.row_max) m.row_max = x.row_max;
    }
    pass_best_[i] = m;
  }
}

// This shard's part of step k's normaliser for the blocks that emitted it.
void CpuDSpark::norm_pass(int32_t k) {
  const int64_t vs = sh_.v_end - sh_.v_begin;
  const size_t maxb = (size_t)d_.config.max_blocks;
  auto rows = [&](int32_t item, int32_t) {
    const int64_t r0 = item * kRowsPerItem, r1 = r0 + kRowsPerItem < vs ? r0 + kRowsPerItem : vs;
    for (int32_t b = 0; b < in_.n_blocks; ++b) {
      NormSum& s = norm_[(size_t)item * maxb + b];
      s = NormSum{0, 0};
      if (state_[b].emitted) norm_rows(stored_l(b, k), r0, r1, state_[b].last_max, in_.temperature, &s);
    }
  };
  pool_.run(n_items_, rows);
  for (int32_t b = 0; b < in_.n_blocks; ++b) {
    last_norm_[b] = NormSum{0, 0};
    for (int32_t item = 0; item < n_items_; ++item) norm_add(&last_norm_[b], norm_[(size_t)item * maxb + b].lo,
                                                            norm_[(size_t)item * maxb + b].hi);
  }
}

// Exchange x's records: the anchors' W1 rows (x = 0), step x's best (1..N), and the part of
// step x - 1's normaliser that this shard holds.
void CpuDSpark::write_records(int32_t x) {
  const DSparkLayout lay = layout();
  uint8_t* send = base_ + c_.send;
  for (int32_t b = 0; b < in_.n_blocks; ++b) {
    DSparkRecord* r = dspark_record(lay, send, b);
    *r = empty_dspark_record();
    r->anchor = in_.anchors[b];
    r->inputs = inputs_[b];
    if (x >= 2 && state_[b].emitted) r->norm_lo = last_norm_[b].lo, r->norm_hi = last_norm_[b].hi;
    if (x == 0 && owns_row(in_.anchors[b])) {
      r->flags = kRecordAnchorRow;
      std::memcpy(dspark_record_row(lay, send, b), w1_row(in_.anchors[b] - sh_.v_begin), lay.row_bytes);
    }
  }
  for (int32_t i = 0; x >= 1 && x <= sh_.N && i < n_pass_; ++i) {
    const MarkovBest& m = pass_best_[i];
    DSparkRecord* r = dspark_record(lay, send, block_[i]);
    const int32_t id = (int32_t)(sh_.v_begin + m.id);
    r->key = cand_from_key(m.key).z;  // the same key again: -0 and NaN payloads do not rank
    r->draft_id = id;
    r->target_id = sh_.d2t ? d_.d2t[m.id] : id;
    r->logit = m.logit;
    r->row_max = m.row_max;
    if (lay.row_bytes) std::memcpy(dspark_record_row(lay, send, block_[i]), w1_row(m.id), lay.row_bytes);
  }
}

Status CpuDSpark::send(int32_t x, void*) {
  if (x >= 1 && x <= sh_.N) local_pass(x);
  if (x >= 2 && in_.temperature > 0.0f) norm_pass(x - 1);
  write_records(x);
  return Status::success();
}

Status CpuDSpark::receive(int32_t x, void*) {
  const DSparkLayout lay = layout();
  const uint8_t* recv = base_ + c_.recv;
  // The first exchange shows every rank what the others were given: a rank given other anchors,
  // hidden rows, temperature, p_min or seed would draft another chain, so every rank fails.
  for (int32_t b = 0; x == sh_.first_exchange() && b < in_.n_blocks; ++b)
    DFSEL_TRY(ranks_given_different_inputs(lay, recv, sh_.n_ranks, b));
  for (int32_t b = 0; b < in_.n_blocks; ++b) {
    const DSparkMerged m = merge_dspark_records(lay, recv, sh_.n_ranks, b);
    if (x == 0) {
      if (m.anchor_rank < 0)
        return fail(DFSEL_INTERNAL_ERROR, "no rank holds the W1 row of inputs.anchors[%d] = %d", b, in_.anchors[b]);
      set_e(b, dspark_record_row(lay, (void*)(recv + (size_t)m.anchor_rank * lay.bytes), b));
      continue;
    }
    const uint8_t* from = take_dspark_exchange(m, lay, recv, b, x, sh_.N, in_.temperature, &state_[b], &out_);
    if (!from) continue;
    const DSparkRecord& w = *dspark_record(lay, (void*)from, b);
    // Every rank merged the same winner, so every rank of a group fails here alike (none waits).
    if (!dspark_target_in_range(w.target_id, sh_.n_target_vocab))
      return bad_d2t_entry(w.draft_id, w.target_id, b, x, sh_.n_target_vocab);
    set_e(b, lay.row_bytes ? dspark_record_row(lay, (void*)from, b) : w1_row(w.target_id));
  }
  return Status::success();
}

}  // namespace

size_t cpu_dspark_workspace_bytes(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape) {
  return carve(desc, shape).total;
}

Status make_cpu_dspark_backend(const dfsel_dspark_plan_desc& desc, const DSparkShape& shape,
                               std::unique_ptr<DSparkBackend>* out) {
  const CpuSetup setup{desc.workspace,        desc.workspace_bytes, cpu_dspark_workspace_bytes(desc, shape),
                       desc.config.max_blocks, desc.shard.n_ranks,   shape.n_embd,
                       desc.n_threads};
  DFSEL_TRY(check_cpu_setup(setup));
  return build_cpu_backend(setup, "", out, [&] { return new CpuDSpark(desc, shape); });
}

}  // namespace dfsel
