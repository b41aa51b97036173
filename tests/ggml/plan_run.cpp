#include "plan_run.h"

#include <cstring>

namespace dfsel::test {

dfsel_config make_config(int64_t V, int64_t E, int R, int K, int block, int max_blocks, float scale,
                         float softcap) {
  dfsel_config c{};
  c.n_vocab = V;
  c.n_embd = E;
  c.codebook_rank = R;
  c.top_k = K;
  c.block_size = block;
  c.logit_scale = scale;
  c.softcap = softcap;
  c.max_blocks = max_blocks;
  return c;
}

PlanOut run_plan(const PlanIo& io) {
  PlanOut r;
  dfsel_plan_desc d{};
  d.config = io.cfg;
  d.shard = dfsel_shard{0, 1, 0, io.cfg.n_vocab};
  d.backend = DFSEL_BACKEND_CPU;
  d.e_prev = io.e_prev;
  d.e_next = io.e_next;
  d.w_h = io.w_h;
  d.n_threads = io.n_threads;
  char msg[512] = "";
  dfsel_plan* plan = nullptr;
  r.status = dfsel_plan_create(&d, &plan, msg, sizeof msg);
  if (r.status != DFSEL_SUCCESS) {
    r.error = msg;
    return r;
  }
  const size_t K = (size_t)io.cfg.top_k, L = (size_t)io.cfg.block_size - 1;
  const size_t nd = (size_t)io.n_blocks * L;
  r.cand_ids.assign(nd * K, -1);
  r.unary.resize(nd * K);
  r.scores.resize(nd * K * K);
  r.packed.resize((size_t)io.n_blocks * io.cfg.block_size * io.cfg.n_embd);
  std::memset(r.unary.data(), 0xff, r.unary.size() * 4);
  std::memset(r.scores.data(), 0xff, r.scores.size() * 4);
  std::memset(r.packed.data(), 0xff, r.packed.size() * 4);
  std::vector<int32_t> path(nd, -7), n_emitted((size_t)io.n_blocks, -7);
  dfsel_inputs in{};
  in.logits = io.logits;
  in.hidden = io.hidden;
  in.anchors = io.anchors;
  in.n_blocks = io.n_blocks;
  dfsel_outputs out{};
  out.cand_ids = r.cand_ids.data();
  out.unary = r.unary.data();
  out.scores = r.scores.data();
  out.path = path.data();
  out.n_emitted = n_emitted.data();
  out.packed = r.packed.data();
  r.status = dfsel_plan_run(plan, &in, &out, nullptr);
  if (r.status != DFSEL_SUCCESS) r.error = dfsel_plan_last_error(plan);
  dfsel_plan_destroy(plan);
  return r;
}

}  // namespace dfsel::test
