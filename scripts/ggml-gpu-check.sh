#!/usr/bin/env bash
# On a CUDA machine: dfsel on ggml-cuda (docs/ggml.md). Builds ggml with ggml-cuda (from
# GGML_SOURCE, default ../shared/ggml) into a prefix, or takes one already built (--prefix), then
# dfsel with CUDA and dfsel::ggml against it, and runs:
#   - the ggml tests on ggml's CPU backend (label ggml);
#   - dfsel_ggml_cuda_tests: dfsel between graph computes against llama.cpp's in-graph selector
#     computed by ggml-cuda (every codebook type, 1 to 16 blocks, softcap, p_min), the route's
#     refusals, and the meta backend over two ggml-cuda devices (GGML_CUDA_DEVICES=2: virtual
#     devices on one GPU) computing a vocabulary-split lm_head and aborting at ggml_top_k;
#   - compute-sanitizer memcheck over the route's tests and one equality case (--skip-sanitizer);
#   - the split-mode example (examples/ggml_op) on one GPU and, with two or more, over all;
#   - with --bench, dfsel_ggml_bench: dfsel beside the in-graph selector on ggml-cuda tensors,
#     JSON into the output folder (--out, default $OUT or bench/results);
#   - ggml-cuda's TOP_K with dfsel's top-K patched in (scripts/ggml-topk-gpu-check.sh: every patch
#     of integrations/ggml applied to a copy of the source, test-backend-ops' TOP_K cases, under
#     memcheck too unless --skip-sanitizer, the in-graph selector on it; with --bench the perf cases
#     and InGraphSelector on both builds); --skip-topk leaves it out.
# Exits non-zero on any failure, and when no GPU is visible.
#   scripts/ggml-gpu-check.sh [--build DIR] [--prefix GGML_PREFIX] [--out DIR] [--bench] [--skip-build]
#                             [--skip-sanitizer] [--skip-topk] [--bench-filter REGEX] [--tag NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-ggml-gpu
prefix=""
out=${OUT:-bench/results}
bench=0 build=1 san=1 topk=1
bench_filter="."
tag=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) dir=$2; shift ;;
    --prefix) prefix=$2; shift ;;
    --out) out=$2; shift ;;
    --bench) bench=1 ;;
    --skip-build) build=0 ;;
    --skip-sanitizer) san=0 ;;
    --skip-topk) topk=0 ;;
    --bench-filter) bench_filter=$2; shift ;;
    --tag) tag=$2; shift ;;
    *) echo "ggml-gpu-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
src=${GGML_SOURCE:-../shared/ggml}
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
command -v nvcc >/dev/null || { echo "ggml-gpu-check: nvcc not found" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
work=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-ggml-gpu.XXXXXX")
trap 'rm -rf "$work"' EXIT

if [ -z "$prefix" ]; then
  [ -f "$src/CMakeLists.txt" ] || { echo "ggml-gpu-check: no ggml source at $src (set GGML_SOURCE)" >&2; exit 1; }
  prefix=$work/prefix
  echo "ggml-gpu-check: ggml with ggml-cuda from $src into $prefix"
  cmake -S "$src" -B "$work/ggml-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
    -DGGML_BUILD_TESTS=OFF -DGGML_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_NCCL=OFF -DCMAKE_INSTALL_PREFIX="$prefix" >/dev/null
  cmake --build "$work/ggml-build" -j"$(nproc)" >/dev/null
  cmake --install "$work/ggml-build" >/dev/null
fi
# An installed ggml carries no run path: its libraries (and the backends libggml.so loads) are
# found through the loader path.
export LD_LIBRARY_PATH="$prefix/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

if [ $build = 1 ]; then
  echo "ggml-gpu-check: dfsel with CUDA and dfsel::ggml (ggml-cuda) in $dir"
  cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_CUDA=ON -DDFSEL_GGML=ON \
    -DDFSEL_BUILD_TOOLS=OFF -Dggml_DIR="$prefix/lib/cmake/ggml" >/dev/null
  cmake --build "$dir" -j"$(nproc)" --target dfsel_ggml_tests dfsel_ggml_cuda_tests dfsel_ggml_bench ggml_op ggml_graph ggml_cuda_step
fi
for t in tests/ggml/dfsel_ggml_tests tests/ggml_cuda/dfsel_ggml_cuda_tests bench/dfsel_ggml_bench examples/ggml_op examples/ggml_cuda_step; do
  test -x "$dir/$t" || { echo "ggml-gpu-check: $dir/$t was not built (is ggml built with ggml-cuda?)" >&2; exit 1; }
done
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "$n_gpus" -lt 1 ]; then
  echo "ggml-gpu-check: no GPU visible" >&2
  exit 1
