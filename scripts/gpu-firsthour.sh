#!/usr/bin/env bash
# On a CUDA machine: what the first-hour changes need checked on a GPU. Builds with CUDA,
# runs the GPU tests (the aliasing checks of a run now apply to device buffers too), the CPU
# and dfsel-command tests, and the command itself on the CUDA backend, hidden from the GPUs
# (the library's "no CUDA device" sentence) and on one and two GPUs. Exits non-zero on the
# first failure.
#   scripts/gpu-firsthour.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build-gpu}
export NCCL_NVLS_ENABLE=0
export DFSEL_REQUIRE_GPU=1  # a CUDA machine: a GPU test that finds no working GPU fails, not skips
bash scripts/build.sh "$dir"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)"
"$dir/tools/dfsel" --backend cuda --steps 3
"$dir/tools/dfsel" --backend cuda --steps 3 --p-min 0.5 --blocks 4
if [ "$(nvidia-smi -L | wc -l)" -ge 2 ]; then "$dir/tools/dfsel" --backend cuda --shards 2 --steps 3; fi
out=$(CUDA_VISIBLE_DEVICES='' "$dir/tools/dfsel" --backend cuda --steps 1 2>&1) && { echo "dfsel ran without a GPU?"; exit 1; }
echo "$out"
grep -q "no CUDA device" <<<"$out"
"$dir/bench/dfsel_cpu_bench" --benchmark_filter='CpuStep/threads:0/blocks:1/' --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true
echo "gpu-firsthour: all passed"
