#!/usr/bin/env python3
"""One DSpark chain on one GPU: the PyTorch loop that runs it today and cuBLAS's product alone
against dfsel's DSparkPlan (CUDA backend) called from Python, each captured in CUDA graphs, in
one process.

Sizes (the C++ benchmark DSparkStep, bench/dspark_step_bench.cu): V_draft = V_target = 163840,
R = 256, N = 7, BF16 W1 and W2, F32 base logits (N rows a block), greedy; 1 and 8 blocks.

  torch  per step k = 1..N: e = W1[x_(k-1)] (an embedding lookup of the previous token's row),
         bias = linear(e, W2) (W2 @ e), l = z_k + bias, x_k = argmax l; the N steps of every
         block captured in one graph
  cublas the product alone: N times W2 @ E (torch.matmul, BF16, E the blocks' W1 rows, fixed)
         cast to F32, in one graph: what the loop's linear costs without the rest
  dfsel  plan.run(logits, anchors, out=out) captured in one graph on the same weights and inputs

W2 (84 MB) is rotated over --copies copies (168 MB by default, more than the 60 MB of an H200's
L2): each copy has its own graph of each kind (its own plan for dfsel), and the graphs of a
kind are replayed in turn, so that every chain starts with a W2 that the chain before it did
not read. Within one chain every step reads the same W2, as in an engine. Each replay is timed
between two CUDA events, --timings times (after --warmup replays): the figure is the median.
The table gives the three times and torch / dfsel, cublas / dfsel. How often torch and dfsel
agree on every token is printed for information only: torch's BF16 linear rounds the bias to
BF16 and dfsel's does not, so they may differ near ties.

  python3 bench/python/bench_dspark.py [--blocks 1 8] [--copies 2] [--json PATH]

Exits 1 when dfsel could not make or run a CUDA DSpark plan (the error is printed), 0 otherwise.
"""
import argparse
import json
import statistics
import sys

import torch

import dfsel

V, R, N = 163840, 256, 7


def median_us(graphs, timings, warmup):
    """The median time of one replay, the graphs replayed in turn."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(warmup):
        graphs[i % len(graphs)].replay()
    torch.cuda.synchronize()
    t = []
    for i in range(timings):
        start.record()
        graphs[i % len(graphs)].replay()
        stop.record()
        stop.synchronize()
        t.append(start.elapsed_time(stop) * 1e3)
    return statistics.median(t), min(t), max(t)


def capture(fn):
    """fn() captured in a torch.cuda.graph after a warm-up on a side stream, as torch asks."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


class Chain:
    def __init__(self, blocks, copies, seed=1):
        g = torch.Generator(device="cuda").manual_seed(seed)
        sigma = R ** -0.25
        self.blocks = blocks
        self.w1 = (torch.randn(V, R, generator=g, device="cuda") * sigma).to(torch.bfloat16)
        w2 = (torch.randn(V, R, generator=g, device="cuda") * sigma).to(torch.bfloat16)
        self.w2 = [w2] + [w2.clone() for _ in range(copies - 1)]
        self.z = torch.randn(blocks * N, V, generator=g, device="cuda")  # row b * N + k - 1 drafts step k
        self.anchors = torch.randint(0, V, (blocks,), generator=g, device="cuda", dtype=torch.int32)
        self.e_fixed = self.w1[self.anchors.long()]  # [blocks, R]: the product's right-hand side
        self.torch_tokens = torch.empty(blocks, N, dtype=torch.int64, device="cuda")
        self.bias_out = torch.empty(blocks, V, dtype=torch.float32, device="cuda")

    def torch_chain(self, w2):
        """The reference loop: N dependent steps, every block at once."""
        z = self.z.view(self.blocks, N, V)
        prev = self.anchors.long()
        for k in range(N):
            e = torch.nn.functional.embedding(prev, self.w1)       # [blocks, R]
            bias = torch.nn.functional.linear(e, w2)                # [blocks, V] = W2 @ e
            prev = torch.argmax(z[:, k] + bias, dim=1)
            self.torch_tokens[:, k] = prev

    def cublas_product(self, w2):
        """W2 @ E, N times, its result cast to F32: the loop's product and nothing else."""
        for _ in range(N):
            self.bias_out.copy_(torch.matmul(self.e_fixed, w2.t()))

    def plan(self, w2):
        return dfsel.DSparkPlan(n_vocab=V, markov_rank=R, n_draft=N, max_blocks=self.blocks, w1=self.w1, w2=w2)


def run_case(blocks, args):
    c = Chain(blocks, args.copies)
    row = {"blocks": blocks, "vocab": V, "rank": R, "n_draft": N, "w2_copies": args.copies}
    tg = [capture(lambda w=w: c.torch_chain(w)) for w in c.w2]
    row["torch_us"], row["torch_min_us"], row["torch_max_us"] = median_us(tg, args.timings, args.warmup)
    cg = [capture(lambda w=w: c.cublas_product(w)) for w in c.w2]
    row["cublas_us"], row["cublas_min_us"], row["cublas_max_us"] = median_us(cg, args.timings, args.warmup)
    try:
        plans = [c.plan(w) for w in c.w2]
        outs = [p.outputs(want=()) for p in plans]
        dg = [capture(lambda p=p, o=o: p.run(c.z, c.anchors, out=o)) for p, o in zip(plans, outs)]
        for g in dg:
            g.replay()
        for p in plans:
            p.check()
        row["dfsel_us"], row["dfsel_min_us"], row["dfsel_max_us"] = median_us(dg, args.timings, args.warmup)
        for p in plans:
            p.check()
        tg[0].replay()
        dg[0].replay()
        torch.cuda.synchronize()
        row["same_tokens_blocks"] = int((outs[0].tokens.long() == c.torch_tokens).all(dim=1).sum())
        row["x_vs_torch"] = row["torch_us"] / row["dfsel_us"]
        row["x_vs_cublas"] = row["cublas_us"] / row["dfsel_us"]
    except dfsel.Error as e:
        row["dfsel_error"] = "%s: %s" % (e.status.name if hasattr(e.status, "name") else e.status, e.message)
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--blocks", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--copies", type=int, default=2, help="W2 copies the graphs rotate over")
    ap.add_argument("--timings", type=int, default=200, help="timed replays per graph (median)")
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--json", metavar="PATH", help="write the rows as JSON here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("bench_dspark: torch sees no CUDA device, nothing to measure")
        return 0
    rows = [run_case(b, args) for b in args.blocks]
    print("%-8s %12s %12s %12s %12s %12s %10s" % ("blocks", "torch us", "cublas us", "dfsel us", "torch/dfsel",
                                                  "cublas/dfsel", "same"))
    failed = False
    for r in rows:
        if "dfsel_error" in r:
            failed = True
            print("%-8d %12.1f %12.1f %12s   dfsel: %s" % (r["blocks"], r["torch_us"], r["cublas_us"], "-",
                                                        r["dfsel_error"]))
            continue
        print("%-8d %12.1f %12.1f %12.1f %11.2fx %11.2fx %6d/%d" % (
            r["blocks"], r["torch_us"], r["cublas_us"], r["dfsel_us"], r["x_vs_torch"], r["x_vs_cublas"],
            r["same_tokens_blocks"], r["blocks"]))
    print("targets: cublas/dfsel >= 1.3 at 1 block (%s)" % torch.cuda.get_device_name())
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "dfsel": dfsel.__version__, "rows": rows}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
