#!/usr/bin/env python3
"""ggml-cuda's TOP_K as it is beside the same op with dfsel's top-K (integrations/ggml/0002-*.patch):
the logs of `test-backend-ops perf -o TOP_K -b CUDA0` on each (scripts/ggml-topk-gpu-check.sh) made
into one markdown table, case by case, and optionally a JSON in Google Benchmark's layout for the
plotter (bench/plot/), one row a case and a build:

  python3 bench/ggml/topk_perf_table.py UNPATCHED.log PATCHED.log [--gpu NAME] [--command CMD] [--json OUT]
                                        [--date ISO]

A case is `TOP_K(type=f32,ne=[cols,rows,...],k=K,ties=T)`; the patch sends it to dfsel's top-K when
k <= 64 (its rule for F32 rows). Fails when a log holds no case; a case timed in one log alone is named
on stderr and left out.
"""
import argparse
import datetime as dt
import json
import re
import sys

# A case's name, then its time: on the same line, or on a later one when ggml-cuda's own messages
# (its CUDA graph warm-up) come between them.
NAME = re.compile(r"^\s*TOP_K\((?P<params>[^)]*)\):")
TIME = re.compile(r"(?P<runs>\d+) runs -\s+(?P<us>[0-9.]+) us/run")
PARAMS = re.compile(r"type=(?P<type>\w+),ne=\[(?P<ne>[0-9,]+)\],k=(?P<k>\d+),ties=(?P<ties>\d)")
DFSEL_MAX_K = 64


def read(path):
    """{params: (us_per_run, runs)} of a perf log, in the log's order."""
    rows, current = {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = NAME.match(line)
            if m:
                current = m.group("params")
            t = TIME.search(line)
            if t and current is not None:
                rows[current] = (float(t.group("us")), int(t.group("runs")))
                current = None
    if not rows:
        sys.exit("topk_perf_table: no TOP_K perf line in %s" % path)
    return rows


def case(params):
    m = PARAMS.match(params)
    if not m:
        sys.exit("topk_perf_table: cannot read the case %r" % params)
    ne = [int(x) for x in m.group("ne").split(",")]
    return {"cols": ne[0], "rows": ne[1] * ne[2] * ne[3], "ne": ne, "k": int(m.group("k")), "ties": int(m.group("ties"))}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("unpatched", help="the perf log of ggml-cuda as it is (several: comma-separated, later ones win)")
    ap.add_argument("patched", help="the perf log with the patch (likewise)")
    ap.add_argument("--gpu", default="")
    ap.add_argument("--command", default="")
    ap.add_argument("--json")
    ap.add_argument("--date", help="when the logs were made (ISO 8601; default: now)")
    a = ap.parse_args()
    old, new = {}, {}
    for into, paths in ((old, a.unpatched), (new, a.patched)):
        for path in paths.split(","):
            into.update(read(path))
    only = [("unpatched", p) for p in old if p not in new] + [("patched", p) for p in new if p not in old]
    for build, params in only:
        print("topk_perf_table: TOP_K(%s) has a time in the %s log alone; left out" % (params, build), file=sys.stderr)
    old = {p: v for p, v in old.items() if p in new}
    print("ggml-cuda `TOP_K`, `test-backend-ops perf -o TOP_K -b CUDA0`, us a run%s" % (" (%s)" % a.gpu if a.gpu else ""))
    print()
    print("| ne (cols, rows...) | k | ggml-cuda as it is | with dfsel's top-K | ratio | path |")
    print("| --- | --- | --- | --- | --- | --- |")
    bench = []
    for params, (us_old, _) in old.items():
        us_new = new[params][0]
        c = case(params)
        path = "dfsel" if c["k"] <= DFSEL_MAX_K else "as it is"
        print("| %s | %d | %.2f | %.2f | %.1fx | %s |" % (",".join(map(str, c["ne"])), c["k"], us_old, us_new, us_old / us_new, path))
        for build, us in (("unpatched", us_old), ("patched", us_new)):
            bench.append({"name": "GgmlTopK/ggml_cuda:%s/cols:%d/rows:%d/k:%d" % (build, c["cols"], c["rows"], c["k"]),
                          "run_type": "iteration", "real_time": us, "cpu_time": us, "time_unit": "us",
                          "iterations": new[params][1] if build == "patched" else old[params][1]})
    print()
    print("Command: `%s`" % (a.command or "test-backend-ops perf -o TOP_K -b CUDA0"))
    if a.json:
        ctx = {"date": a.date or dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"), "gpu": a.gpu.split(",")[0].strip(),
               "gpu_and_driver": a.gpu, "command": a.command, "executable": "test-backend-ops",
               "note": "ggml-cuda's TOP_K per run, as test-backend-ops perf prints it (the op repeated in one graph)"}
        with open(a.json, "w") as f:
            json.dump({"context": ctx, "benchmarks": bench}, f, indent=1)


if __name__ == "__main__":
    main()
