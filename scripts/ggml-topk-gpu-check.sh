#!/usr/bin/env bash
# On a CUDA machine: ggml-cuda's TOP_K with dfsel's top-K (integrations/ggml/0002-*.patch) beside
# ggml-cuda as it is, in one folder (--build DIR, default build-ggml-topk):
#   DIR/src          a copy of the ggml source (GGML_SOURCE, default ../shared/ggml; never changed)
#   DIR/unpatched    ggml with ggml-cuda built from it as it is, installed
#   DIR/patched      the same after every patch of integrations/ggml is applied to the copy (only
#                    what the patches touch is rebuilt), installed, with test-backend-ops
# The libraries are found through LD_LIBRARY_PATH alone (no run path), so one test-backend-ops and
# one dfsel_ggml_bench run on either ggml-cuda. Stages (--stages LIST, default test,perf,bench):
#   test      test-backend-ops test -o TOP_K -b CUDA0 on the patched ggml-cuda: every case passes,
#             and how many took dfsel's path (k <= 64, the patch's rule) is counted from the cases
#   memcheck  the same under compute-sanitizer memcheck (--memcheck-params REGEX: the cases, -p)
#   perf      test-backend-ops perf -o TOP_K -b CUDA0 on both ggml-cuda, every perf case (or those
#             --perf-params REGEX picks, -p); the logs and their table (bench/ggml/topk_perf_table.py)
#             into OUT
#   ingraph   dfsel_ggml_cuda_tests' in-graph selector cases (GgmlCudaInGraph.*) on the patched
#             ggml-cuda: its rows against dfsel's, with dfsel's top-K inside ggml_top_k
#   bench     dfsel_ggml_bench (built against the unpatched ggml) on both: InGraphSelector, and
#             dfsel between computes beside it (--bench-filter REGEX); JSON into OUT
# dfsel is built against the unpatched ggml in --dfsel-build DIR (default DIR/dfsel), with any
# --dfsel-targets "T1 T2" beside what the stages need. --skip-build reuses both folders as they are.
# OUT: --out DIR, default $OUT or bench/results. Exits non-zero on any failure, when a stage finds
# nothing to run, or when no GPU is visible.
#   scripts/ggml-topk-gpu-check.sh [--build DIR] [--out DIR] [--stages LIST] [--skip-build]
#                                  [--dfsel-build DIR] [--dfsel-targets LIST] [--perf-params REGEX]
#                                  [--memcheck-params REGEX] [--bench-filter REGEX] [--tag NAME]
set -euo pipefail
cd "$(dirname "$0")/.."
dir=build-ggml-topk
out=${OUT:-bench/results}
stages=test,perf,bench
build=1
memcheck_params="."
perf_params="."
dfsel_dir=""
dfsel_targets=""
bench_filter="^(InGraphSelector(/ggml:[^/]+)?|DfselGgml/(eager|graph))/blocks:(1|16)/"
tag=""
while [ $# -gt 0 ]; do
  case $1 in
    --build) dir=$2; shift ;;
    --out) out=$2; shift ;;
    --stages) stages=$2; shift ;;
    --skip-build) build=0 ;;
    --memcheck-params) memcheck_params=$2; shift ;;
    --perf-params) perf_params=$2; shift ;;
    --dfsel-build) dfsel_dir=$2; shift ;;
    --dfsel-targets) dfsel_targets=$2; shift ;;
    --bench-filter) bench_filter=$2; shift ;;
    --tag) tag=$2; shift ;;
    *) echo "ggml-topk-gpu-check: unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
has() { [[ ",$stages," == *",$1,"* ]]; }
src=${GGML_SOURCE:-../shared/ggml}
if [ -d /usr/local/cuda/bin ]; then export PATH=/usr/local/cuda/bin:$PATH; fi
command -v nvcc >/dev/null || { echo "ggml-topk-gpu-check: nvcc not found" >&2; exit 1; }
n_gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$n_gpus" -ge 1 ] || { echo "ggml-topk-gpu-check: no GPU visible" >&2; exit 1; }
export NCCL_NVLS_ENABLE=0
mkdir -p "$out"
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
dir=$(mkdir -p "$dir" && cd "$dir" && pwd)
[ -n "$dfsel_dir" ] || dfsel_dir=$dir/dfsel
jobs=$(nproc)

