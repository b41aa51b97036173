"""dfsel.DSparkPlan on the CUDA backend from torch against the CPU backend for the same problem
(1 to 3 ranks through dfsel.dspark_run_group, both layouts, d2t, scale, a confidence head with
p_min, greedy and sampling), a run captured in torch.cuda.graph and replayed with new inputs
(bitwise a plain run), and a bad anchor reported by plan.check(). A CUDA plan computes
W2[v] . e in eight chains, or on tensor cores where W2 is BF16, R a multiple of 32 up to 256
and the plan may run two blocks or more
(DFSEL_DSPARK_PRODUCT): with DFSEL_DSPARK_PRODUCT=chains every output is bitwise the CPU
backend's; with the tensor-core product (the default there) the tokens are the CPU backend's but
past a near-tie and the scores within tolerance (close_to_cpu), every rank bitwise the same.
Skips without torch or a GPU. The argument checks of a plan's placement (host or CUDA) run
everywhere."""
import contextlib
import os

import numpy as np
import pytest

import dfsel
from dfsel import Status
from dspark_reference import gumbel
from gpu_support import captured, torch_or_skip
from problems import from_bf16_bits, split, to_bf16_bits

FIELDS = ("tokens", "n_emitted", "draft_ids", "logits", "probs", "log_norm", "confidence")


def fresh_seed():
    """A new seed each run (DFSEL_TEST_SEED replays one), named in any failure."""
    v = os.environ.get("DFSEL_TEST_SEED")
    return int(v) if v else int.from_bytes(os.urandom(8), "little")


class Problem:
    """A DSpark draft and one chain's inputs as NumPy arrays (weights F32, F16 or BF16 bits)."""

    def __init__(self, seed, V=3000, VT=None, R=64, N=5, blocks=3, E=0, from_anchor=True, scale=0, d2t=False,
                 wkind="f32"):
        rng = np.random.default_rng(seed)
        self.V, self.VT, self.R, self.N, self.blocks, self.E = V, VT or V, R, N, blocks, E
        self.from_anchor, self.wkind = from_anchor, wkind
        self.rows = (N if from_anchor else N + 1) * blocks
        sigma = R ** -0.25
        self.w1 = self._store(rng.standard_normal((self.VT, R)) * sigma)
        self.w2 = self._store(rng.standard_normal((V, R)) * sigma)
        self.scale = None if not scale else rng.uniform(0.5, 1.5, 1 if scale == 1 else V).astype(np.float32)
        self.conf = None if not E else (rng.standard_normal(E + R) / np.sqrt(E + R)).astype(np.float32)
        self.d2t = rng.permutation(self.VT)[:V].astype(np.int32) if d2t else None
        self.new_inputs(rng.integers(1 << 62))

    def _store(self, x):
        if self.wkind == "bf16":
            return to_bf16_bits(x.astype(np.float32))
        return x.astype(np.float16 if self.wkind == "f16" else np.float32)

    def new_inputs(self, seed):
        rng = np.random.default_rng(seed)
        self.logits = rng.standard_normal((self.rows, self.V)).astype(np.float32)
        self.hidden = rng.standard_normal((self.rows, max(self.E, 1))).astype(np.float32) if self.E else None
        self.anchors = rng.integers(0, self.VT, self.blocks).astype(np.int32)

    def values(self, a):
        """The float64 values of stored weights a."""
        return (from_bf16_bits(a) if self.wkind == "bf16" else a).astype(np.float64)

    def near_tie(self, b, k, prev, temperature, seed, tol):
        """Whether step k of block b, after token prev, has its two best keys (l, or l / T plus
        the Gumbel noise when sampling) within tol of each other in double precision."""
        row = b * (self.N if self.from_anchor else self.N + 1) + (k - 1 if self.from_anchor else k)
        bias = self.values(self.w2) @ self.values(self.w1)[prev]
        if self.scale is not None:
            bias = bias * self.scale.astype(np.float64)
        l = self.logits[row].astype(np.float64) + bias
        key = l / temperature + gumbel(seed, b, k, np.arange(self.V)) if temperature > 0 else l
        second, best = np.sort(key)[-2:]
        return best - second <= tol * (1 + abs(best))

    def weight(self, a, on):
        """a as the plan is given it: NumPy (on = None) or a CUDA torch tensor, BF16 bits typed."""
        if on is not None:
            a = on.from_numpy(a.view(np.int16) if a.dtype == np.uint16 else a).cuda()
        return dfsel.typed(a, "bf16") if self.wkind == "bf16" else a

    def plans(self, ranges, on=None, **kw):
        """One plan per range: host arrays (CPU backend), or CUDA tensors when on is torch."""
        w = lambda a: self.weight(a, on)  # noqa: E731
        arr = lambda a: None if a is None else (a if on is None else on.from_numpy(a).cuda())  # noqa: E731
        out = []
        for s, (vb, ve) in enumerate(ranges):
            scale = None if self.scale is None else (self.scale if len(self.scale) == 1 else self.scale[vb:ve])
            out.append(dfsel.DSparkPlan(
                n_vocab=self.V, n_target_vocab=self.VT, markov_rank=self.R, n_draft=self.N, max_blocks=self.blocks,
                w1=w(self.w1), w2=w(np.ascontiguousarray(self.w2[vb:ve])), w2_scale=arr(scale), conf_w=arr(self.conf),
                conf_bias=0.25, d2t=arr(None if self.d2t is None else self.d2t[vb:ve]),
                sample_from_anchor=self.from_anchor, rank=s, n_ranks=len(ranges), v_begin=vb, v_end=ve, **kw))
        return out

    def inputs(self, ranges, on=None):
        arr = lambda a: a if on is None else on.from_numpy(np.ascontiguousarray(a)).cuda()  # noqa: E731
        logits = [arr(self.logits[:, vb:ve]) for vb, ve in ranges]
        return logits, [arr(self.anchors)] * len(ranges), None if self.hidden is None else [arr(self.hidden)] * len(ranges)


