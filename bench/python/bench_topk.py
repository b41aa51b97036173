#!/usr/bin/env python3
"""torch.topk on the shapes of the C++ benchmark ShardTopK (bench/shard_topk_bench.cu), timed as
dfsel_bench times ShardTopK and written as Google Benchmark JSON (TorchTopK rows), so that
bench/plot/make_figures.py draws it beside ShardTopK and bench/summarize.py makes it a table.

What is compared. ShardTopK writes, for every row, the K largest logits with their ids, sorted:
K records {float z; int32 id} in candidate order (docs/SPEC.md section 3: larger value first,
equal values by the lower id), read from F32 or BF16 logits in one pass. Its peer is therefore
torch.topk(x, K, dim=1) with sorted=True, torch's default: each row's K largest values in
descending order and their indices (values in the input's dtype, int64 indices; the order of
equal values is left open). Same shape, dtype and K; the values are checked sorted, and on
the first and last rows equal to a full sort on the host.

Shapes (--shapes TxV[:dtype[:K]],... names others): every ShardTopK shape dfsel_bench registers:
F32 K 16 at 1, 16, 256, 1024 and 4096 rows of 31040, 124160 and 248320; BF16 K 16 at 16 x 124160
and 1024 x 248320; F32 K 1 and K 64 at 16 x 124160.

Inputs, as make_inputs there: `copies` tensors of the shape, copy c holding bench_data.cuh's
hashed values at scale 12 and seed 1234567 * (c + 1) (BF16 rounded to nearest even), with
copies = bench_util.cuh's rotation_copies(bytes): together at least twice the 60 MB L2, at most
128 (16 at 16 x 124160 F32, 8 at 16 x 248320, 1 from 256 rows of 124160 on; the run prints
each shape's). The first 65536 elements of the first and last copies are checked bit for bit
against NumPy's uint64 arithmetic before timing.

Timing, as bench_util.cuh's time_graph: calls = copies x ceil(16 / copies) calls, call i on copy
i % copies, captured in one CUDA graph (torch.cuda.graph) and replayed; a timing is R replays
between two CUDA events, the time per call elapsed / (calls x R). R is 10 (the C++ side's
DFSEL_BENCH_REPLAYS=10: the GPU never waits for the host between replays), or 1 where one
replay takes more than 10 ms (the host's launch latency is then under 1% of a timing); the
recorded ShardTopK figures used 1, which counts that latency once per replay against dfsel, so
torch is not measured at a disadvantage. A round is the median of its timings: 50, or as many
as fit in 0.5 s (at least 5), set by the first round of a shape. --rounds rounds per shape,
each an iteration row (repetition_index), and with more than one a median aggregate row, which
the plotter reads, as dfsel_bench --benchmark_repetitions writes them. Counters as report_bytes:
GB/s, floor_us (bytes / 4.27 TB/s), x_floor; and copies, calls_per_graph, replays_per_timing.
A round's timings are held to about 0.5 s, so that the default shapes take under a minute.

  python3 bench/python/bench_topk.py --json bench/python/results/<gpu>-<date>-bench_topk.json

Exits 2, saying why, without torch or a CUDA GPU; 1 when a check fails.
"""
import argparse
import json
import os
import socket
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_step  # noqa: E402  (the hashed inputs, rotation copies and graph timing of the step's script)
from bench_step import torch  # noqa: E402  (None where torch is not importable)

HBM_BYTES_PER_SECOND = 4.27e12  # bench_util.cuh's kHbmBytesPerSecond
DTYPE_BYTES = {"f32": 4, "bf16": 2, "f16": 2}
SCALE = 12.0
BUDGET_S = 0.5   # the most a round spends timing one shape
MIN_TIMINGS = 5
EXECUTABLE = "bench/python/bench_topk.py"

# (tokens, vocab, dtype, K): every ShardTopK row shard_topk_bench.cu registers (the F32 K 16
# grid of tests/support/case_lists.h, then the BF16, K 1 and K 64 shapes).
SHAPES = [(t, v, "f32", 16) for t in (1, 16, 256, 1024, 4096) for v in (31040, 124160, 248320)] + \
    [(16, 124160, "bf16", 16), (1024, 248320, "bf16", 16), (16, 124160, "f32", 1), (16, 124160, "f32", 64)]


