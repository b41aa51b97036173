#!/usr/bin/env bash
# The vendorable top-K (kernels/topk/, docs/topk.md) needs nothing else of dfsel: its files are
# copied alone into an empty folder and compiled there, as another engine vendors them, under a
# namespace of the vendor's (DFSEL_TOPK_NAMESPACE):
#   - a translation unit that instantiates the kernel for float, __half and __nv_bfloat16 through
#     both writers and a writer of its own, with nvcc for sm_90, and for float alone for sm_80 (the
#     PDL instructions are sm_90's and compiled out below it), under ggml-cuda's own flags
#     (--use_fast_math -extended-lambda, every warning an error);
#   - topk_order.cuh in a plain C++ translation unit (g++, no CUDA), since host code shares it.
# Any include of a file outside the folder fails the compile. Exits non-zero on any failure; skips
# (exit 0, saying so) where nvcc is absent.
#   scripts/check-topk-alone.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-topk-alone.XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir "$work/vendored"
cp kernels/topk/*.cuh "$work/vendored/"
n=$(ls "$work/vendored" | wc -l)

cat >"$work/host_order.cpp" <<'EOF'
#define DFSEL_TOPK_NAMESPACE engine::topk
#include "vendored/topk_order.cuh"
int main() {
  // The order: larger value first, then the lower id; NaN below -inf; the f16 read exact.
  const bool ok = engine::topk::cand_key(1.0f, 7) > engine::topk::cand_key(1.0f, 8) &&
                  engine::topk::cand_key(-1e30f, 0) > engine::topk::cand_key(__builtin_nanf(""), 0) &&
                  engine::topk::f16_bits_to_float(0x0001) == 5.9604644775390625e-08f;
  return ok ? 0 : 1;
}
EOF
g++ -std=c++17 -Wall -Wextra -Werror -I"$work" "$work/host_order.cpp" -o "$work/host_order"
"$work/host_order"
echo "check-topk-alone: topk_order.cuh compiles and runs as plain C++"

if ! command -v nvcc >/dev/null; then
  echo "check-topk-alone: nvcc not found; the device layer was not compiled (skipped)"
  exit 0
fi
cat >"$work/instances.cu" <<'EOF'
#define DFSEL_TOPK_NAMESPACE engine::topk
#include "vendored/topk_device.cuh"

namespace tk = engine::topk;

// A writer of the engine's own: values only.
struct ValueWriter {
  float* out;
  __device__ void write(int32_t sel, int r, float z, int32_t) const { out[sel * 64 + r] = z; }
};

template <class T>
cudaError_t all_writers(const tk::Problem& p, const void* rows, void* out, const tk::Options& o, cudaStream_t s) {
  const tk::StridedRows in{rows, (size_t)p.n_cols * sizeof(T)};
  cudaError_t e = tk::batched_topk<T>(p, in, tk::IdWriter{static_cast<int32_t*>(out), (size_t)p.k}, o, s);
  if (e == cudaSuccess) e = tk::batched_topk<T>(p, in, tk::RecordWriter{static_cast<tk::Rec*>(out), (size_t)p.k}, o, s);
  if (e == cudaSuccess) e = tk::batched_topk<T>(p, in, ValueWriter{static_cast<float*>(out)}, o, s);
  return e;
}

cudaError_t every_instance(const tk::Problem& p, const void* rows, void* out, const tk::Options& o, cudaStream_t s) {
  cudaError_t e = all_writers<float>(p, rows, out, o, s);
#ifndef FLOAT_ONLY  // the sm_80 pass checks that the sm_90-only code compiles out: one type does
  if (e == cudaSuccess) e = all_writers<__half>(p, rows, out, o, s);
  if (e == cudaSuccess) e = all_writers<__nv_bfloat16>(p, rows, out, o, s);
#endif
  return e;
}

size_t sizes(const tk::Problem& p, const tk::Options& o) {
  return tk::scratch_bytes(p, 4, o) + tk::counter_bytes(o) + (size_t)tk::splits(p, 4, o) + tk::one_wave(p, 2, o);
}
EOF
for arch in 90 80; do
  only=()
  [ $arch = 80 ] && only=(-DFLOAT_ONLY)
  nvcc -std=c++17 -arch=sm_$arch --use_fast_math -extended-lambda -Werror all-warnings "${only[@]}" -I"$work" \
    -c "$work/instances.cu" -o "$work/instances_$arch.o"
  echo "check-topk-alone: the device layer compiles alone for sm_$arch ($n files, nothing else of dfsel)"
done
echo "check-topk-alone: passed"
