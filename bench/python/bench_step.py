#!/usr/bin/env python3
"""One selector step from Python, the shapes of the C++ benchmark SelectorStep: V = 248320,
R = 256, K = 16, n_embd 5120, F32 logits and hidden, BF16 codebooks and W_h, greedy, one GPU;
dfsel's timings at one block (16 tokens, SelectorStep/tokens:16/vocab:248320/k:16/f32/bf16),
the PyTorch selector beside it at 1, 4, 16 and 64 blocks (--blocks).

The inputs are the C++ benchmark's, bit for bit (bench/step_setup.cuh's setup_rank for rank 0:
bench_data.cuh's hashed values, same seeds and scales, the anchor of block b hash64(b) % V,
rotation_copies(tokens x V x 4 bytes) rotated logits copies as bench_util.cuh counts them: 8 at
one block, 2 at 4, 1 from 16 on; outputs path and n_emitted only), so that the two figures
differ only by who captured the graph. Before timing, the first elements of every input are
recomputed with NumPy (exact uint64 arithmetic) and compared with the torch ones.

  graph   plan.run captured in a torch.cuda.graph (16 calls over the 8 logits copies, as the
          C++ benchmark does), replayed; device time per call from CUDA events, the median of
          --rounds rounds of 50 timings (their spread is printed: that is the noise). One
          replay per timing, as the C++ default, counts the host latency between the start
          event and the launch reaching the GPU once per 16 calls, and torch's replay() has
          more of it than cudaGraphLaunch; 10 replays back to back per timing (the C++ side
          with DFSEL_BENCH_REPLAYS=10) keep the GPU busy and measure the graph alone
  eager   host time of one call that only enqueues: plan.run(out=...) against the C call
          itself, dfsel_plan_run through ctypes with structs built beforehand (the baseline);
          the difference is the wrapper's overhead. The torch operators in the same run, each
          beside the plan.run it stands for: torch.ops.dfsel.select_out against plan.run(out=)
          with all six outputs, torch.ops.dfsel.select against plan.run() allocating them.
  torch   a plain PyTorch selector (torch.topk, the gate as a matmul, codebook gathers, the
          lattice as a batched matmul, the greedy walk as 15 argmax steps; float32 math) on the
          same inputs as dfsel's plan.run, both captured and replayed the same way (16 calls a
          graph over the rotated copies), at every --blocks count at V = 248320 and at one
          block at V = 202048; rounds alternate between the two. x_vs_torch = its time /
          dfsel's, both from this run (steady state). The C++ benchmarks hold no peer's
          figure: this is where the comparison is measured. A timing is 10 replays, or 1
          where one replay (16 calls) takes longer than 10 ms (the PyTorch selector at many
          blocks, a few ms a call: the host's launch latency is then under 1% of a timing);
          50 timings a round, or as many as fit in 2 s (at least 10). The first round of a
          case fixes both for its other rounds; each row records them. Each row also says for
          how many blocks the two drafted the same first token, and the same whole path (a
          near-tie may part them).

  PYTHONPATH=python DFSEL_LIBRARY=build/host/libdfsel.so python3 bench/python/bench_step.py
      --json bench/python/results/<gpu>-<date>-bench_python.json [--blocks 1,4,16,64]

Prints a table and writes JSON (--json PATH); exits 2, saying why, without torch, a CUDA GPU or
the dfsel package (PYTHONPATH=python).
"""
import argparse
import ctypes
import datetime as dt
import json
import os
import shlex
import statistics
import sys
import time

try:
    import torch
except ImportError:  # the hashes, copies and rows below are used and tested without torch
    torch = None
try:
    import dfsel
except ImportError:
    dfsel = None

V, R, K, E, BLOCK = 248320, 256, 16, 5120, 16
L2_BYTES = 60 << 20   # bench_util.cuh's kL2Bytes: the H200's L2, rounded up
MIN_GRAPH_CALLS = 16  # bench_util.cuh's kMinGraphCalls
MAX_COPIES = 128      # rotation_copies' cap
BLOCKS = (1, 4, 16, 64)  # --blocks default: tests/support/case_lists.h's kSelectorStepBlocks


