#!/usr/bin/env bash
# The Python package on a CUDA machine: builds libdfsel.so with the CUDA backend (sm_90),
# installs ./python into a temporary folder with pip, runs tests/python there (the GPU tests
# must run: DFSEL_REQUIRE_GPU=1 fails them instead of skipping when torch or a GPU is missing;
# the two-GPU test still skips on one GPU), then, when Google Benchmark is installed, the C++
# SelectorStep figure and bench/python/bench_step.py (the same shape and inputs) beside it.
# Logs and JSON go to $OUT when set, else to BUILD/results. Exits non-zero on any failure.
#   python/run-gpu-tests.sh [BUILD_DIR]        (default build-py-gpu)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath -m "${1:-$root/build-py-gpu}")  # absolute: the tests run from other folders
out=${OUT:-$build/results}
mkdir -p "$out"
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
py=${PYTHON:-python3}
jobs=$(nproc)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dfsel-py.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
status=0
step() {  # step NAME COMMAND...: runs it, logs to $out/NAME.log, records a failure
  local name=$1
  shift
  echo "run-gpu-tests: --- $name"
  local t0 rc=0
  t0=$(date +%s)
  "$@" >"$out/$name.log" 2>&1 || rc=$?
  tail -n 40 "$out/$name.log"
  echo "run-gpu-tests: $name exit $rc, $(($(date +%s) - t0)) s"
  if [ "$rc" -ne 0 ]; then status=1; fi
  return "$rc"
}

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv >"$out/gpus.txt" 2>&1 || true
"$py" -c "import sys, torch; print(sys.version); print('torch', torch.__version__, torch.version.cuda)" \
  >"$out/python.txt" 2>&1 || true

gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
step configure cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DDFSEL_SHARED=ON -DDFSEL_BUILD_TESTS=OFF -DDFSEL_BUILD_TOOLS=OFF \
  -DDFSEL_BUILD_EXAMPLES=OFF -DDFSEL_BUILD_BENCH=ON || exit 1
step build cmake --build "$build" -j"$jobs" --target dfsel_shared || exit 1
lib=$build/host/libdfsel.so
# The library just built is bundled (DFSEL_LIBRARY), rather than built again by the package.
step install env DFSEL_LIBRARY="$lib" "$py" -m pip install --no-deps --no-index --target "$tmp/site" "$root/python" || exit 1

export DFSEL_LIBRARY=$lib DFSEL_TEST_PACKAGE_DIR=$tmp/site DFSEL_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0
pytest_rc=0
step pytest "$py" -m pytest -v -rs -p no:cacheprovider --junitxml="$out/pytest.xml" "$root/tests/python" ||
  pytest_rc=$?
if [ "$pytest_rc" -eq 5 ]; then echo "run-gpu-tests: pytest collected no test"; fi
PYTHONPATH=$tmp/site step example_1gpu "$py" "$root/examples/python_engine_step.py" --gpus 1 || true
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
if [ "${n_gpus:-0}" -ge 2 ]; then
  PYTHONPATH=$tmp/site step example_2gpu "$py" "$root/examples/python_engine_step.py" --gpus 2 || true
fi
# The C++ SelectorStep of the same shape and inputs first (five repetitions: their spread is
# the noise), one replay and ten back to back per timed interval, then the Python benchmark,
# which times both ways too and prints the C++ figures beside its own.
cpp_json=()
if [ -f "$build/bench/CMakeFiles/dfsel_bench.dir/flags.make" ] || grep -qs 'dfsel_bench' "$build/build.ninja"; then
  cpp_args=(--benchmark_filter='^SelectorStep/tokens:16/vocab:248320/' --benchmark_min_time=0.05s
            --benchmark_repetitions=5 --benchmark_out_format=json)
  if step build_bench cmake --build "$build" -j"$jobs" --target dfsel_bench &&
    step bench_cpp "$build/bench/dfsel_bench" "${cpp_args[@]}" --benchmark_out="$out/bench_cpp.json" &&
    DFSEL_BENCH_REPLAYS=10 step bench_cpp_steady "$build/bench/dfsel_bench" "${cpp_args[@]}" \
      --benchmark_out="$out/bench_cpp_steady.json"; then
    cpp_json=(--cpp-json "$out/bench_cpp.json" --cpp-json-steady "$out/bench_cpp_steady.json")
  fi
else
  echo "run-gpu-tests: Google Benchmark not found; no C++ SelectorStep figure beside the Python one" |
    tee "$out/bench_cpp.log"
fi
PYTHONPATH=$tmp/site step bench_python "$py" "$root/bench/python/bench_step.py" --json "$out/bench_python.json" \
  "${cpp_json[@]}" || true

echo "run-gpu-tests: results in $out; $([ $status -eq 0 ] && echo passed || echo FAILED)"
exit $status
