#!/usr/bin/env bash
# The DSpark chain's pass variants side by side in one run: each line of VARIANTS is an
# environment (the plan's tuning switches, host/backend/cuda_dspark.cu) under which dfsel_bench
# times the DSparkStep cases of FILTER; "old=PATH" runs another dfsel_bench binary instead (an
# earlier build, for an A/B). Google Benchmark JSON per variant goes to OUT, and a table of the
# median times (us) is printed last; the exit status is 1 when any variant failed. MIN_TIME sets --benchmark_min_time (0.05s; a plain number
# for an older Google Benchmark).
#
#   bench/dspark_variants.sh BENCH OUT FILTER VARIANT...
#   e.g. bench/dspark_variants.sh build/bench/dfsel_bench /tmp/v 'DSparkStep/blocks:1/' \
#          'default' 'DFSEL_DSPARK_BULK=1' 'DFSEL_DSPARK_TILE=128x3' 'old=/tmp/old/dfsel_bench'
set -uo pipefail
bench=$1 out=$2 filter=$3
shift 3
mkdir -p "$out"
n=0
failed=0
names=()
for v in "$@"; do
  n=$((n + 1))
  bin=$bench
  envs=()
  case $v in
    default) ;;
    old=*) bin=${v#old=} ;;
    *) read -r -a envs <<<"$v" ;;
  esac
  env "${envs[@]}" "$bin" --benchmark_filter="$filter" --benchmark_min_time="${MIN_TIME:-0.05s}" \
    --benchmark_out="$out/variant-$n.json" >"$out/variant-$n.txt" 2>&1 || { echo "variant $n ($v) failed"; failed=1; }
  grep -q "ERROR OCCURRED" "$out/variant-$n.txt" && { echo "variant $n ($v) skipped a case with an error"; failed=1; }
  names+=("$v")
done
python3 - "$out" "${names[@]}" <<'PY'
import json, sys
out, names = sys.argv[1], sys.argv[2:]
rows, cols = {}, []
for i, name in enumerate(names, 1):
    try:
        data = json.load(open("%s/variant-%d.json" % (out, i)))
    except (OSError, ValueError):
        continue
    if name in cols:
        name = "%s#%d" % (name, i)
    cols.append(name)
    for b in data["benchmarks"]:
        key = b["name"].replace("/vocab:163840/r:256/n:7/f32/bf16", "").replace("/manual_time", "")
        rows.setdefault(key, {})[name] = b.get("us", b.get("real_time"))
print("%-44s" % "case" + "".join("%16s" % c[-15:] for c in cols))
for key, vals in rows.items():
    print("%-44s" % key[:44] + "".join("%16s" % ("%.1f" % vals[c] if c in vals else "-") for c in cols))
PY
exit $failed
