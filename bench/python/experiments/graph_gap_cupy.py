"""The Python-side experiments of bench/python/results/README.md (graph replay gap): the step
of SelectorStep/tokens:16 with CuPy arrays, one cudaMalloc each (no pool), captured on a
non-blocking CuPy stream, replays timed with CuPy events, 1 and 10 replays a timing.
DIRECT=1 fills each array in place with one kernel (no temporaries); NO_TORCH=1 keeps torch
from being imported; LIB_FIRST=1 loads libdfsel.so before the process's first CUDA call.
Run from the repository root on a CUDA machine with CuPy:
  DFSEL_LIBRARY=BUILD/host/libdfsel.so python3 bench/python/experiments/graph_gap_cupy.py
"""
import sys, os, statistics
if os.environ.get("NO_TORCH"): sys.modules["torch"] = None  # import torch fails: dfsel runs without it
sys.path.insert(0, "python")
import dfsel
if os.environ.get("LIB_FIRST"):
    dfsel.library()  # dlopen libdfsel.so before any CUDA call of this process
import cupy as cp
cp.cuda.set_allocator(None)
V, R, K, E, BLOCK, COPIES = 248320, 256, 16, 5120, 16, 8
H = (0x9E3779B97F4A7C15, 0xBF58476D1CE4E5B9, 0x94D049BB133111EB); M = 0x2545F4914F6CDD1D
_K = cp.ElementwiseKernel("uint64 seed, float32 scale, int32 bf16", "T out", """
    unsigned long long x = seed ^ ((unsigned long long)i * 0x2545F4914F6CDD1Dull);
    x += 0x9E3779B97F4A7C15ull; x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull; x = x ^ (x >> 31);
    float v = ((float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f) * scale;
    unsigned int u = __float_as_uint(v);
    if (bf16) { u += 0x7fffu + ((u >> 16) & 1u); out = (T)(u >> 16); } else { out = *(T*)&u; }
    """, "hashk")
def hashed_direct(n, scale, seed, bf16):
    out = cp.empty(n, dtype=cp.uint16 if bf16 else cp.float32)
    if bf16:
        _K(cp.uint64(seed), cp.float32(scale), cp.int32(1), out)
    else:
        u = out.view(cp.uint32)
        _K(cp.uint64(seed), cp.float32(scale), cp.int32(0), u)
    return out
def hashed_temps(n, scale, seed, bf16):
    x = (cp.arange(n, dtype=cp.uint64) * cp.uint64(M)) ^ cp.uint64(seed)
    x = x + cp.uint64(H[0]); x = (x ^ (x >> cp.uint64(30))) * cp.uint64(H[1])
    x = (x ^ (x >> cp.uint64(27))) * cp.uint64(H[2]); x = x ^ (x >> cp.uint64(31))
    v = ((x >> cp.uint64(40)).astype(cp.float32) * cp.float32(2.0 / 16777216.0) - cp.float32(1.0)) * cp.float32(scale)
    if not bf16: return v
    u = v.view(cp.uint32)
    return ((u + cp.uint32(0x7FFF) + ((u >> cp.uint32(16)) & cp.uint32(1))) >> cp.uint32(16)).astype(cp.uint16)
def hash64_int(x):
    m = (1 << 64) - 1; x = (x + H[0]) & m; x = ((x ^ (x >> 30)) * H[1]) & m; x = ((x ^ (x >> 27)) * H[2]) & m
    return x ^ (x >> 31)
import os
hashed = hashed_direct if os.environ.get("DIRECT") else hashed_temps
# DIRECT: allocate every final array first, then fill in place (arange temporaries only)
ep = hashed(V * R, 0.1, 11, True).reshape(V, R); en = hashed(V * R, 0.1, 12, True).reshape(V, R)
wh = hashed(R * E, 0.02, 13, True).reshape(R, E); hid = hashed(BLOCK * E, 1.0, 14, False).reshape(BLOCK, E)
lg = [hashed(BLOCK * V, 8.0, 100 + c * 7919, False).reshape(BLOCK, V) for c in range(COPIES)]
anc = cp.asarray([hash64_int(0) % V], dtype=cp.int32)
print("lib first:", bool(os.environ.get("LIB_FIRST")), "direct:", bool(os.environ.get("DIRECT")), "torch loaded:", sys.modules.get("torch") is not None, "first e_prev bits %x" % int(ep[0, 0]))
plan = dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=BLOCK, max_blocks=1,
                  e_prev=dfsel.typed(ep, "bf16"), e_next=dfsel.typed(en, "bf16"), w_h=dfsel.typed(wh, "bf16"))
out = plan.outputs(1, want=("path", "n_emitted"), framework="cupy")
st = cp.cuda.Stream(non_blocking=True)
for c in range(16): plan.run(lg[c % 8], hid, anc, out=out, stream=st)
st.synchronize()
st.begin_capture()
for c in range(16): plan.run(lg[c % 8], hid, anc, out=out, stream=st)
g = st.end_capture()
g.launch(st); st.synchronize()
for per in (1, 10, 1, 10):
    t = []
    for _ in range(50):
        a, b = cp.cuda.Event(), cp.cuda.Event()
        a.record(st)
        for _ in range(per): g.launch(st)
        b.record(st); b.synchronize()
        t.append(cp.cuda.get_elapsed_time(a, b) * 1000.0 / (16 * per))
    print("cupy graph, %2d replays a timing: median %.2f us (min %.2f)" % (per, statistics.median(t), min(t)), flush=True)
plan.check()
print("path", out.path.get()[0][:5], "n_emitted", int(out.n_emitted.get()[0]))