fi
export DFSEL_REQUIRE_GPU=1  # a GPU test that finds no working GPU fails here instead of skipping

# run_tests NAME BINARY [ARGS]: the binary's log into the output folder, its summary and figures
# printed; a failing binary fails the check.
run_tests() {
  local rc=0
  "${@:2}" >"$out/$1.log" 2>&1 || rc=$?
  grep -E '^[a-z0-9_]+: |^\[  (PASSED|FAILED|  SKIPPED) ' "$out/$1.log" || true
  if [ $rc -ne 0 ]; then
    tail -40 "$out/$1.log"
    echo "ggml-gpu-check: $1 failed (exit $rc)" >&2
    exit 1
  fi
}
echo "ggml-gpu-check: the ggml tests (ggml's CPU backend)"
run_tests ggml-tests "$dir/tests/ggml/dfsel_ggml_tests"
echo "ggml-gpu-check: dfsel on ggml-cuda"
run_tests ggml-cuda-tests "$dir/tests/ggml_cuda/dfsel_ggml_cuda_tests"
echo "ggml-gpu-check: the vocabulary split over two ggml-cuda devices (GGML_CUDA_DEVICES=2)"
GGML_CUDA_DEVICES=2 run_tests ggml-cuda-split "$dir/tests/ggml_cuda/dfsel_ggml_cuda_tests" --gtest_filter='GgmlCudaSplit.*'
if grep -q '^\[  SKIPPED \]' "$out/ggml-cuda-split.log" || ! grep -q '^\[  PASSED  \] 1 test' "$out/ggml-cuda-split.log"; then
  echo "ggml-gpu-check: the split test did not run on two devices" >&2
  exit 1
fi

if [ $san = 1 ]; then
  echo "ggml-gpu-check: compute-sanitizer memcheck over the route and one equality case"
  compute-sanitizer --tool memcheck --error-exitcode 1 --target-processes application-only \
    "$dir/tests/ggml_cuda/dfsel_ggml_cuda_tests" \
    --gtest_filter='GgmlCudaRoute.*:Shapes/GgmlCudaInGraph.DfselEqualsTheInGraphSelector/q8_0_4blocks' \
    >"$out/ggml-cuda-memcheck.log" 2>&1 || { tail -30 "$out/ggml-cuda-memcheck.log"; echo "ggml-gpu-check: memcheck failed" >&2; exit 1; }
  grep -E "ERROR SUMMARY|PASSED" "$out/ggml-cuda-memcheck.log"
fi

echo "ggml-gpu-check: ggml_cuda_step (one device, between graph computes)"
"$dir/examples/ggml_cuda_step" --blocks 2 --steps 2
echo "ggml-gpu-check: ggml_op on one GPU"
CUDA_VISIBLE_DEVICES=0 "$dir/examples/ggml_op" --vocab 248320 --blocks 2
if [ "$n_gpus" -ge 2 ]; then
  echo "ggml-gpu-check: ggml_op split over $n_gpus GPUs"
  "$dir/examples/ggml_op" --vocab 248320 --blocks 4
fi

if [ $bench = 1 ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -d ' ' | tr 'A-Z' 'a-z' | sed 's/nvidia//')
  [ -n "$tag" ] || tag="${gpu:-gpu}-$(date +%Y-%m-%d)-ggml-cuda"
  echo "ggml-gpu-check: dfsel_ggml_bench -> $out/$tag.json"
  "$dir/bench/dfsel_ggml_bench" --benchmark_filter="$bench_filter" --benchmark_min_time=0.2 \
    --benchmark_out="$out/$tag.json" --benchmark_out_format=json
fi
if [ $topk = 1 ]; then
  topk_stages=test,ingraph
  [ $san = 1 ] && topk_stages+=,memcheck
  [ $bench = 1 ] && topk_stages+=,perf,bench
  echo "ggml-gpu-check: ggml-cuda's TOP_K with dfsel's top-K ($topk_stages)"
  bash scripts/ggml-topk-gpu-check.sh --out "$out" --stages "$topk_stages"
fi
echo "ggml-gpu-check: passed"