def host(x):
    return None if x is None else (x.cpu().numpy() if hasattr(x, "cpu") else np.asarray(x))


def same_bits(gpu, cpu, what):
    for f in FIELDS:
        a, b = host(getattr(gpu, f)), host(getattr(cpu, f))
        assert (a is None) == (b is None), "%s: %s present on one backend only" % (what, f)
        if a is not None:
            assert a.shape == b.shape and a.tobytes() == b.tobytes(), "%s: %s differs" % (what, f)


def close_to_cpu(p, gpu, cpu, temperature, p_min, seed, what, tol=1e-4):
    """The tensor-core product, whose sums round otherwise than the CPU backend's: in each block
    the tokens are the CPU backend's up to the first that differs, where the step must be a
    near-tie (Problem.near_tie; or, for a stop, a confidence within tol of p_min) and the rest of
    the block is not compared; the scores of the steps compared lie within tol of the CPU's
    (relative to 1 + their size). At least 90% of the steps the CPU run reached must be compared,
    so that near-ties cannot leave the check empty. Returns the steps compared."""
    g = {f: host(getattr(gpu, f)) for f in FIELDS}
    c = {f: host(getattr(cpu, f)) for f in FIELDS}
    compared = reached = 0
    for b in range(p.blocks):
        reached += min(p.N, int(c["n_emitted"][b]) + 1)
        prev = int(p.anchors[b])
        for k in range(1, p.N + 1):
            at = (b, k - 1)
            if c["confidence"] is not None:
                assert abs(g["confidence"][at] - c["confidence"][at]) <= tol, "%s: confidence %s" % (what, at)
            if g["tokens"][at] != c["tokens"][at]:
                if -1 in (g["tokens"][at], c["tokens"][at]):
                    near = c["confidence"] is not None and abs(c["confidence"][at] - p_min) <= tol
                    assert near, "%s: a stop at %s on one backend only" % (what, at)
                else:
                    assert p.near_tie(b, k, prev, temperature, seed, tol), "%s: token at %s, no near-tie" % (what, at)
                break
            compared += 1
            if c["tokens"][at] == -1:
                break
            assert g["draft_ids"][at] == c["draft_ids"][at], "%s: draft id at %s" % (what, at)
            for f in ("logits", "probs", "log_norm"):
                x, want = float(g[f][at]), float(c[f][at])
                assert abs(x - want) <= tol * (1 + abs(want)), "%s: %s at %s: %r, CPU %r" % (what, f, at, x, want)
            prev = int(c["tokens"][at])
        else:
            assert g["n_emitted"][b] == c["n_emitted"][b], "%s: n_emitted[%d]" % (what, b)
    assert compared >= 0.9 * reached, "%s: %d of %d steps compared" % (what, compared, reached)
    return compared


