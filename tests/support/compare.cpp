#include "compare.h"

#include <cmath>
#include <sstream>

#include "kernels/common/philox.cuh"

namespace dfsel::test {

Oracle as_oracle(const Result& cpu) {
  Oracle o;
  o.cand_ids = cpu.cand_ids;
  o.unary.assign(cpu.unary.begin(), cpu.unary.end());
  o.scores.assign(cpu.scores.begin(), cpu.scores.end());
  return o;
}

std::string compare_greedy(const Case& c, const Result& cpu, const Result& gpu, float p_min, double tol) {
  return compare_with_oracle(c, as_oracle(cpu), gpu, p_min, tol);
}

std::string compare_sampled(const Case& c, const Result& cpu, const Result& gpu, float p_min, uint64_t seed, double tol) {
  const std::string lattice = compare_lattice(c, as_oracle(cpu), gpu, tol);
  if (!lattice.empty()) return lattice;
  const int L = c.block - 1, K = c.K;
  std::ostringstream err;
  for (int b = 0; b < c.blocks; ++b) {
    bool skipped = false;
    for (int p = 1; p <= L; ++p) {
      const size_t d = (size_t)b * L + p - 1;
      if (cpu.path[d] < 0 && gpu.path[d] < 0) break;
      for (int j = 0; j < K; ++j)
        if (std::fabs(cpu.q[d * K + j] - gpu.q[d * K + j]) > tol) {
          err << "q[" << d << "][" << j << "] = " << gpu.q[d * K + j] << ", CPU " << cpu.q[d * K + j];
          return err.str();
        }
      const float u = philox_uniform(seed, (uint32_t)b, (uint32_t)p);
      float cum = 0;
      bool near = false;
      for (int j = 0; j < K; ++j) {
        cum += cpu.q[d * K + j];
        near |= std::fabs(cum - u) <= tol;
      }
      if (near) {
        skipped = true;
        break;
      }
      if (gpu.path[d] != cpu.path[d]) {
        err << "block " << b << " position " << p << ": drew " << gpu.path[d] << ", CPU " << cpu.path[d];
        return err.str();
      }
    }
    if (!skipped && p_min == 0.0f && gpu.n_emitted[b] != cpu.n_emitted[b]) {
      err << "block " << b << ": n_emitted " << gpu.n_emitted[b] << ", CPU " << cpu.n_emitted[b];
      return err.str();
    }
  }
  return "";
}

}  // namespace dfsel::test
