"""dfsel.DSparkPlan on the CPU backend against the NumPy chain of dspark_reference.py: 1 to 3
ranks through dfsel.dspark_run_group, both layouts, with and without d2t, markov_w2.scale and a
confidence head with p_min, greedy and sampling, F32 / F16 / BF16 logits, F32 / F16 / BF16 /
Q8_0 weights; every rank's outputs bitwise the same; and bad arguments raise dfsel.Error."""
import os

import numpy as np
import pytest

import dfsel
from dfsel import Status
from dspark_reference import check_chain
from problems import split, store


def problem(rng, V=400, VT=None, R=32, N=4, blocks=2, E=0, from_anchor=True, scale=0, d2t=False):
    VT = VT or V
    rows = (N if from_anchor else N + 1) * blocks
    sigma = R ** -0.25
    pr = dict(N=N, from_anchor=from_anchor, conf_bias=0.25,
              z=rng.standard_normal((rows, V)), w1=rng.standard_normal((VT, R)) * sigma,
              w2=rng.standard_normal((V, R)) * sigma, h=rng.standard_normal((rows, max(E, 1))),
              scale=None, conf=None, d2t=None, anchors=rng.integers(0, VT, blocks).astype(np.int32))
    if scale:
        pr["scale"] = rng.uniform(0.5, 1.5, 1 if scale == 1 else V)
    if E:
        pr["conf"] = rng.standard_normal(E + R) / np.sqrt(E + R)
    if d2t:
        pr["d2t"] = rng.permutation(VT)[:V].astype(np.int32)
    return pr


def plans(pr, S, rng, wkind="f32", zkind="f32", **kw):
    """S plans over random ranges, the problem's values replaced by what the storage kinds hold."""
    V, R = pr["w2"].shape
    w1, pr["w1"] = store(pr["w1"], wkind)
    w2, pr["w2"] = store(pr["w2"], wkind)
    z, pr["z"] = store(pr["z"], zkind)
    pr["w1"], pr["w2"], pr["z"] = (np.asarray(a, dtype=np.float64) for a in (pr["w1"], pr["w2"], pr["z"]))
    conf = None if pr["conf"] is None else np.asarray(pr["conf"], dtype=np.float32)
    if conf is not None:
        pr["conf"] = conf.astype(np.float64)
    scale = None if pr["scale"] is None else np.asarray(pr["scale"], dtype=np.float32)
    if scale is not None:
        pr["scale"] = scale.astype(np.float64)
    hidden = pr["h"].astype(np.float32)
    pr["h"] = hidden.astype(np.float64)
    ranges = split(rng, V, S, 1)
    out = []
    for s in range(S):
        vb, ve = ranges[s]
        out.append(dfsel.DSparkPlan(
            n_vocab=V, n_target_vocab=pr["w1"].shape[0], markov_rank=R, n_draft=pr["N"], max_blocks=len(pr["anchors"]),
            w1=w1, w2=_rows(w2, vb, ve), w2_scale=None if scale is None else (scale if len(scale) == 1 else scale[vb:ve]),
            conf_w=conf, conf_bias=pr["conf_bias"], d2t=None if pr["d2t"] is None else pr["d2t"][vb:ve],
            sample_from_anchor=pr["from_anchor"], rank=s, n_ranks=S, v_begin=vb, v_end=ve, **kw))
    logits = [_cols(z, vb, ve) for vb, ve in ranges]
    return out, logits, (hidden if conf is not None else None)


def _rows(w, vb, ve):
    return dfsel.typed(w.array[vb:ve], w.type) if isinstance(w, dfsel.typed) else w[vb:ve]


def _cols(z, vb, ve):
    return dfsel.typed(z.array[:, vb:ve], z.type) if isinstance(z, dfsel.typed) else z[:, vb:ve]


CASES = [  # S, wkind, zkind, temperature, problem arguments
    (1, "f32", "f32", 0.0, dict()),
    (2, "f16", "f32", 0.0, dict(from_anchor=False, scale=2)),
    (3, "bf16", "bf16", 0.0, dict(d2t=True, VT=700, E=24)),
    (2, "q8_0", "f16", 0.8, dict(R=64, scale=1, E=16)),
    (3, "f32", "f32", 1.3, dict(d2t=True, VT=500, from_anchor=False)),
    (1, "bf16", "f32", 0.6, dict(E=40, V=900, N=6, blocks=3)),
]