def products(p):
    """The products a CUDA plan of p is checked with: "chains" always, and "default" when that is
    the tensor-core product (BF16 W2, R a multiple of 32 up to 256, two blocks or more unless
    DFSEL_DSPARK_PRODUCT is mma; never when it is chains)."""
    product = os.environ.get("DFSEL_DSPARK_PRODUCT")
    mma = (product != "chains" and p.wkind == "bf16" and p.R % 32 == 0 and p.R <= 256
           and (p.blocks >= 2 or product == "mma"))
    return ("chains", "default") if mma else ("chains",)


@contextlib.contextmanager
def product(monkeypatch, which):
    """For the plans made in the block: DFSEL_DSPARK_PRODUCT=chains, or the environment as it is."""
    with monkeypatch.context() as m:
        if which == "chains":
            m.setenv("DFSEL_DSPARK_PRODUCT", "chains")
        yield


@pytest.fixture(scope="module")
def torch():
    return torch_or_skip()


CASES = [  # ranks, problem arguments, temperature, p_min
    (1, dict(), 0.0, 0.0),
    (2, dict(wkind="f16", from_anchor=False, scale=2), 0.0, 0.0),
    (3, dict(wkind="bf16", d2t=True, VT=3500, E=24), 0.0, 0.3),
    (2, dict(wkind="bf16", R=256, V=20000, N=7, blocks=8, scale=1), 0.8, 0.0),
    (3, dict(d2t=True, VT=4000, from_anchor=False, E=16), 1.3, 0.25),
]


@pytest.mark.parametrize("S,kw,temperature,p_min", CASES)
def test_cuda_plans_match_the_cpu(torch, monkeypatch, S, kw, temperature, p_min):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    p = Problem(seed, **kw)
    ranges = split(rng, p.V, S, 1)
    logits, anchors, hidden = p.inputs(ranges)
    cpu = dfsel.dspark_run_group(p.plans(ranges), logits, anchors, hidden=hidden, temperature=temperature, p_min=p_min,
                                 seed=7)
    for which in products(p):
        what = "seed=%d ranges=%s product=%s" % (seed, ranges, which)
        with product(monkeypatch, which):
            plans = p.plans(ranges, torch)
        assert all(x.backend == "cuda" and x.device == 0 for x in plans), what
        logits, anchors, hidden = p.inputs(ranges, torch)
        gpu = dfsel.dspark_run_group(plans, logits, anchors, hidden=hidden, temperature=temperature, p_min=p_min,
                                     seed=7)
        for x in plans:
            x.check()
        assert isinstance(gpu[0].tokens, torch.Tensor) and gpu[0].tokens.is_cuda, what
        for r in range(S):
            same_bits(gpu[r], gpu[0] if which == "default" else cpu[0], what + " rank %d" % r)
        if which == "default":
            close_to_cpu(p, gpu[0], cpu[0], temperature, p_min, 7, what)


