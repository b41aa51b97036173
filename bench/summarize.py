#!/usr/bin/env python3
"""Turns a dfsel_bench Google Benchmark JSON file into the markdown table kept in bench/results/."""
import argparse
import json


def fmt(v):
    if isinstance(v, float):
        if v == 0:
            return "0"
        if abs(v) >= 100:
            return f"{v:.0f}"
        if abs(v) >= 1:
            return f"{v:.2f}"
        return f"{v:.3g}"
    return str(v)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("json")
    ap.add_argument("--command", default="")
    a = ap.parse_args()
    with open(a.json) as f:
        data = json.load(f)
    ctx = data.get("context", {})
    rows = [b for b in data.get("benchmarks", []) if b.get("run_type", "iteration") == "iteration"
            or b.get("aggregate_name") == "median"]
    skip = {"name", "run_name", "run_type", "repetitions", "repetition_index", "threads", "iterations",
            "real_time", "cpu_time", "time_unit", "family_index", "per_family_instance_index",
            "aggregate_name", "aggregate_unit", "label", "error_occurred", "error_message"}
    counters = []
    for b in rows:
        for k in b:
            if k not in skip and k not in counters:
                counters.append(k)
    print(f"# dfsel_bench on {ctx.get('gpu', 'unknown GPU')}, {ctx.get('date', '')}")
    print()
    if a.command:
        print(f"Command: `{a.command}`")
        print()
    print("Times are means over CUDA-graph replays timed with CUDA events (each replay holds at least 16 "
          "back-to-back calls), in microseconds; "
          "`floor_us` is the bytes moved over 4.27 TB/s.")
    print()
    print("| benchmark | us | " + " | ".join(counters) + " |")
    print("| --- | --- | " + " | ".join("---" for _ in counters) + " |")
    for b in rows:
        t = b["real_time"]
        unit = b.get("time_unit", "us")
        us = t / 1000.0 if unit == "ns" else t * 1000.0 if unit == "ms" else t
        if b.get("error_occurred"):
            print(f"| {b['name']} | error: {b.get('error_message', '')} |" + " |" * len(counters))
            continue
        print(f"| {b['name']} | {fmt(us)} | " + " | ".join(fmt(b.get(k, "")) for k in counters) + " |")


if __name__ == "__main__":
    main()
