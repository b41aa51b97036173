#!/usr/bin/env python3
"""A/B table of dfsel_bench runs: the median real time of each benchmark over the repeated runs
of build A and build B (JSON files given alternately by scripts/ab-bench.sh), and B / A."""
import argparse
import json
import statistics


def times(paths):
    out = {}
    for p in paths:
        with open(p) as f:
            data = json.load(f)
        for b in data.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration" or b.get("error_occurred"):
                continue
            out.setdefault(b["name"], []).append(b["real_time"])
    return out, data.get("context", {})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", nargs="+", required=True, help="JSON files of build A")
    ap.add_argument("--b", nargs="+", required=True, help="JSON files of build B")
    ap.add_argument("--label-a", default="before")
    ap.add_argument("--label-b", default="after")
    ap.add_argument("--command", default="")
    ap.add_argument("--json-out", default="")
    args = ap.parse_args()
    ta, ctx = times(args.a)
    tb, _ = times(args.b)
    rows = []
    for name in ta:
        if name not in tb:
            continue
        ma, mb = statistics.median(ta[name]), statistics.median(tb[name])
        rows.append((name, ma, mb, mb / ma, min(ta[name]), max(ta[name]), min(tb[name]), max(tb[name])))
    gpu = ctx.get("gpu", ctx.get("host_name", ""))
    runs = f"{len(args.a)} runs of each build" if len(args.a) == len(args.b) else \
        f"{len(args.a)} runs of {args.label_a}, {len(args.b)} of {args.label_b}"
    print(f"A/B on {gpu}, {runs}, alternating; median real time in us")
    if args.command:
        print(f"\nCommand: `{args.command}`\n")
    print(f"| benchmark | {args.label_a} | {args.label_b} | {args.label_b} / {args.label_a} | {args.label_a} range | {args.label_b} range |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(f"| {r[0]} | {r[1]:.2f} | {r[2]:.2f} | {r[3]:.3f} | {r[4]:.2f}-{r[5]:.2f} | {r[6]:.2f}-{r[7]:.2f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"context": ctx, "label_a": args.label_a, "label_b": args.label_b,
                       "rows": [dict(name=r[0], a_us=r[1], b_us=r[2], ratio=r[3], a_runs=ta[r[0]], b_runs=tb[r[0]])
                                for r in rows]}, f, indent=1)


if __name__ == "__main__":
    main()
