#!/usr/bin/env bash
# The DSpark chain on a CUDA machine: build dfsel_gpu_tests and dfsel_bench, run the DSpark GPU
# tests (GpuDSpark*: the GpuDSpark suite and its parametrised suites), compute-sanitizer's four
# tools over GpuDSpark.SmallShapesForSanitizers, the DSpark benchmarks (DSparkStep,
# DSparkW2ReadFloor) with Google Benchmark JSON out and, where torch is importable, the Python
# GPU test and bench/python/bench_dspark.py; a short table last. Exits non-zero when the build
# fails, a test fails, a sanitizer tool reports an error (or runs no test, or runs out of time),
# or a benchmark case reports an error; with --strict-targets also when a DSparkStep case is
# slower than its target_us.
# Tests and sanitizer runs have DFSEL_REQUIRE_GPU=1: a machine whose GPU does not work fails.
#
#   scripts/dspark-gpu-check.sh [--build DIR] [--out DIR] [--skip-python] [--strict-targets]
#                               [--bench-min-time SECONDS] [--sanitizer-timeout SECONDS]
set -uo pipefail
cd "$(dirname "$0")/.."
build=build-gpu
out=bench/results/dspark-$(date +%Y-%m-%d)
run_python=1 strict=0
bench_min="0.2s"
san_timeout=600
while [ $# -gt 0 ]; do
  case $1 in
    --build) build=$2; shift ;;
    --out) out=$2; shift ;;
    --skip-python) run_python=0 ;;
    --strict-targets) strict=1 ;;
    --bench-min-time) bench_min=$2; shift ;;
    --sanitizer-timeout) san_timeout=$2; shift ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
[ -d /usr/local/cuda/bin ] && export PATH=/usr/local/cuda/bin:$PATH
summary=()
failed=0
note() { summary+=("$1"); echo "== $1"; }
bad() { failed=1; note "FAILED: $1"; }

t0=$(date +%s)
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
if ! { cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release &&
       cmake --build "$build" -j"$(nproc)" --target dfsel_shared dfsel_gpu_tests dfsel_bench; } >"$out/build.log" 2>&1; then
  tail -40 "$out/build.log"; note "build FAILED"; printf '%s\n' "${summary[@]}"; exit 1
fi
note "build ok in $(( $(date +%s) - t0 )) s"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.mem --format=csv >"$out/gpu.txt" 2>&1

export DFSEL_REQUIRE_GPU=1
"./$build/tests/dfsel_gpu_tests" --gtest_filter='GpuDSpark*' --gtest_output=xml:"$out/gpu-dspark-tests.xml" \
  >"$out/gpu-dspark-tests.log" 2>&1
rc=$?
note "GpuDSpark tests rc=$rc: $(grep -E '^\[  (PASSED|FAILED|SKIPPED) ' "$out/gpu-dspark-tests.log" | tr '\n' ' ')"
[ $rc = 0 ] || { grep -E -B2 -A6 'Failure$' "$out/gpu-dspark-tests.log" | head -60; bad "GpuDSpark tests"; }

if ! command -v compute-sanitizer >/dev/null; then
  bad "compute-sanitizer not found"
else
  for tool in memcheck racecheck synccheck initcheck; do
    t1=$(date +%s)
    timeout "$san_timeout" compute-sanitizer --tool $tool --error-exitcode 99 "./$build/tests/dfsel_gpu_tests" \
      --gtest_filter=GpuDSpark.SmallShapesForSanitizers >"$out/sanitizer-$tool.log" 2>&1
    rc=$?
    note "compute-sanitizer $tool rc=$rc in $(( $(date +%s) - t1 )) s: $(grep -E 'ERROR SUMMARY|^\[  (PASSED|FAILED)' "$out/sanitizer-$tool.log" | tr '\n' ' ')"
    # A run that stopped early (time limit, crash) or found nothing to run has not passed.
    if [ $rc = 124 ]; then bad "compute-sanitizer $tool did not finish in $san_timeout s"
    elif [ $rc != 0 ]; then bad "compute-sanitizer $tool"
    elif ! grep -q '^\[  PASSED  \] [1-9]' "$out/sanitizer-$tool.log"; then bad "compute-sanitizer $tool ran no test"
    fi
  done
fi
unset DFSEL_REQUIRE_GPU

json="$out/dspark-bench.json"
"./$build/bench/dfsel_bench" --benchmark_filter='^DSpark(Step|W2ReadFloor)/' --benchmark_min_time="$bench_min" \
  --benchmark_out="$json" --benchmark_out_format=json --benchmark_counters_tabular=true >"$out/bench.log" 2>&1
rc=$?
note "DSpark benchmarks rc=$rc"
[ $rc = 0 ] || { tail -20 "$out/bench.log"; bad "DSpark benchmarks"; }
if [ -s "$json" ]; then
  # The table; exit 3 when a case reported an error, 4 when (strict) one is over its target.
  python3 - "$json" "$strict" <<'EOF'
import json, sys
rows = json.load(open(sys.argv[1]))["benchmarks"]
strict = sys.argv[2] == "1"
errors = over = 0
print("%-72s %9s %10s %9s  %s" % ("benchmark", "us", "x_w2_floor", "target", ""))
for b in rows:
    if b.get("error_occurred"):
        errors += 1
        print("%-72s  ERROR: %s" % (b["name"], b.get("error_message", "")))
        continue
    us, target = b.get("us", 0.0), b.get("target_us", 0.0)
    verdict = "" if not target else ("meets" if us <= target else "OVER")
    over += verdict == "OVER"
    print("%-72s %9.1f %10.2f %9s  %s" % (b["name"], us, b.get("x_w2_floor", 0.0), "%.0f" % target if target else "-",
                                           verdict))
sys.exit(3 if errors else 4 if strict and over else 0)
EOF
  rc=$?
  [ $rc = 3 ] && bad "a DSpark benchmark case reported an error (see the table)"
  [ $rc = 4 ] && bad "a DSparkStep case is over its target (--strict-targets)"
else
  bad "no benchmark JSON written"
fi

if [ $run_python = 1 ]; then
  if python3 -c "import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)" 2>/dev/null; then
    export DFSEL_LIBRARY="$PWD/$build/host/libdfsel.so" PYTHONPATH="$PWD/python${PYTHONPATH:+:$PYTHONPATH}"
    DFSEL_REQUIRE_GPU=1 python3 -m pytest -q tests/python/test_gpu_dspark.py >"$out/pytest-gpu-dspark.log" 2>&1
    rc=$?
    note "python GPU DSpark test rc=$rc: $(tail -1 "$out/pytest-gpu-dspark.log")"
    [ $rc = 0 ] || bad "python GPU DSpark test"
    python3 bench/python/bench_dspark.py --json "$out/bench_dspark_python.json" >"$out/bench_dspark_python.txt" 2>&1
    rc=$?
    cat "$out/bench_dspark_python.txt"
    note "bench_dspark.py rc=$rc"
    [ $rc = 0 ] || bad "bench_dspark.py"
  else
    note "python: torch with CUDA not importable, skipped"
  fi
fi
echo
printf '%s\n' "${summary[@]}"
exit $failed