def input_seed(copy):
    """make_inputs' seed of input copy `copy`."""
    return 1234567 * (copy + 1)


def shape_bytes(shape):
    tokens, vocab, dtype, _ = shape
    return tokens * vocab * DTYPE_BYTES[dtype]


def bench_name(shape, family="TorchTopK"):
    """Shape.name of shard_topk_bench.cu with the manual_time suffix Google Benchmark adds:
    TorchTopK/tokens:16/vocab:124160/f32/k:16/manual_time."""
    tokens, vocab, dtype, k = shape
    return "%s/tokens:%d/vocab:%d/%s/k:%d/manual_time" % (family, tokens, vocab, dtype, k)


def parse_shapes(text):
    """'16x124160,16x124160:bf16,16x124160:f32:64' -> shapes (dtype f32 and K 16 when left out);
    ValueError on anything else."""
    out = []
    for spec in (s.strip() for s in text.split(",")):
        if not spec:
            continue
        parts = spec.split(":")
        try:
            tokens, vocab = (int(v) for v in parts[0].lower().split("x"))
            dtype = parts[1].lower() if len(parts) > 1 else "f32"
            k = int(parts[2]) if len(parts) > 2 else 16
        except ValueError:
            raise ValueError("shape %r: expected TOKENSxVOCAB[:dtype[:K]], such as 16x124160:bf16:16" % spec)
        if len(parts) > 3 or dtype not in DTYPE_BYTES or tokens < 1 or vocab < 1 or not 1 <= k <= vocab:
            raise ValueError("shape %r: tokens, vocab >= 1, dtype one of %s, 1 <= K <= vocab" % (
                spec, "/".join(DTYPE_BYTES)))
        out.append((tokens, vocab, dtype, k))
    if not out:
        raise ValueError("no shape in %r" % text)
    return out


def bytes_counters(nbytes, us):
    """report_bytes' counters for a call reading nbytes in us microseconds."""
    floor_us = nbytes / HBM_BYTES_PER_SECOND * 1e6
    return {"GB/s": nbytes / (us * 1e-6) / 1e9, "floor_us": floor_us, "x_floor": us / floor_us}


def benchmark_rows(shape, rounds_us, timings, per_timing, copies, family_index=0):
    """Google Benchmark's rows for one shape timed over len(rounds_us) rounds (each the median time
    per call of `timings` timings): an iteration row a round, and with more than one round the
    mean, median and stddev aggregates, as --benchmark_repetitions writes them."""
    name = bench_name(shape)
    n = len(rounds_us)
    extra = {"copies": copies, "calls_per_graph": bench_step.graph_calls(copies), "replays_per_timing": per_timing}
    rows = []
    for i, us in enumerate(rounds_us):
        row = {"name": name, "family_index": family_index, "per_family_instance_index": 0, "run_name": name,
               "run_type": "iteration", "repetitions": n, "repetition_index": i, "threads": 1,
               "iterations": timings, "real_time": us, "time_unit": "us"}
        row.update(bytes_counters(shape_bytes(shape), us))
        row.update(extra)
        rows.append(row)
    if n > 1:
        mean = statistics.mean(rounds_us)
        for agg, value in (("mean", mean), ("median", statistics.median(rounds_us)),
                           ("stddev", statistics.stdev(rounds_us))):
            row = {"name": name + "_" + agg, "family_index": family_index, "per_family_instance_index": 0,
                   "run_name": name, "run_type": "aggregate", "repetitions": n, "threads": 1,
                   "aggregate_name": agg, "aggregate_unit": "time", "iterations": n, "real_time": value,
                   "time_unit": "us"}
            if agg != "stddev":
                row.update(bytes_counters(shape_bytes(shape), value))
                row.update(extra)
            rows.append(row)
    return rows


def result_json(context, rows):
    """The file dfsel_bench --benchmark_out writes: context, benchmarks."""
    return {"context": context, "benchmarks": rows}


