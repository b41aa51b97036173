"""dfsel.DSparkPlan on the CUDA backend from torch: every output bitwise the CPU backend's for
the same problem (1 to 3 ranks through dfsel.dspark_run_group, both layouts, d2t, scale, a
confidence head with p_min, greedy and sampling), a run captured in torch.cuda.graph and
replayed with new inputs, and a bad anchor reported by plan.check(). Skips without torch or a
GPU. The argument checks of a plan's placement (host or CUDA) run everywhere."""
import os

import numpy as np
import pytest

import dfsel
from dfsel import Status
from gpu_support import captured, torch_or_skip
from problems import split, to_bf16_bits

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
def test_cuda_plans_bitwise_the_cpu(torch, S, kw, temperature, p_min):
    seed = fresh_seed()
    rng = np.random.default_rng(seed)
    p = Problem(seed, **kw)
    ranges = split(rng, p.V, S, 1)
    what = "seed=%d ranges=%s" % (seed, ranges)
    logits, anchors, hidden = p.inputs(ranges)
    cpu = dfsel.dspark_run_group(p.plans(ranges), logits, anchors, hidden=hidden, temperature=temperature, p_min=p_min,
                                 seed=7)
    plans = p.plans(ranges, torch)
    assert all(x.backend == "cuda" and x.device == 0 for x in plans), what
    logits, anchors, hidden = p.inputs(ranges, torch)
    gpu = dfsel.dspark_run_group(plans, logits, anchors, hidden=hidden, temperature=temperature, p_min=p_min, seed=7)
    for x in plans:
        x.check()
    assert isinstance(gpu[0].tokens, torch.Tensor) and gpu[0].tokens.is_cuda, what
    for r in range(S):
        same_bits(gpu[r], cpu[0], what + " rank %d" % r)


def test_graph_capture_replays_new_inputs(torch):
    seed = fresh_seed()
    p = Problem(seed, V=8000, R=128, N=6, blocks=2, E=32, wkind="bf16")
    whole = [(0, p.V)]
    cpu_plan, = p.plans(whole)
    plan, = p.plans(whole, torch)
    logits, anchors, hidden = (x[0] for x in p.inputs(whole, torch))
    out = plan.outputs()
    graph, _ = captured(torch, lambda: plan.run(logits, anchors, hidden=hidden, p_min=0.3, out=out))
    for k in range(3):
        p.new_inputs(seed + 1 + k)
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
        want = cpu_plan.run(p.logits, p.anchors, hidden=p.hidden, p_min=0.3)
        same_bits(out, want, "seed=%d replay %d" % (seed, k))


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