def test_graph_capture_replays_new_inputs(torch, monkeypatch):
    seed = fresh_seed()
    p = Problem(seed, V=8000, R=128, N=6, blocks=2, E=32, wkind="bf16")
    whole = [(0, p.V)]
    cpu_plan, = p.plans(whole)
    for n, which in enumerate(products(p)):
        with product(monkeypatch, which):
            plan, = p.plans(whole, torch)
        logits, anchors, hidden = (x[0] for x in p.inputs(whole, torch))
        out = plan.outputs()
        graph, _ = captured(torch, lambda: plan.run(logits, anchors, hidden=hidden, p_min=0.3, out=out))
        for k in range(3):
            what = "seed=%d product=%s replay %d" % (seed, which, k)
            p.new_inputs(seed + 1 + 3 * n + k)
            l2, a2, h2 = (x[0] for x in p.inputs(whole, torch))
            logits.copy_(l2)
            anchors.copy_(a2)
            hidden.copy_(h2)
            for f in FIELDS:
                if getattr(out, f) is not None:
                    getattr(out, f).view(torch.int32).fill_(-1)  # poison: -1 ids, NaN floats
            graph.replay()
            plan.check()
            torch.cuda.synchronize()
            same_bits(out, plan.run(l2, a2, hidden=h2, p_min=0.3), what + ": against a plain run")
            plan.check()
            want = cpu_plan.run(p.logits, p.anchors, hidden=p.hidden, p_min=0.3)
            if which == "chains":
                same_bits(out, want, what)
            else:
                close_to_cpu(p, out, want, 0.0, 0.3, 0, what)
        del graph  # before its plan goes


def test_product_switch_is_checked_at_creation(torch, monkeypatch):
    """DFSEL_DSPARK_PRODUCT is read when a CUDA plan is made: a bad value is refused naming it, and
    mma is refused on an F32 W2, which the tensor cores do not take."""
    p = Problem(1, V=500, R=64, N=3, blocks=2)
    monkeypatch.setenv("DFSEL_DSPARK_PRODUCT", "tensor")
    with pytest.raises(dfsel.Error) as e:
        p.plans([(0, p.V)], torch)
    assert e.value.status == Status.INVALID_ARGUMENT and "DFSEL_DSPARK_PRODUCT" in e.value.message, e.value.message
    monkeypatch.setenv("DFSEL_DSPARK_PRODUCT", "mma")  # an F32 W2: the chains only
    with pytest.raises(dfsel.Error) as e:
        p.plans([(0, p.V)], torch)
    assert e.value.status == Status.UNSUPPORTED, e.value.message


def test_bad_anchor_is_reported_by_check(torch):
    seed = fresh_seed()
    p = Problem(seed, V=2000, blocks=3)
    plan, = p.plans([(0, p.V)], torch)
    logits, anchors, _ = p.inputs([(0, p.V)], torch)  # no confidence head: no hidden
    logits, anchors = logits[0], anchors[0]
    anchors[1] = p.VT
    out = plan.run(logits, anchors)
    with pytest.raises(dfsel.Error) as e:
        plan.check()
    assert e.value.status == Status.INVALID_ARGUMENT and "anchors[1] = %d" % p.VT in e.value.message and "inputs." not in e.value.message, seed
    assert int(out.n_emitted[1]) == 0 and bool((out.tokens[1] == -1).all()), seed


# -- placement checks: no GPU needed ------------------------------------------------------

def _host_args():
    p = Problem(1, V=200, R=16, N=2, blocks=1)
    return dict(n_vocab=p.V, markov_rank=p.R, n_draft=p.N, max_blocks=1, w1=p.w1, w2=p.w2), p


def test_host_weights_refuse_cuda_backend_and_device():
    args, _ = _host_args()
    with pytest.raises(dfsel.Error, match="backend = cuda but w1 is in host memory"):
        dfsel.DSparkPlan(backend="cuda", **args)
    with pytest.raises(dfsel.Error, match="device = 0 but the weights are in host memory"):
        dfsel.DSparkPlan(device=0, **args)


def test_cpu_plan_refuses_a_stream():
    args, p = _host_args()
    plan = dfsel.DSparkPlan(**args)
    assert plan.backend == "cpu" and plan.device is None
    with pytest.raises(dfsel.Error, match="stream = 5 on a CPU plan"):
        plan.run(p.logits, p.anchors, stream=5)
    out = plan.run(p.logits, p.anchors)
    assert out.device == ("cpu", -1) and isinstance(out.tokens, np.ndarray)
    plan.check()  # a CPU run has finished when it returns