def rotation_copies(nbytes):
    """bench_util.cuh's rotation_copies: copies of an input of nbytes that together span twice the
    L2 (1 from there on, at most 128), so that back-to-back calls do not find their input in L2."""
    if nbytes <= 0 or nbytes >= 2 * L2_BYTES:
        return 1
    return min((2 * L2_BYTES + nbytes - 1) // nbytes, MAX_COPIES)


def graph_calls(copies):
    """time_graph's calls per graph: a multiple of copies, at least 16."""
    return copies * ((MIN_GRAPH_CALLS + copies - 1) // copies)


COPIES = rotation_copies(BLOCK * V * 4)  # 8: one block's logits copies, two L2s' worth

_HASH = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB)
_INDEX_MUL = 0x2545F4914F6CDD1D


def _signed(c):
    return c - (1 << 64) if c >= 1 << 63 else c


def hash64_torch(x):
    """bench_data.cuh's hash64 on an int64 tensor: wrapping arithmetic, logical shifts."""
    shr = lambda v, n: (v >> n) & ((1 << (64 - n)) - 1)  # noqa: E731
    x = x + _signed(_HASH[0])
    x = (x ^ shr(x, 30)) * _signed(_HASH[1])
    x = (x ^ shr(x, 27)) * _signed(_HASH[2])
    return x ^ shr(x, 31)


def hashed_torch(n, scale, seed, dtype, dev):
    """hashed_value(seed, i, scale) for i < n, as fill_hashed writes it (F32 or BF16)."""
    i = torch.arange(n, dtype=torch.int64, device=dev)
    h = hash64_torch((i * _signed(_INDEX_MUL)) ^ _signed(seed))
    v = ((h >> 40) & ((1 << 24) - 1)).float() * (2.0 / 16777216.0) - 1.0
    return (v * scale).to(dtype)


def hash64_numpy(x):
    """hash64 on a NumPy uint64 array (exact: uint64 wraps, shifts are logical)."""
    import numpy as np
    with np.errstate(over="ignore"):
        x = x + np.uint64(_HASH[0])
        x = (x ^ (x >> np.uint64(30))) * np.uint64(_HASH[1])
        x = (x ^ (x >> np.uint64(27))) * np.uint64(_HASH[2])
        return x ^ (x >> np.uint64(31))


def hashed_numpy(n, scale, seed):
    """The same values from NumPy's uint64 and float32 (the check of hashed_torch)."""
    import numpy as np
    with np.errstate(over="ignore"):
        x = hash64_numpy((np.arange(n, dtype=np.uint64) * np.uint64(_INDEX_MUL)) ^ np.uint64(seed))
    v = (x >> np.uint64(40)).astype(np.float32) * np.float32(2.0 / 16777216.0) - np.float32(1.0)
    return v * np.float32(scale)


def anchor_ids(blocks, vocab=V):
    """SelectorStep's anchors: block b's is hash64(b) % vocab (step_setup.cuh's setup_rank)."""
    import numpy as np
    return [int(h) % vocab for h in hash64_numpy(np.arange(blocks, dtype=np.uint64))]


def anchor_id(vocab=V):
    """SelectorStep's anchor of block 0: hash64(0) % vocab."""
    return anchor_ids(1, vocab)[0]


def bits_numpy(v, dtype):
    """float32 values as the bits the C++ fill stores: F32 as is, BF16 rounded to nearest even
    (dtype a torch dtype, or "f32" / "bf16")."""
    import numpy as np
    u = v.view(np.uint32).astype(np.uint64)
    if dtype == "f32" or (torch is not None and dtype == torch.float32):
        return u
    return ((u + 0x7FFF + ((u >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)) & np.uint64(0xFFFF)


def check_hashed(t, scale, seed, first=1 << 16):
    """Raises when the first elements of t are not bench_data.cuh's values bit for bit."""
    import numpy as np
    flat = t.reshape(-1)[:first]
    n = flat.numel()
    want = bits_numpy(hashed_numpy(n, scale, seed), t.dtype)
    if t.dtype == torch.float32:
        got = flat.view(torch.int32).cpu().numpy().view(np.uint32).astype(np.uint64)
    else:
        got = flat.view(torch.int16).cpu().numpy().view(np.uint16).astype(np.uint64)
    bad = np.nonzero(got != want)[0]
    if bad.size:
        raise SystemExit("hashed inputs differ from the C++ benchmark's at element %d (seed %d): %x != %x"
                         % (bad[0], seed, got[bad[0]], want[bad[0]]))


STEADY = 10  # replays per timed interval for the steady-state figure (DFSEL_BENCH_REPLAYS=10)
LONG_REPLAY_MS = 10.0  # a replay this long is timed one a timing: the launch latency is < 1% of it
BUDGET_S = 2.0         # the most one case's round spends timing, where its calls are long
MIN_TIMINGS = 10


def timing_plan(replay_ms, per_timing, timings, budget_s, min_timings=MIN_TIMINGS, long_replay_ms=LONG_REPLAY_MS):
    """(replays a timing, timings) for a graph whose one replay took replay_ms: per_timing drops
    to 1 for a replay longer than long_replay_ms, timings to what fits in budget_s (at least
    min_timings, at most timings)."""
    if replay_ms > long_replay_ms:
        per_timing = 1
    fit = int(budget_s * 1e3 / max(replay_ms * per_timing, 1e-6))
    return per_timing, max(min_timings, min(timings, fit))


def graph_timing(step, inputs, per_timing, calls=None, timings=50, budget_s=None, min_timings=MIN_TIMINGS):
    """Device time per call of step(*inputs[c]), `calls` calls (default graph_calls(copies)) over
    the rotated inputs captured in one graph; the median of `timings` timings of per_timing
    replays. With budget_s, one replay timed first sets both by timing_plan. Returns (us per
    call, per_timing, timings)."""
    calls = calls or graph_calls(len(inputs))
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for c in range(calls):
            step(*inputs[c % len(inputs)])
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        for c in range(calls):
            step(*inputs[c % len(inputs)])
    g.replay()
    torch.cuda.synchronize()
    if budget_s is not None:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        b.synchronize()
        per_timing, timings = timing_plan(a.elapsed_time(b), per_timing, timings, budget_s, min_timings)
    times = []
    for _ in range(timings):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        for _ in range(per_timing):
            g.replay()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b) * 1000.0 / (calls * per_timing))
    return statistics.median(times), per_timing, timings


def graph_us(step, inputs, per_timing, calls=None, timings=50):
    """graph_timing's time per call alone, with per_timing and timings as given."""
    return graph_timing(step, inputs, per_timing, calls, timings)[0]


class TorchSelector:
    """The selector in plain PyTorch, greedy, one GPU: the peer of SelectorStep. Weights are
    prepared once (W_h widened to float32); a call allocates its temporaries from torch."""

    def __init__(self, e_prev, e_next, w_h, block):
        self.e_prev, self.e_next, self.w_h, self.block = e_prev, e_next, w_h.float(), block

    def __call__(self, logits, hidden, anchors):
        B, L = self.block, self.block - 1
        n = anchors.numel()
        z = logits.view(n, B, -1)[:, 1:].reshape(n * L, -1).float()     # drafted rows
        unary, cand = torch.topk(z, K, dim=1)                            # [D, K]
        h = hidden.view(n, B, -1)[:, 1:].reshape(n * L, -1).float()
        g = h @ self.w_h.t()                                             # the gate, [D, R]
        c3 = cand.view(n, L, K)
        prev = torch.cat([anchors.long().view(n, 1, 1).expand(n, 1, K), c3[:, :-1]], dim=1).reshape(n * L, K)
        P = self.e_prev[prev].float() * g.unsqueeze(1)                   # [D, K, R]
        N = self.e_next[cand].float()                                    # [D, K, R]
        scores = (torch.bmm(P, N.transpose(1, 2)) + unary.unsqueeze(1)).view(n, L, K, K)
        rows = torch.arange(n, device=logits.device)
        j = torch.zeros(n, dtype=torch.long, device=logits.device)
        path = []
        for p in range(L):  # greedy walk: each step's best successor of the previous choice
            j = scores[rows, p, j].argmax(dim=1)
            path.append(c3[rows, p, j])
        return torch.stack(path, dim=1)



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


def cpp_runs_us(path, replays):
    """The SelectorStep/tokens:16 times (us) of a dfsel_bench JSON run with `replays` replays a
    timing; exits naming the file when it holds none or was run another way."""
    with open(path) as f:
        data = json.load(f)
    got = data.get("context", {}).get("replays_per_timing", "1")
    if got != str(replays):
        raise SystemExit("%s: replays_per_timing = %s, expected %d" % (path, got, replays))
    units = {"ns": 1e-3, "us": 1.0, "ms": 1e3}
    runs = [b["real_time"] * units[b["time_unit"]] for b in data.get("benchmarks", [])
            if b.get("run_type") == "iteration" and b["name"].startswith("SelectorStep/tokens:16/")]
    if not runs:
        raise SystemExit("%s: no SelectorStep/tokens:16 rows" % path)
    return runs


def setup(vocab, dev, check=False, blocks=1):
    """bench/step_setup.cuh's setup_rank for one rank at `vocab` and `blocks` blocks: seeds,
    scales, types and anchors as there, rotation_copies(tokens x vocab x 4) logits copies and a
    plan of max_blocks = blocks. Returns the plan, the rotated (logits, hidden, anchors), the
    weights."""
    tokens = blocks * BLOCK
    copies = rotation_copies(tokens * vocab * 4)
    e_prev = hashed_torch(vocab * R, 0.1, 11, torch.bfloat16, dev).view(vocab, R)
    e_next = hashed_torch(vocab * R, 0.1, 12, torch.bfloat16, dev).view(vocab, R)
    w_h = hashed_torch(R * E, 0.02, 13, torch.bfloat16, dev).view(R, E)
    hidden = hashed_torch(tokens * E, 1.0, 14, torch.float32, dev).view(tokens, E)
    logits = [hashed_torch(tokens * vocab, 8.0, logits_seed(c), torch.float32, dev).view(tokens, vocab)
              for c in range(copies)]
    if check:
        for t, scale, seed in ((e_prev, 0.1, 11), (e_next, 0.1, 12), (w_h, 0.02, 13), (hidden, 1.0, 14),
                               (logits[0], 8.0, logits_seed(0)), (logits[-1], 8.0, logits_seed(copies - 1))):
            check_hashed(t, scale, seed)
    anchors = torch.tensor(anchor_ids(blocks, vocab), dtype=torch.int32, device=dev)
    plan = dfsel.Plan(n_vocab=vocab, n_embd=E, codebook_rank=R, top_k=K, block_size=BLOCK, max_blocks=blocks,
                      e_prev=e_prev, e_next=e_next, w_h=w_h)
    return plan, [(lg, hidden, anchors) for lg in logits], (e_prev, e_next, w_h)


def logits_seed(copy, rank=0):
    """setup_rank's seed of logits copy `copy`: 100 + copy * 7919 + rank."""
    return 100 + copy * 7919 + rank


def against_torch_row(vocab, blocks, copies, dfsel_rounds, torch_rounds, dfsel_timing, torch_timing,
                      paths_dfsel, paths_torch):
    """One row of against_torch: the medians and their ratio, every round, how each side was timed
    ((replays a timing, timings)) and how many blocks' first drafted token and whole path the two
    agree on (paths_*: a list of blocks' paths, each a list of token ids)."""
    d, t = statistics.median(dfsel_rounds), statistics.median(torch_rounds)
    return {"vocab": vocab, "blocks": blocks, "tokens": blocks * BLOCK, "logits_copies": copies,
            "dfsel_us": d, "torch_us": t, "x_vs_torch": t / d,
            "dfsel_rounds_us": list(dfsel_rounds), "torch_rounds_us": list(torch_rounds),
            "dfsel_replays_per_timing": dfsel_timing[0], "dfsel_timings": dfsel_timing[1],
            "torch_replays_per_timing": torch_timing[0], "torch_timings": torch_timing[1],
            "first_token_dfsel": paths_dfsel[0][0], "first_token_torch": paths_torch[0][0],
            "first_tokens_agree": sum(a[0] == b[0] for a, b in zip(paths_dfsel, paths_torch)),
            "paths_agree": sum(list(a) == list(b) for a, b in zip(paths_dfsel, paths_torch))}


def against_torch(vocab, dev, rounds, blocks=1):
    """dfsel's step and the PyTorch selector at `vocab` and `blocks` blocks, steady state,
    alternating rounds; the ratio of the medians. The first round of each side sets how it is
    timed (timing_plan: a long replay is timed one a timing, fewer timings); the rest follow it."""
    plan, inputs, (e_prev, e_next, w_h) = setup(vocab, dev, check=True, blocks=blocks)
    out = plan.outputs(blocks, want=("path", "n_emitted"))
    peer = TorchSelector(e_prev, e_next, w_h, BLOCK)
    ours = lambda lg, h, a: plan.run(lg, h, a, out=out)  # noqa: E731
    times = {"dfsel": [], "torch": []}
    how = {}
    for _ in range(rounds):
        for name, step in (("dfsel", ours), ("torch", peer)):
            per, n = how.get(name, (STEADY, 50))
            us, per, n = graph_timing(step, inputs, per, timings=n, budget_s=None if name in how else BUDGET_S)
            how[name] = (per, n)
            times[name].append(us)
            torch.cuda.empty_cache()  # the graph's pool, before the other side captures
    plan.check()
    # Every block's path from both on copy 0: the first drafted tokens agree (the rest may part
    # at a near-tie).
    plan.run(*inputs[0], out=out)
    mine = out.path.cpu().tolist()
    theirs = peer(*inputs[0]).cpu().tolist()
    plan.check()
    row = against_torch_row(vocab, blocks, len(inputs), times["dfsel"], times["torch"], how["dfsel"], how["torch"],
                            mine, theirs)
    plan.close()  # its workspace now; the case's tensors when this returns (main empties the cache)
    return row


def gpu_missing(need_dfsel=True):
    """Why this process cannot run the benchmark (no torch, no CUDA GPU, no dfsel), or None."""
    if torch is None:
        return "torch is not importable"
    if not torch.cuda.is_available():
        return "torch %s sees no CUDA GPU" % torch.__version__
    if need_dfsel and dfsel is None:
        return "the dfsel package is not importable (PYTHONPATH=python, or pip install the package)"
    return None


def command_line(argv=None):
    """The command line this process runs, as a shell would take it back."""
    argv = sys.argv if argv is None else argv
    return " ".join([os.path.basename(sys.executable) or "python3", shlex.join(argv)])


def now_iso():
    """The local time with its offset, as Google Benchmark's context.date."""
    return dt.datetime.now().astimezone().isoformat(timespec="seconds")


def parse_blocks(text):
    """'1,4,16,64' -> [1, 4, 16, 64]; ValueError for anything but positive integers."""
    out = [int(b) for b in text.split(",") if b.strip()]
    if not out or any(b < 1 for b in out):
        raise ValueError("blocks must be positive integers: %r" % text)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--json", help="write the figures to this file")
    ap.add_argument("--rounds", type=int, default=5, help="graph timing rounds (50 timings each)")
    ap.add_argument("--cpp-json", help="Google Benchmark JSON of SelectorStep/tokens:16 to print beside")
    ap.add_argument("--cpp-json-steady", help="the same, run with DFSEL_BENCH_REPLAYS=%d" % STEADY)
    ap.add_argument("--blocks", default=",".join(map(str, BLOCKS)),
                    help="blocks of 16 tokens at which the PyTorch selector is timed beside dfsel at V = %d "
                    "(default %%(default)s; one block at V = 202048 besides)" % V)
    args = ap.parse_args()
    if args.rounds < 1:
        ap.error("--rounds = %d: at least 1" % args.rounds)
    try:
        blocks = parse_blocks(args.blocks)
    except ValueError as e:
        ap.error(str(e))
    why = gpu_missing()
    if why:
        print("bench_step.py: not run: %s" % why, file=sys.stderr)
        return 2
    dev = "cuda:0"
    plan, inputs, _ = setup(V, dev, check=True)
    out = plan.outputs(1, want=("path", "n_emitted"))  # what the C++ benchmark asks for
    results = {"shape": {"vocab": V, "rank": R, "top_k": K, "n_embd": E, "tokens": BLOCK,
                         "logits": "f32", "hidden": "f32", "codebooks": "bf16",
                         "inputs": "bench_data.cuh hashed values, as SelectorStep"},
               "device": torch.cuda.get_device_name(0), "torch": torch.__version__,
               "library": dfsel.library_path(), "date": now_iso(), "command": command_line()}
    rounds = {1: [], STEADY: []}
    step = lambda lg, h, a: plan.run(lg, h, a, out=out)  # noqa: E731
    for _ in range(args.rounds):  # the two ways alternate, so that drift falls on both
        for n in rounds:
            rounds[n].append(graph_us(step, inputs, n))
    plan.check()
    results["graph_replay_us_per_call"] = statistics.median(rounds[1])
    results["graph_replay_rounds_us"] = rounds[1]
    results["graph_steady_us_per_call"] = statistics.median(rounds[STEADY])
    results["graph_steady_rounds_us"] = rounds[STEADY]
    for key, path, replays in (("cpp_selector_step", args.cpp_json, 1),
                               ("cpp_selector_step_steady", args.cpp_json_steady, STEADY)):
        if path:
            cpp = cpp_runs_us(path, replays)
            results[key + "_us"] = statistics.median(cpp)
            results[key + "_runs_us"] = cpp

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

    full = plan.outputs(1)  # all six outputs, for the operators' comparison
    f = full
    ws, handle = plan.workspace, plan.handle

    def wrapper_all_call():
        plan.run(logits, hidden_, anchors_, out=full)

    def op_out_call():
        torch.ops.dfsel.select_out(logits, hidden_, anchors_, ws, handle, 0.0, 0.0, 0,
                                   f.cand_ids, f.unary, f.scores, f.q, f.path, f.n_emitted)

    def op_call():
        torch.ops.dfsel.select(logits, hidden_, anchors_, ws, handle, 0.0, 0.0, 0)

    calls = [("c_call_ctypes", c_call), ("plan_run_out", wrapper_call), ("plan_run_alloc", allocating_call),
             ("plan_run_out_all", wrapper_all_call)]
    if dfsel.torch_op_error is None:
        calls += [("torch_ops_dfsel_select_out", op_out_call), ("torch_ops_dfsel_select", op_call)]
    else:
        print("torch operators not timed: %s" % dfsel.torch_op_error)
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
    if dfsel.torch_op_error is None:
        # each operator against the plan.run it stands for, from the same interleaved samples
        results["select_out_minus_plan_run_out_all_us"] = host["torch_ops_dfsel_select_out"] - host["plan_run_out_all"]
        results["select_minus_plan_run_alloc_us"] = host["torch_ops_dfsel_select"] - host["plan_run_alloc"]
    results["against_torch"] = []
    for vocab, b in [(V, b) for b in blocks] + [(202048, 1)]:
        results["against_torch"].append(against_torch(vocab, dev, args.rounds, b))
        torch.cuda.empty_cache()  # a 64-block case holds 1 GB a logits copy

    print("dfsel Python, one step: V %d, R %d, K %d, n_embd %d, %d tokens, F32 logits, BF16 codebooks, %s"
          % (V, R, K, E, BLOCK, results["device"]))
    print("%-44s %10s" % ("measure", "us"))
    rows = [("graph replay, 1 replay a timing", "graph_replay_us_per_call", "graph_replay_rounds_us"),
            ("C++ SelectorStep, same inputs, 1 a timing", "cpp_selector_step_us", "cpp_selector_step_runs_us"),
            ("graph replay, %d replays a timing" % STEADY, "graph_steady_us_per_call", "graph_steady_rounds_us"),
            ("C++ SelectorStep, %d replays a timing" % STEADY, "cpp_selector_step_steady_us",
             "cpp_selector_step_steady_runs_us")]
    for label, key, runs_key in rows:
        if key in results:
            print("%-44s %10.2f  (%s)" % (label, results[key], " ".join("%.2f" % r for r in results[runs_key])))
    labels = {"c_call_ctypes": "eager host: dfsel_plan_run via ctypes (baseline)",
              "plan_run_out": "eager host: plan.run(out=...)",
              "plan_run_alloc": "eager host: plan.run() allocating outputs",
              "plan_run_out_all": "eager host: plan.run(out=...), six outputs",
              "torch_ops_dfsel_select_out": "eager host: torch.ops.dfsel.select_out",
              "torch_ops_dfsel_select": "eager host: torch.ops.dfsel.select"}
    for name, _ in calls:
        print("%-44s %10.2f" % (labels[name], host[name]))
    for key, label in (("select_out_minus_plan_run_out_all_us", "select_out - plan.run(out=), six outputs"),
                       ("select_minus_plan_run_alloc_us", "select - plan.run() allocating")):
        if key in results:
            print("%-44s %10.2f" % (label, results[key]))
    for a in results["against_torch"]:
        case = "V %d, %d block%s" % (a["vocab"], a["blocks"], "" if a["blocks"] == 1 else "s")
        for side, label in (("dfsel", "dfsel"), ("torch", "PyTorch selector")):
            print("%-44s %10.2f  (%s)" % ("graph, %d replay%s: %s, %s" % (
                a[side + "_replays_per_timing"], "" if a[side + "_replays_per_timing"] == 1 else "s", label, case),
                a[side + "_us"], " ".join("%.2f" % r for r in a[side + "_rounds_us"])))
        print("%-44s %10.2f  (first token %d / %d; blocks agreeing: first token %d, path %d of %d)" % (
            "x_vs_torch, " + case, a["x_vs_torch"], a["first_token_dfsel"], a["first_token_torch"],
            a["first_tokens_agree"], a["paths_agree"], a["blocks"]))
    met = results["wrapper_overhead_us"] <= results["wrapper_overhead_target_us"]
    print("%-44s %10.2f  (target <= %.0f: %s)" % ("wrapper overhead: plan.run(out) - C call", results["wrapper_overhead_us"],
                                            results["wrapper_overhead_target_us"], "met" if met else "not met"))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=2)
    return 0  # a figure, not a test: a missed target is printed, and the run still succeeds


if __name__ == "__main__":
    sys.exit(main())