def fresh_seed():
    """A new seed each run (DFSEL_TEST_SEED replays one), named in any failure."""
    env = os.environ.get("DFSEL_TEST_SEED")
    return int(env) if env else int(np.random.SeedSequence().entropy % 2 ** 32)


@pytest.mark.parametrize("S,wkind,zkind,temperature,args", CASES)
def test_chain_matches_numpy(S, wkind, zkind, temperature, args):
    seed = fresh_seed()
    try:
        rng = np.random.default_rng(seed)
        pr = problem(rng, **args)
        p_min = 0.45 if args.get("E") else 0.0
        ps, logits, hidden = plans(pr, S, rng, wkind, zkind)
        outs = dfsel.dspark_run_group(ps, logits, [pr["anchors"]] * S, hidden=None if hidden is None else [hidden] * S,
                                      temperature=temperature, p_min=p_min, seed=1234)
        for r, o in enumerate(outs[1:], 1):
            for name, arr in o.as_dict().items():
                assert arr.tobytes() == outs[0].as_dict()[name].tobytes(), "rank %d differs in %s" % (r, name)
        assert check_chain(pr, outs[0], temperature, p_min, 1234) > 0
    except AssertionError as e:
        raise AssertionError("DFSEL_TEST_SEED=%d: %s" % (seed, e)) from e


def test_one_plan_runs_and_reuses_its_outputs():
    rng = np.random.default_rng(5)
    pr = problem(rng)
    (plan,), (z,), _ = plans(pr, 1, rng)
    out = plan.outputs(want=("logits",))
    assert plan.run(z, pr["anchors"], out=out) is out
    assert out.probs is None and out.draft_ids is None
    assert check_chain(pr, out, 0.0, 0.0, 0) > 0


def raises(status, *words):
    ctx = pytest.raises(dfsel.Error)

    class Check:
        def __enter__(self):
            self.info = ctx.__enter__()

        def __exit__(self, *exc):
            handled = ctx.__exit__(*exc)
            e = self.info.value
            assert e.status == status, (e.status, e.message)
            for w in words:
                assert w in e.message, (w, e.message)
            return handled
    return Check()


def test_bad_arguments_raise_with_their_value():
    rng = np.random.default_rng(9)
    w1 = rng.standard_normal((100, 32)).astype(np.float32)
    args = dict(n_vocab=100, markov_rank=32, n_draft=3, max_blocks=2, w1=w1, w2=w1)
    with raises(Status.INVALID_ARGUMENT, "n_draft = 2147483648 does not fit the C field (int32_t"):
        dfsel.DSparkPlan(**dict(args, n_draft=2 ** 31))
    with raises(Status.INVALID_ARGUMENT, "[0, -1)"):
        dfsel.DSparkPlan(**dict(args, v_end=-1))
    with raises(Status.INVALID_ARGUMENT, "w1.shape[1] = 32, expected 16"):
        dfsel.DSparkPlan(**dict(args, markov_rank=16))
    with raises(Status.INVALID_ARGUMENT, "d2t has 99 elements; expected 100"):
        dfsel.DSparkPlan(**dict(args, n_target_vocab=200, d2t=np.zeros(99, np.int32)))
    with raises(Status.INVALID_ARGUMENT, "w2 has element type i32"):
        dfsel.DSparkPlan(**dict(args, w2=np.zeros((100, 32), np.int32)))
    plan = dfsel.DSparkPlan(**args)
    z = rng.standard_normal((6, 100)).astype(np.float32)
    with raises(Status.INVALID_ARGUMENT, "anchors[1] = 100"):
        plan.run(z, np.array([3, 100], np.int32))
    with raises(Status.INVALID_ARGUMENT, "p_min = 0.5 needs a confidence head"):
        plan.run(z, np.array([3, 4], np.int32), p_min=0.5)
    with raises(Status.INVALID_ARGUMENT, "seed = -1"):
        plan.run(z, np.array([3, 4], np.int32), seed=-1)
    with raises(Status.INVALID_ARGUMENT, "out.n_blocks = 1 holds fewer blocks"):
        plan.run(z, np.array([3, 4], np.int32), out=plan.outputs(1))
    plan.close()
    with raises(Status.INVALID_ARGUMENT, "the plan is closed"):
        plan.run(z, np.array([3, 4], np.int32))
