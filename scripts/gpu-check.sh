#!/usr/bin/env bash
# On any CUDA machine: configure and build, run the GPU and CPU tests, compute-sanitizer over
# the GPU tests, then the benchmarks; Google Benchmark JSON and logs go to the output folder
# and a short summary table is printed last. Exits non-zero when the build fails, any test
# fails, or any compute-sanitizer tool reports an error or does not finish in its time limit.
# The test and compute-sanitizer runs have DFSEL_REQUIRE_GPU=1: a GPU test that finds no working
# GPU (no device, cudaGetDeviceCount or the context failing) fails instead of skipping, so a
# machine whose GPU did not come up cannot pass; tests needing more GPUs than it has still skip.
#
#   scripts/gpu-check.sh [--out DIR] [--tag NAME] [--skip-build] [--skip-tests] [--skip-sanitizer]
#                        [--skip-bench] [--bench-filter REGEX] [--bench-min-time SECONDS]
#                        [--sanitizer-filter GTEST_FILTER] [--sanitizer-timeout SECONDS]
# --skip-build runs what build-gpu holds (built elsewhere, e.g. on a machine without a GPU).
# Each benchmark iteration costs about 1 ms of host time (graph launch and event sync), so the
# default minimum GPU time per case is short (0.02 s); the whole set still takes minutes.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:-bench/results}
tag=""
run_build=1 run_tests=1 run_san=1 run_bench=1
bench_filter="."
bench_min="0.02s"
# Every kernel at small shapes (the *SmallShapesForSanitizers tests: top-K, gate, records,
# lattice, the whole step), so that racecheck finishes in bounded time; and the groups whose
# ranks were given different anchors (each plan kind's flag path).
san_filter="*.SmallShapesForSanitizers:GpuLattice.AnchorOutOfRangeFlagsTheBlockAndEmitsNothing"
san_filter+=":GpuGroupInputs.DifferentAnchorsFailEveryRank/*:GpuDSparkGroupInputs.DifferentAnchorsFailEveryRank/*"
san_timeout=600
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;;
    --tag) tag=$2; shift ;;
    --skip-build) run_build=0 ;;
    --skip-tests) run_tests=0 ;;
    --skip-sanitizer) run_san=0 ;;
    --skip-bench) run_bench=0 ;;
    --bench-filter) bench_filter=$2; shift ;;
    --bench-min-time) bench_min=$2; shift ;;
    --sanitizer-filter) san_filter=$2; shift ;;
    --sanitizer-timeout) san_timeout=$2; shift ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
n_gpus=$(nvidia-smi -L 2>/dev/null | wc -l)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr -d ' ' | tr 'A-Z' 'a-z' | sed 's/nvidia//')
[ -n "$tag" ] || tag="$([ "$n_gpus" -gt 1 ] && echo "${n_gpus}x")${gpu:-gpu}-$(date +%Y-%m-%d)"
summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }
bad() { failed=1; note "FAILED: $1"; }

t0=$(date +%s)
if [ $run_build = 0 ]; then
  note "build skipped: build-gpu as it is"
elif ! scripts/build.sh build-gpu >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; note "build FAILED"; printf '%s\n' "${summary[@]}"; exit 1
else
  note "build ok in $(( $(date +%s) - t0 )) s"
fi
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$out/gpu.txt" 2>&1

# The tests and compute-sanitizer's runs of them: no working GPU fails a GPU test (header).
export DFSEL_REQUIRE_GPU=1
if [ $run_tests = 1 ]; then
  ./build-gpu/tests/dfsel_gpu_tests --gtest_output=xml:"$out/gpu-tests.xml" >"$out/gpu-tests.log" 2>&1
  rc=$?
  note "gpu tests rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/gpu-tests.log" | tr '\n' ' ')"
  [ $rc = 0 ] || { grep -E -A2 "Failure$|FAILED|error" "$out/gpu-tests.log" | head -30; bad "gpu tests"; }
  ./build-gpu/tests/dfsel_tests >"$out/cpu-tests.log" 2>&1
  rc=$?
  note "cpu tests rc=$rc: $(grep -E '^\[  (PASSED|FAILED) ' "$out/cpu-tests.log" | tr '\n' ' ')"
  [ $rc = 0 ] || bad "cpu tests"
fi

if [ $run_san = 1 ]; then
  if ! command -v compute-sanitizer >/dev/null; then
    bad "compute-sanitizer not found"
  else
    # synccheck reports divergent barriers, and the launch then fails, in kernels that have
    # none when they run in clusters above the portable 8 in more than one wave (seen with
    # compute-sanitizer 2025.3.1 on an H200). dfsel_cluster_probe is such a kernel: where synccheck
    # fails it at 16 and passes it at 8, synccheck's run of the tests caps the library's
    # clusters at 8 (DFSEL_MAX_CLUSTER; the kernels are the same code at every cluster size,
    # and the other tools run them uncapped); where it fails both, synccheck fails.
    sync_env=()
    probe() {
      compute-sanitizer --tool synccheck --error-exitcode 99 ./build-gpu/tests/dfsel_cluster_probe "$1" \
        >"$out/synccheck-probe-$1.log" 2>&1
    }
    probe 16; rc16=$?
    if [ $rc16 != 0 ] && [ $rc16 != 3 ]; then
      probe 8; rc8=$?
      if [ $rc8 = 0 ]; then
        sync_env=(DFSEL_MAX_CLUSTER=8)
        note "synccheck cannot follow clusters of 16 (dfsel_cluster_probe 16 rc=$rc16, 8 rc=0): its run has DFSEL_MAX_CLUSTER=8"
      else
        bad "synccheck fails dfsel_cluster_probe at clusters of 8 (rc=$rc8): $out/synccheck-probe-8.log"
      fi
    fi
    for tool in memcheck racecheck synccheck initcheck; do
      t1=$(date +%s)
      env_tool=()
      [ $tool = synccheck ] && env_tool=("${sync_env[@]}")
      env "${env_tool[@]}" timeout "$san_timeout" compute-sanitizer --tool $tool --error-exitcode 99 \
        ./build-gpu/tests/dfsel_gpu_tests --gtest_filter="$san_filter" >"$out/sanitizer-$tool.log" 2>&1
      rc=$?
      note "compute-sanitizer $tool rc=$rc in $(( $(date +%s) - t1 )) s: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/sanitizer-$tool.log" | tr '\n' ' ')"
      # A run that stopped early (time limit, crash) or found nothing to run has not passed.
      if [ $rc = 124 ]; then bad "compute-sanitizer $tool did not finish in $san_timeout s"
      elif [ $rc != 0 ]; then bad "compute-sanitizer $tool"
      elif ! grep -q '^\[  PASSED  \] [1-9]' "$out/sanitizer-$tool.log"; then bad "compute-sanitizer $tool ran no test"
      fi
    done
  fi
fi

if [ $run_bench = 1 ] && [ -x build-gpu/bench/dfsel_bench ]; then
  ./build-gpu/bench/dfsel_bench --benchmark_filter="$bench_filter" --benchmark_min_time="$bench_min" \
    --benchmark_out="$out/$tag.json" \
    --benchmark_out_format=json --benchmark_counters_tabular=true >"$out/bench.log" 2>&1
  rc=$?
  note "bench rc=$rc"
  [ $rc = 0 ] || bad "benchmarks"
  python3 bench/summarize.py "$out/$tag.json" --command "scripts/gpu-check.sh $*" >"$out/$tag.md" && cat "$out/$tag.md"
fi
echo
printf '%s\n' "${summary[@]}"
exit $failed
