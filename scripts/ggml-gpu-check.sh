#!/usr/bin/env bash
# On a CUDA machine: builds ggml (CPU backend, from GGML_SOURCE, default ../shared/ggml) into a
# temporary prefix, dfsel with CUDA and dfsel::ggml against it, runs the ggml tests, then the
# split-mode example (examples/ggml_op: real ggml tensors in device memory) on one GPU and,
# when there are two or more, split over every GPU. Exits non-zero on any failure.
#   scripts/ggml-gpu-check.sh [BUILD_DIR]      (default build-ggml-gpu)
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-ggml-gpu}
src=${GGML_SOURCE:-../shared/ggml}
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
if [ ! -f "$src/CMakeLists.txt" ]; then
  echo "ggml-gpu-check: no ggml source at $src (set GGML_SOURCE)" >&2
  exit 1
fi
command -v nvcc >/dev/null || { echo "ggml-gpu-check: nvcc not found" >&2; exit 1; }
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-ggml-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT

echo "ggml-gpu-check: ggml from $src into $work/prefix"
cmake -S "$src" -B "$work/ggml-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_CUDA=OFF -DCMAKE_INSTALL_PREFIX="$work/prefix" >/dev/null
cmake --build "$work/ggml-build" -j"$(nproc)" >/dev/null
cmake --install "$work/ggml-build" >/dev/null

echo "ggml-gpu-check: dfsel with CUDA and dfsel::ggml in $dir"
cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_CUDA=ON -DDFSEL_GGML=ON \
  -DDFSEL_BUILD_BENCH=OFF -DDFSEL_BUILD_TOOLS=OFF -Dggml_DIR="$work/prefix/lib/cmake/ggml" >/dev/null
cmake --build "$dir" -j"$(nproc)" --target dfsel_ggml_tests ggml_op ggml_graph
ctest --test-dir "$dir" -L ggml --output-on-failure -j"$(nproc)"
test -x "$dir/examples/ggml_op" || { echo "ggml-gpu-check: examples/ggml_op was not built" >&2; exit 1; }

n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$n_gpus" -lt 1 ]; then
  echo "ggml-gpu-check: no GPU visible; ggml_op built but not run" >&2
  exit 1
fi
# The private prefix's libggml.so finds its backends (libggml-cpu.so) only on the loader path:
# an installed ggml carries no run path.
export LD_LIBRARY_PATH="$work/prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
echo "ggml-gpu-check: ggml_op on one GPU"
CUDA_VISIBLE_DEVICES=0 "$dir/examples/ggml_op" --vocab 248320 --blocks 2
if [ "$n_gpus" -ge 2 ]; then
  echo "ggml-gpu-check: ggml_op split over $n_gpus GPUs"
  NCCL_NVLS_ENABLE=0 "$dir/examples/ggml_op" --vocab 248320 --blocks 4
fi
echo "ggml-gpu-check: passed"
