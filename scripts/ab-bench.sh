#!/usr/bin/env bash
# A/B benchmark of two source trees on one GPU in one run: builds OLD (a checkout of an earlier
# commit) and this tree, then runs both dfsel_bench binaries alternately REPS times with the
# same filter and prints the median of each benchmark side by side (bench/compare_ab.py).
#
#   scripts/ab-bench.sh OLD_SRC [--out DIR] [--filter REGEX] [--reps N] [--min-time S]
#                               [--skip-build]
set -euo pipefail
cd "$(dirname "$0")/.."
old=$1
shift
args="$*"  # for the table's command line (the loop below consumes them)
out=${OUT:-/tmp/dfsel-ab}
filter="^(ShardTopK|Gate|ScoreLattice|SelectorStep|SimulatedShards)/"
reps=3
min_time=0.05s
build=1
while [ $# -gt 0 ]; do
  case $1 in
    --out) out=$2; shift ;;
    --filter) filter=$2; shift ;;
    --reps) reps=$2; shift ;;
    --min-time) min_time=$2; shift ;;
    --skip-build) build=0 ;;
    *) echo "unknown option $1"; exit 2 ;;
  esac
  shift
done
mkdir -p "$out"
export NCCL_NVLS_ENABLE=0
if [ $build = 1 ]; then
  scripts/build.sh build-gpu >"$out/build-new.log" 2>&1 || { tail -30 "$out/build-new.log"; exit 1; }
  (cd "$old" && bash scripts/build.sh "$PWD/build-ab" -DDFSEL_BUILD_TESTS=OFF) >"$out/build-old.log" 2>&1 ||
    { tail -30 "$out/build-old.log"; exit 1; }
fi
# The runs' own files stay in a scratch folder; the table and ab.json (every run's times) go to out.
runs=$(mktemp -d)
a=() b=()
for i in $(seq 1 "$reps"); do
  "$old/build-ab/bench/dfsel_bench" --benchmark_filter="$filter" --benchmark_min_time="$min_time" \
    --benchmark_out="$runs/old-$i.json" --benchmark_out_format=json >"$runs/old-$i.log" 2>&1
  build-gpu/bench/dfsel_bench --benchmark_filter="$filter" --benchmark_min_time="$min_time" \
    --benchmark_out="$runs/new-$i.json" --benchmark_out_format=json >"$runs/new-$i.log" 2>&1
  a+=("$runs/old-$i.json") b+=("$runs/new-$i.json")
  echo "ab: pass $i of $reps done"
done
python3 bench/compare_ab.py --a "${a[@]}" --b "${b[@]}" --json-out "$out/ab.json" \
  --command "scripts/ab-bench.sh OLD $args"
