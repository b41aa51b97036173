"""The torch-side experiments of bench/python/results/README.md (graph replay gap): the step of
bench_step.py with its tensors placed three ways (torch_after_temps: as bench_step.py;
torch_first: every final tensor allocated before any temporary; cupy_malloc: one cudaMalloc
each) and replayed on the legacy default stream or a torch.cuda.Stream (legacy, side).
Run from the repository root on a CUDA machine with torch (and CuPy for cupy_malloc):
  DFSEL_LIBRARY=BUILD/host/libdfsel.so PYTHONPATH=python \
    python3 bench/python/experiments/graph_gap_torch.py torch_after_temps torch_first legacy side
"""
import sys, statistics, torch
sys.path.insert(0, "bench/python")
import bench_step as b
import dfsel
V, R, K, E, BLOCK, COPIES = b.V, b.R, b.K, b.E, b.BLOCK, b.COPIES
dev = "cuda:0"

def make(alloc):
    specs = [("e_prev", V * R, 0.1, 11, torch.bfloat16, (V, R)), ("e_next", V * R, 0.1, 12, torch.bfloat16, (V, R)),
             ("w_h", R * E, 0.02, 13, torch.bfloat16, (R, E)), ("hidden", BLOCK * E, 1.0, 14, torch.float32, (BLOCK, E))]
    specs += [("logits%d" % c, BLOCK * V, 8.0, 100 + c * 7919, torch.float32, (BLOCK, V)) for c in range(COPIES)]
    out = {}
    if alloc == "torch_after_temps":   # as bench_step.py: each made from its own temporaries
        for n, cnt, sc, sd, dt, sh in specs:
            out[n] = b.hashed_torch(cnt, sc, sd, dt, dev).view(*sh)
    elif alloc == "torch_first":       # every final tensor allocated before any temporary
        for n, cnt, sc, sd, dt, sh in specs:
            out[n] = torch.empty(sh, dtype=dt, device=dev)
        for n, cnt, sc, sd, dt, sh in specs:
            out[n].copy_(b.hashed_torch(cnt, sc, sd, dt, dev).view(*sh))
    elif alloc == "cupy_malloc":       # cudaMalloc each, no pool
        import cupy
        cupy.cuda.set_allocator(None)
        for n, cnt, sc, sd, dt, sh in specs:
            t = b.hashed_torch(cnt, sc, sd, dt, dev).view(*sh)
            raw = cupy.empty(sh, dtype=cupy.uint16 if dt == torch.bfloat16 else cupy.float32)
            src = cupy.asarray(t.view(torch.int16) if dt == torch.bfloat16 else t)
            raw[...] = src.view(raw.dtype)
            out[n] = dfsel.typed(raw, "bf16") if dt == torch.bfloat16 else raw
        torch.cuda.synchronize()
    return out

def run(alloc):
    t = make(alloc)
    torch.cuda.synchronize()
    anchors = torch.tensor([b.anchor_id()], dtype=torch.int32, device=dev)
    if alloc == "cupy_malloc":
        import cupy
        anchors = cupy.asarray([b.anchor_id()], dtype=cupy.int32)
    plan = dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=BLOCK, max_blocks=1,
                      e_prev=t["e_prev"], e_next=t["e_next"], w_h=t["w_h"])
    inputs = [(t["logits%d" % c], t["hidden"], anchors) for c in range(COPIES)]
    out = plan.outputs(1, want=("path", "n_emitted"), framework="torch")
    orig = plan.run
    plan.run = lambda *a, **k: orig(*a, stream=torch.cuda.current_stream(), **k)
    r = [b.graph_us(plan, inputs, out, 10) for _ in range(5)]
    print("%-20s steady %.2f us (%s); ptrs e_prev %x logits0 %x" % (alloc, statistics.median(r), " ".join("%.2f" % x for x in r),
          t["e_prev"].data_ptr() if hasattr(t["e_prev"], "data_ptr") else 0,
          t["logits0"].data_ptr() if hasattr(t["logits0"], "data_ptr") else t["logits0"].data.ptr), flush=True)
    plan.close()
    del t, inputs, out
    torch.cuda.empty_cache()


def run_stream(label, stream_factory):
    t = make("torch_after_temps")
    anchors = torch.tensor([b.anchor_id()], dtype=torch.int32, device=dev)
    plan = dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=BLOCK, max_blocks=1,
                      e_prev=t["e_prev"], e_next=t["e_next"], w_h=t["w_h"])
    inputs = [(t["logits%d" % c], t["hidden"], anchors) for c in range(COPIES)]
    out = plan.outputs(1, want=("path", "n_emitted"))
    s = stream_factory()
    with torch.cuda.stream(s):
        r1 = [b.graph_us(plan, inputs, out, 1) for _ in range(3)]
        r10 = [b.graph_us(plan, inputs, out, 10) for _ in range(3)]
    print("%-28s 1/timing %.2f  10/timing %.2f  (%s | %s)" % (label, statistics.median(r1), statistics.median(r10),
          " ".join("%.2f" % x for x in r1), " ".join("%.2f" % x for x in r10)), flush=True)
    plan.close(); del t, inputs, out; torch.cuda.empty_cache()

for arg in sys.argv[1:]:
    if arg == "legacy":
        run_stream("legacy default stream", lambda: torch.cuda.default_stream())
    elif arg == "side":
        run_stream("torch.cuda.Stream()", lambda: torch.cuda.Stream())
    else:
        run(arg)