# build_log NAME COMMAND...: the command's output into OUT/NAME.log, its tail printed on failure.
build_log() {
  local name=$1
  shift
  "$@" >"$out/$name.log" 2>&1 || { tail -30 "$out/$name.log"; echo "ggml-topk-gpu-check: $name failed" >&2; return 1; }
}
if [ $build = 1 ]; then
  [ -f "$src/CMakeLists.txt" ] || { echo "ggml-topk-gpu-check: no ggml source at $src (set GGML_SOURCE)" >&2; exit 1; }
  rm -rf "$dir/src" "$dir/unpatched" "$dir/patched"
  cp -R "$src" "$dir/src"
  echo "ggml-topk-gpu-check: ggml with ggml-cuda as it is -> $dir/unpatched"
  build_log ggml-configure cmake -S "$dir/src" -B "$dir/ggml-build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DGGML_NATIVE=OFF -DGGML_BUILD_TESTS=ON -DGGML_BUILD_EXAMPLES=OFF -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DGGML_CUDA_FA=OFF -DGGML_CUDA_GRAPHS=ON -DGGML_CUDA_NCCL=OFF -DCMAKE_SKIP_BUILD_RPATH=ON \
    -DCMAKE_INSTALL_PREFIX="$dir/unpatched"
  build_log ggml-build-unpatched cmake --build "$dir/ggml-build" -j"$jobs" --target ggml
  build_log ggml-install-unpatched cmake --install "$dir/ggml-build"
  # dfsel against the unpatched ggml, beside the patched ggml's build.
  dfsel_pid=""
  if has bench || has ingraph || [ -n "$dfsel_targets" ]; then
    echo "ggml-topk-gpu-check: dfsel against the unpatched ggml in $dfsel_dir"
    (
      cmake -S . -B "$dfsel_dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DDFSEL_CUDA=ON -DDFSEL_GGML=ON \
        -DDFSEL_BUILD_TOOLS=OFF -DDFSEL_BUILD_EXAMPLES=OFF -Dggml_DIR="$dir/unpatched/lib/cmake/ggml" &&
        # shellcheck disable=SC2086
        cmake --build "$dfsel_dir" -j"$jobs" --target dfsel_ggml_bench dfsel_ggml_cuda_tests $dfsel_targets
    ) >"$out/dfsel-build.log" 2>&1 &
    dfsel_pid=$!
  fi
  # docs/ggml.md: topk-apply
  for p in integrations/ggml/*.patch; do
    echo "ggml-topk-gpu-check: applying $p"
    patch -p1 --forward --quiet -d "$dir/src" <"$p"
  done
  echo "ggml-topk-gpu-check: the patched ggml and test-backend-ops -> $dir/patched"
  build_log ggml-configure-patched cmake -S "$dir/src" -B "$dir/ggml-build" -DCMAKE_INSTALL_PREFIX="$dir/patched"
  build_log ggml-build-patched cmake --build "$dir/ggml-build" -j"$jobs" --target ggml test-backend-ops
  build_log ggml-install-patched cmake --install "$dir/ggml-build"
  # end docs/ggml.md: topk-apply
  if [ -n "$dfsel_pid" ] && ! wait "$dfsel_pid"; then
    tail -30 "$out/dfsel-build.log"
    echo "ggml-topk-gpu-check: the dfsel build failed" >&2
    exit 1
  fi
fi
tbo=$dir/ggml-build/bin/test-backend-ops
[ -x "$tbo" ] || { echo "ggml-topk-gpu-check: $tbo was not built" >&2; exit 1; }
# with LIB: the command runs on that prefix's ggml libraries alone.
with() {
  local lib=$1
  shift
  LD_LIBRARY_PATH="$dir/$lib/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$@"
}
with patched ldd "$tbo" | grep -E "libggml-cuda" | sed "s/^/ggml-topk-gpu-check: patched run: /" || true
with unpatched ldd "$tbo" | grep -E "libggml-cuda" | sed "s/^/ggml-topk-gpu-check: unpatched run: /" || true

# The cases a log lists, and how many of them the patch sends to dfsel's top-K (k <= 64).
dfsel_path() { grep -oE 'TOP_K\(type=f32,ne=\[[0-9,]+\],k=[0-9]+' "$1" | awk -F'k=' '$2 <= 64' | wc -l; }

if has test; then
  echo "ggml-topk-gpu-check: test-backend-ops test -o TOP_K -b CUDA0 (patched)"
  # docs/ggml.md: topk-test
  with patched "$tbo" test -o TOP_K -b CUDA0 >"$out/ggml-topk-test.log" 2>&1 || {
    grep -E "FAIL|failed" "$out/ggml-topk-test.log" | head -20; tail -5 "$out/ggml-topk-test.log"
    echo "ggml-topk-gpu-check: test-backend-ops TOP_K failed" >&2; exit 1; }
  # end docs/ggml.md: topk-test
  passed=$(grep -E "tests passed" "$out/ggml-topk-test.log" | tail -1)
  total=$(grep -cE '^  TOP_K\(.*OK' "$out/ggml-topk-test.log" || true)
  [ "$total" -gt 0 ] || { echo "ggml-topk-gpu-check: no TOP_K case ran" >&2; exit 1; }
  echo "ggml-topk-gpu-check: TOP_K: $passed; $total cases OK, $(dfsel_path "$out/ggml-topk-test.log") of them with k <= 64 (dfsel's path)"
fi

if has memcheck; then
  echo "ggml-topk-gpu-check: compute-sanitizer memcheck over test-backend-ops test -o TOP_K -p '$memcheck_params'"
  with patched compute-sanitizer --tool memcheck --error-exitcode 99 --target-processes application-only \
    "$tbo" test -o TOP_K -b CUDA0 -p "$memcheck_params" >"$out/ggml-topk-memcheck.log" 2>&1 || {
    tail -30 "$out/ggml-topk-memcheck.log"; echo "ggml-topk-gpu-check: memcheck failed" >&2; exit 1; }
  n=$(grep -cE '^  TOP_K\(.*OK' "$out/ggml-topk-memcheck.log" || true)
  [ "$n" -gt 0 ] || { echo "ggml-topk-gpu-check: memcheck ran no TOP_K case" >&2; exit 1; }
  echo "ggml-topk-gpu-check: memcheck: $(grep 'ERROR SUMMARY' "$out/ggml-topk-memcheck.log"); $n cases OK, $(dfsel_path "$out/ggml-topk-memcheck.log") with k <= 64"
fi

if has perf; then
  for lib in unpatched patched; do
    echo "ggml-topk-gpu-check: test-backend-ops perf -o TOP_K -b CUDA0 ($lib)"
    with $lib "$tbo" perf -o TOP_K -b CUDA0 -p "$perf_params" >"$out/ggml-topk-perf-$lib.log" 2>&1 || {
      tail -20 "$out/ggml-topk-perf-$lib.log"; echo "ggml-topk-gpu-check: perf ($lib) failed" >&2; exit 1; }
  done
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1)
  slug=$(echo "${gpu%%,*}" | tr -d ' ' | tr 'A-Z' 'a-z' | sed 's/nvidia//')
  python3 bench/ggml/topk_perf_table.py "$out/ggml-topk-perf-unpatched.log" "$out/ggml-topk-perf-patched.log" \
    --gpu "$gpu" --command "scripts/ggml-topk-gpu-check.sh --stages $stages" --json "$out/${slug:-gpu}-$(date +%Y-%m-%d)-ggml-topk-perf.json" \
    | tee "$out/${slug:-gpu}-$(date +%Y-%m-%d)-ggml-topk-perf.md"
fi

if has ingraph; then
  echo "ggml-topk-gpu-check: the in-graph selector's rows against dfsel's, on the patched ggml-cuda"
  with patched env DFSEL_REQUIRE_GPU=1 "$dfsel_dir/tests/ggml_cuda/dfsel_ggml_cuda_tests" \
    --gtest_filter='*GgmlCudaInGraph*' >"$out/ggml-topk-ingraph.log" 2>&1 || {
    grep -E -A3 "Failure|FAILED" "$out/ggml-topk-ingraph.log" | head -30; echo "ggml-topk-gpu-check: in-graph tests failed" >&2; exit 1; }
  grep -q '^\[  PASSED  \] [1-9]' "$out/ggml-topk-ingraph.log" || { echo "ggml-topk-gpu-check: no in-graph test ran" >&2; exit 1; }
  grep -E '^\[  (PASSED|FAILED|  SKIPPED) ' "$out/ggml-topk-ingraph.log"
fi

if has bench; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -d ' ' | tr 'A-Z' 'a-z' | sed 's/nvidia//')
  [ -n "$tag" ] || tag="${gpu:-gpu}-$(date +%Y-%m-%d)-ggml-topk"
  # The patched run registers only InGraphSelector, named InGraphSelector/ggml:dfsel-topk/... (DFSEL_GGML_LABEL):
  # nothing else of the benchmark calls ggml-cuda's ops.
  for lib in unpatched patched; do
    label=()
    [ $lib = patched ] && label=(DFSEL_GGML_LABEL=dfsel-topk)
    echo "ggml-topk-gpu-check: dfsel_ggml_bench on the $lib ggml-cuda -> $out/$tag-$lib.json"
    with $lib env "${label[@]}" "$dfsel_dir/bench/dfsel_ggml_bench" --benchmark_filter="$bench_filter" \
      --benchmark_min_time=0.2 --benchmark_out="$out/$tag-$lib.json" --benchmark_out_format=json \
      --benchmark_context=command="scripts/ggml-topk-gpu-check.sh --stages bench" \
      >"$out/$tag-$lib.log" 2>&1 || { tail -20 "$out/$tag-$lib.log"; echo "ggml-topk-gpu-check: bench ($lib) failed" >&2; exit 1; }
    grep -E "^(InGraphSelector|DfselGgml)" "$out/$tag-$lib.log" | awk '{print "  " $0}'
  done
fi
echo "ggml-topk-gpu-check: passed ($stages)"