def make_inputs(shape, dev, check=True):
    """make_inputs of shard_topk_bench.cu: rotation_copies(bytes) tensors [tokens, vocab]."""
    tokens, vocab, dtype, _ = shape
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[dtype]
    copies = bench_step.rotation_copies(shape_bytes(shape))
    xs = [bench_step.hashed_torch(tokens * vocab, SCALE, input_seed(c), tdtype, dev).view(tokens, vocab)
          for c in range(copies)]
    if check:
        for c in sorted({0, copies - 1}):
            bench_step.check_hashed(xs[c], SCALE, input_seed(c))
    return xs


def check_topk(x, k):
    """torch.topk's answer on x: every row's values sorted descending, found at its indices, and on
    the first and last rows the K largest of a full sort on the host. Raises SystemExit."""
    values, ids = torch.topk(x, k, dim=1)
    if values.shape != (x.shape[0], k) or not bool((values[:, :-1] >= values[:, 1:]).all()):
        raise SystemExit("torch.topk %s: values not sorted descending" % (tuple(x.shape),))
    if not torch.equal(x.gather(1, ids), values):
        raise SystemExit("torch.topk %s: values are not the logits at their indices" % (tuple(x.shape),))
    for r in sorted({0, x.shape[0] - 1}):
        want = torch.sort(x[r].float().cpu(), descending=True).values[:k]
        if not torch.equal(values[r].float().cpu(), want):
            raise SystemExit("torch.topk %s: row %d is not the top %d of a host sort" % (tuple(x.shape), r, k))


def time_shape(shape, dev, rounds):
    """(rounds' times per call in us, timings a round, replays a timing, copies) of torch.topk."""
    k = shape[3]
    xs = make_inputs(shape, dev)
    check_topk(xs[0], k)
    inputs = [(x,) for x in xs]
    step = lambda x: torch.topk(x, k, dim=1)  # noqa: E731  (sorted=True, torch's default)
    out, per, timings = [], bench_step.STEADY, 50
    for i in range(rounds):
        us, per, timings = bench_step.graph_timing(step, inputs, per, timings=timings,
                                                   budget_s=BUDGET_S if i == 0 else None, min_timings=MIN_TIMINGS)
        out.append(us)
    return out, timings, per, len(xs)


def context(argv=None):
    props = torch.cuda.get_device_properties(0)
    return {"date": bench_step.now_iso(), "host_name": socket.gethostname(), "executable": EXECUTABLE,
            "command": bench_step.command_line(argv), "gpu": torch.cuda.get_device_name(0),
            "sms": str(props.multi_processor_count), "torch": torch.__version__, "cuda": torch.version.cuda,
            "timing": "CUDA graph of calls_per_graph calls over the rotated copies, replays_per_timing replays "
                      "between CUDA events; real_time is the median of a round's timings"}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write Google Benchmark JSON (TorchTopK rows) to this file")
    ap.add_argument("--rounds", type=int, default=5, help="rounds per shape (default %(default)s)")
    ap.add_argument("--shapes", help="TOKENSxVOCAB[:dtype[:K]],... (dtype f32, K 16 when left out); "
                    "default: the %d ShardTopK shapes of the figure" % len(SHAPES))
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds = %d: at least 1" % args.rounds)
    try:
        shapes = parse_shapes(args.shapes) if args.shapes else SHAPES
    except ValueError as e:
        ap.error(str(e))
    why = bench_step.gpu_missing(need_dfsel=False)
    if why:
        print("bench_topk.py: not run: %s" % why, file=sys.stderr)
        return 2
    dev = "cuda:0"
    ctx = context(argv if argv is None else [sys.argv[0]] + list(argv))
    rows = []
    print("torch.topk(x, K, dim=1), sorted, on %s (torch %s)" % (ctx["gpu"], ctx["torch"]))
    print("%-52s %10s %9s %7s  %s" % ("benchmark", "us", "GB/s", "copies", "rounds (us)"))
    for i, shape in enumerate(shapes):
        rounds_us, timings, per, copies = time_shape(shape, dev, args.rounds)
        torch.cuda.empty_cache()  # the shape's copies and graph pool, before the next shape's
        rows += benchmark_rows(shape, rounds_us, timings, per, copies, family_index=i)
        us = statistics.median(rounds_us)
        print("%-52s %10.2f %9.0f %7d  %s" % (bench_name(shape), us, bytes_counters(shape_bytes(shape), us)["GB/s"],
                                              copies, " ".join("%.2f" % r for r in rounds_us)))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result_json(ctx, rows), f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
