"""dfsel.DSparkPlan keeps the rules dfsel.Plan keeps (test_run_rules.py, test_sweep.py): every
integer checked against its C field and every float against C's float, outputs checked against
the plan they are used with and not swappable, misaligned buffers refused by the library with
their names, and one plan called from two threads refused with BUSY, never mixed.
CI runs this file again over the sanitizer build of libdfsel.so."""
import threading

import numpy as np
import pytest

import dfsel
from dfsel import Status
from test_errors import raises
from test_run_rules import _hammer
from test_sweep import INT_EDGES, OTHER_TYPES, fits, misaligned, outcome

V, R, N, NB = 300, 32, 4, 2


def weights():
    rng = np.random.default_rng(6)
    return dict(w1=rng.standard_normal((V, R)).astype(np.float32), w2=rng.standard_normal((V, R)).astype(np.float32))


def make(**change):
    args = dict(n_vocab=V, markov_rank=R, n_draft=N, max_blocks=NB)
    args.update(weights())
    args.update(change)
    return dfsel.DSparkPlan(**args)


def run_inputs():
    rng = np.random.default_rng(7)
    return dict(logits=rng.standard_normal((NB * N, V)).astype(np.float32), anchors=np.array([3, 250], np.int32))


def sane(out, n_blocks):
    for b in range(n_blocks):
        n = int(out.n_emitted[b])
        assert 0 <= n <= N
        assert all(0 <= t < V for t in out.tokens[b, :n]) and all(t == -1 for t in out.tokens[b, n:])


PLAN_INTS = {"n_vocab": 63, "n_target_vocab": 63, "markov_rank": 31, "n_draft": 31, "max_blocks": 31, "rank": 31,
             "n_ranks": 31, "v_begin": 63, "v_end": 63, "n_threads": 31}


@pytest.mark.parametrize("name", sorted(PLAN_INTS))
def test_every_plan_integer(name):
    for v in INT_EDGES + OTHER_TYPES + [V - 1, V + 1, 64, 1025]:
        if name == "n_threads" and isinstance(v, int) and 64 < v <= 1024:
            continue  # as many threads as that: valid, only slow
        p = outcome(lambda: make(**{name: v}), name, not fits(v, PLAN_INTS[name]))
        if p is not None:
            out = outcome(lambda: p.run(**run_inputs()), "")
            if out is not None:
                sane(out, NB)


@pytest.mark.parametrize("name", ["logit_scale", "softcap", "conf_bias"])
def test_every_plan_float(name):
    for v in [float("nan"), float("inf"), -1.0, 0.0, 1e-45, 3.5e38, 1e300, 2, "1", None, object()]:
        p = outcome(lambda: make(**{name: v}), name)
        if p is not None:
            sane(p.run(**run_inputs()), NB)


@pytest.mark.parametrize("name", ["temperature", "p_min", "seed"])
def test_every_run_value(name):
    p = make()
    for v in INT_EDGES + OTHER_TYPES + [0.5, float("nan"), float("inf"), 1e39]:
        out = outcome(lambda: p.run(**run_inputs(), **{name: v}), name)
        if out is not None:
            sane(out, NB)


def test_misaligned_weights_and_inputs_are_refused_by_name():
    for name in ("w1", "w2"):
        with raises(Status.INVALID_ARGUMENT, name, "aligned"):
            make(**{name: misaligned(weights()[name], 2)})
    p = make()
    for name in ("logits", "anchors"):
        args = run_inputs()
        args[name] = misaligned(args[name], 2)
        with raises(Status.INVALID_ARGUMENT, name + " = ", "aligned") as e:
            p.run(**args)
        assert "inputs." not in e.value.message, e.value.message
        with raises(Status.INVALID_ARGUMENT, name + " = ", "aligned"):
            p.run(**args)


def test_outputs_of_a_plan_with_another_n_are_refused():
    p, other = make(), make(n_draft=N + 2)
    out = other.outputs(NB)
    before = out.tokens.copy()
    with raises(Status.INVALID_ARGUMENT, "out holds outputs for N = %d" % (N + 2), "this plan drafts N = %d" % N):
        p.run(**run_inputs(), out=out)
    assert np.array_equal(out.tokens, before), "out.tokens was written"


def test_output_fields_cannot_be_swapped_and_blocks_are_checked():
    p = make()
    out = p.outputs(NB)
    with pytest.raises(AttributeError):
        out.tokens = np.zeros((NB, N), np.int32)  # the library would still write the old array
    with pytest.raises(AttributeError):
        out.n_blocks = 100
    for n in (0, NB + 1, 2 ** 40, "2"):
        with raises(Status.INVALID_ARGUMENT, "n_blocks = %r" % (n,) if isinstance(n, str) else "n_blocks = %d" % n):
            p.outputs(n)


def test_a_plan_in_use_refuses_every_call():
    p = make()
    p._lock.acquire()  # as a call on another thread would hold it
    try:
        for call in (lambda: p.run(**run_inputs()), p.close,
                     lambda: dfsel.dspark_run_group([p], [run_inputs()["logits"]], [run_inputs()["anchors"]])):
            with raises(Status.BUSY, "in use by another call"):
                call()
    finally:
        p._lock.release()
    sane(p.run(**run_inputs()), NB)


def test_a_group_names_each_plan_once():
    p = make()
    args = run_inputs()
    with raises(Status.INVALID_ARGUMENT, "plans[0] and plans[1] are the same plan"):
        dfsel.dspark_run_group([p, p], [args["logits"]] * 2, [args["anchors"]] * 2)


@pytest.mark.parametrize("n_threads", [0, 1])
def test_one_plan_from_two_threads_is_refused_not_mixed(n_threads):
    p = make(n_threads=n_threads)
    args = run_inputs()
    want = p.run(**args).tokens.copy()
    outs = {}

    def run():
        out = outs.setdefault(threading.get_ident(), p.outputs(NB))
        p.run(**args, out=out)
        return np.array_equal(out.tokens, want)
    tally = _hammer(run)
    assert tally["wrong"] == 0 and tally["ok"] > 0 and tally["busy"] > 0, tally
