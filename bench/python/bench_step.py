#!/usr/bin/env python3
"""One selector step from Python at 16 tokens (one block), the shape of the C++ benchmark
SelectorStep/tokens:16/vocab:248320/k:16/f32/bf16: V = 248320, R = 256, K = 16, n_embd 5120,
F32 logits and hidden, BF16 codebooks and W_h, greedy, one GPU.

  graph   plan.run captured in a torch.cuda.graph (16 calls over rotated logits copies, as the
          C++ benchmark does), replayed; device time per call from CUDA events
  eager   host time of one call that only enqueues: plan.run(out=...) against the C call
          itself, dfsel_plan_run through ctypes with structs built beforehand (the baseline);
          the difference is the wrapper's overhead. Also plan.run without out= (allocating)
          and torch.ops.dfsel.select, for reference.

Prints a table and writes JSON (--json PATH).
"""
import argparse
import ctypes
import json
import statistics
import sys
import time

import torch

import dfsel

V, R, K, E, BLOCK = 248320, 256, 16, 5120, 16


def graph_us(plan, inputs, out, calls=16, replays=50):
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in range(calls):
            plan.run(*inputs[c % len(inputs)], out=out)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in range(calls):
            plan.run(*inputs[c % len(inputs)], out=out)
    g.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / calls)
    plan.check()
    return statistics.median(times)


def host_us(call, batch=32, rounds=60):
    """Median over rounds of the host time per call of `batch` calls; the GPU drains between
    rounds so the launch queue never fills."""
    per = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter_ns()
        for _ in range(batch):
            call()
        per.append((time.perf_counter_ns() - t0) / 1000.0 / batch)
    torch.cuda.synchronize()
    return statistics.median(per)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--copies", type=int, default=8, help="rotated logits copies (defeat the L2)")
    args = ap.parse_args()
    dev = "cuda:0"
    g = torch.Generator(device=dev).manual_seed(1)
    rn = lambda *s: torch.randn(*s, generator=g, device=dev)  # noqa: E731
    plan = dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=BLOCK, max_blocks=1,
                      e_prev=(rn(V, R) * 0.5).bfloat16(), e_next=(rn(V, R) * 0.5).bfloat16(),
                      w_h=(rn(R, E) / E ** 0.5).bfloat16())
    hidden = rn(BLOCK, E)
    anchors = torch.tensor([7], dtype=torch.int32, device=dev)
    inputs = [(rn(BLOCK, V) * 3, hidden, anchors) for _ in range(args.copies)]
    out = plan.outputs(1)
    results = {"shape": {"vocab": V, "rank": R, "top_k": K, "n_embd": E, "tokens": BLOCK,
                         "logits": "f32", "hidden": "f32", "codebooks": "bf16"},
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "library": dfsel.library_path()}
    results["graph_replay_us_per_call"] = graph_us(plan, inputs, out)

    # The baseline: the C call with everything prepared, on the same stream.
    lib = dfsel.library()
    plan.run(*inputs[0], out=out)  # fills plan._inputs for these tensors
    c_args = (ctypes.c_void_p(plan._ptr), plan._inputs_ref, out.ref,
              ctypes.c_void_p(torch.cuda.current_stream().cuda_stream or None))
    run_c = lib.dfsel_plan_run
    logits, hidden_, anchors_ = inputs[0]

    def c_call():
        run_c(*c_args)

    def wrapper_call():
        plan.run(logits, hidden_, anchors_, out=out)

    def allocating_call():
        plan.run(logits, hidden_, anchors_)

    def op_call():
        torch.ops.dfsel.select(logits, hidden_, anchors_, plan.handle, 0.0, 0.0, 0)

    calls = [("c_call_ctypes", c_call), ("plan_run_out", wrapper_call), ("plan_run_alloc", allocating_call)]
    if dfsel.torch_op_error is None:
        calls.append(("torch_ops_dfsel_select", op_call))
    for _, fn in calls:  # warm every path before timing any
        for _ in range(20):
            fn()
    # interleaved repetitions, so that drift of the machine falls on every path alike
    samples = {name: [] for name, _ in calls}
    for _ in range(5):
        for name, fn in calls:
            samples[name].append(host_us(fn))
    plan.check()
    host = {name: statistics.median(v) for name, v in samples.items()}
    results["eager_host_us_per_call"] = host
    results["wrapper_overhead_us"] = host["plan_run_out"] - host["c_call_ctypes"]
    results["wrapper_overhead_target_us"] = 15.0

    print("dfsel Python, one step: V %d, R %d, K %d, n_embd %d, %d tokens, F32 logits, BF16 codebooks, %s"
          % (V, R, K, E, BLOCK, results["device"]))
    print("%-44s %10s" % ("measure", "us"))
    print("%-44s %10.2f" % ("graph replay, device time per call", results["graph_replay_us_per_call"]))
    labels = {"c_call_ctypes": "eager host: dfsel_plan_run via ctypes (baseline)",
              "plan_run_out": "eager host: plan.run(out=...)",
              "plan_run_alloc": "eager host: plan.run() allocating outputs",
              "torch_ops_dfsel_select": "eager host: torch.ops.dfsel.select"}
    for name, _ in calls:
        print("%-44s %10.2f" % (labels[name], host[name]))
    print("%-44s %10.2f  (target <= 15)" % ("wrapper overhead: plan.run(out) - C call", results["wrapper_overhead_us"]))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0 if results["wrapper_overhead_us"] <= 15.0 else 1


if __name__ == "__main__":
    sys.exit(main())
