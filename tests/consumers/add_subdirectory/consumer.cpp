// Runs one selector step on the CPU backend for a tiny problem and prints the drafted path.
// Exits non-zero on any failure.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <vector>

#include <dfsel/dfsel.h>

namespace {

constexpr int64_t kVocab = 100, kEmbd = 40;
constexpr int kRank = 16, kTopK = 4, kBlock = 5, kBlocks = 1, kL = kBlock - 1;

struct PlanDeleter {
  void operator()(dfsel_plan* p) const { dfsel_plan_destroy(p); }
};

dfsel_tensor matrix(const std::vector<float>& v, int64_t ne0, int64_t ne1) {
  return dfsel_tensor_2d(v.data(), DFSEL_TYPE_F32, ne0, ne1, size_t(ne0) * sizeof(float));
}

std::vector<float> values(size_t n, uint32_t seed) {
  std::vector<float> v(n);
  for (float& x : v) {
    seed = seed * 1664525u + 1013904223u;
    x = float(seed >> 8) / float(1u << 23) - 1.0f;
  }
  return v;
}

}  // namespace

int main() {
  const auto e_prev = values(size_t(kVocab) * kRank, 1), e_next = values(size_t(kVocab) * kRank, 2);
  const auto w_h = values(size_t(kEmbd) * kRank, 3);
  const auto logits = values(size_t(kVocab) * kBlock * kBlocks, 4);
  const auto hidden = values(size_t(kEmbd) * kBlock * kBlocks, 5);

  dfsel_plan_desc desc{};
  desc.config = dfsel_config{kVocab, kEmbd, kRank, kTopK, kBlock, 1.0f, 0.0f, kBlocks};
  desc.shard = dfsel_shard{0, 1, 0, kVocab};
  desc.backend = DFSEL_BACKEND_CPU;
  desc.e_prev = matrix(e_prev, kRank, kVocab);
  desc.e_next = matrix(e_next, kRank, kVocab);
  desc.w_h = matrix(w_h, kEmbd, kRank);
  char msg[256];
  dfsel_plan* raw = nullptr;
  if (dfsel_status s = dfsel_plan_create(&desc, &raw, msg, sizeof msg)) {
    std::fprintf(stderr, "dfsel_plan_create: %s: %s\n", dfsel_status_string(s), msg);
    return 1;
  }
  std::unique_ptr<dfsel_plan, PlanDeleter> plan(raw);

  const int32_t anchors[kBlocks] = {42};
  dfsel_inputs in{};
  in.logits = matrix(logits, kVocab, kBlock * kBlocks);
  in.hidden = matrix(hidden, kEmbd, kBlock * kBlocks);
  in.anchors = anchors;
  in.n_blocks = kBlocks;
  std::vector<int32_t> path(kBlocks * kL), n_emitted(kBlocks);
  dfsel_outputs out{};
  out.path = path.data();
  out.n_emitted = n_emitted.data();
  if (dfsel_status s = dfsel_plan_run(plan.get(), &in, &out, nullptr)) {
    std::fprintf(stderr, "dfsel_plan_run: %s: %s\n", dfsel_status_string(s),
                 dfsel_plan_last_error(plan.get()));
    return 1;
  }
  std::printf("drafted %d of %d:", n_emitted[0], kL);
  bool ok = n_emitted[0] >= 0 && n_emitted[0] <= kL;
  for (int p = 0; p < kL; ++p) {
    std::printf(" %d", path[size_t(p)]);
    ok = ok && (p < n_emitted[0] ? path[size_t(p)] >= 0 && path[size_t(p)] < kVocab : path[size_t(p)] == -1);
  }
  std::printf("\n");
  if (!ok) std::fprintf(stderr, "the drafted path is out of range\n");
  return ok ? 0 : 1;
}
