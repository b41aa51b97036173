#!/usr/bin/env bash
# Builds the libFuzzer targets of fuzz/ with clang, AddressSanitizer and UndefinedBehaviorSanitizer
# into build-fuzz (host code only) and runs each for SECONDS seconds. Exits non-zero when a
# target finds a crash, a leak, undefined behaviour or a broken promise; the input that did it
# is left in build-fuzz/findings/.
#   scripts/fuzz.sh SECONDS [TARGET...]      targets: fuzz_gguf fuzz_api fuzz_dspark (default: all)
set -euo pipefail
if [ $# -lt 1 ] || ! [[ $1 =~ ^[0-9]+$ ]]; then
  echo "usage: $0 SECONDS [TARGET...]" >&2
  exit 2
fi
seconds=$1
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_gguf fuzz_api fuzz_dspark)
cd "$(dirname "$0")/.."
dir=build-fuzz
gen=()
command -v ninja >/dev/null && gen=(-G Ninja)
mkdir -p "$dir"
CC=clang CXX=clang++ cmake -S . -B "$dir" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DDFSEL_CUDA=OFF -DDFSEL_FUZZ=ON -DDFSEL_SANITIZE=ON -DDFSEL_BUILD_TESTS=OFF \
  -DDFSEL_BUILD_BENCH=OFF -DDFSEL_BUILD_TOOLS=OFF -DDFSEL_BUILD_EXAMPLES=OFF >"$dir/configure.log" 2>&1 ||
  { cat "$dir/configure.log"; exit 1; }
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"

export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
mkdir -p "$dir/findings"
status=0
for t in "${targets[@]}"; do
  name=${t#fuzz_}
  corpus=("$dir/corpus/$name")  # grows from run to run; new inputs are written here
  mkdir -p "${corpus[0]}"
  [ -d "fuzz/corpus/$name" ] && corpus+=("fuzz/corpus/$name")  # committed seeds, read only
  echo "fuzz: $t for $seconds s"
  if ! "$dir/fuzz/$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 -print_final_stats=1 \
      -artifact_prefix="$dir/findings/$t-" "${corpus[@]}" >"$dir/$t.log" 2>&1; then
    echo "fuzz: $t FAILED; the tail of $dir/$t.log:"
    tail -n 60 "$dir/$t.log"
    status=1
  else
    grep -E "^stat::(number_of_executed_units|peak_rss_mb)|^Done" "$dir/$t.log" | sed "s/^/fuzz: $t: /"
  fi
done
exit $status
