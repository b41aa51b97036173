"""A sweep of the Python package over every argument of Plan(), Plan.outputs(), Plan.run(),
Plan.check() and run_group(): values of other types, integers at and past their C field's
limits, arrays misaligned for their element type, outputs that share memory with the inputs or
with each other, shapes that do not fit the plan, and one plan called while another call holds
it. Each must end in a run whose outputs keep their promises or in a dfsel.Error that names the
argument; no other exception, no crash. CI runs this file again over the sanitizer build of
libdfsel.so (AddressSanitizer, UndefinedBehaviorSanitizer), where a read or write outside a
buffer is a report."""
import numpy as np
import pytest

import dfsel
from dfsel import Status

V, E, R, K, B, NB = 200, 96, 32, 4, 4, 2
OTHER_TYPES = ["7", 7.5, None, True, object(), [1], np.float32(2.0)]
INT_EDGES = [-(2 ** 64), -(2 ** 63) - 1, -(2 ** 31) - 1, -1, 0, 1, 2 ** 31, 2 ** 32 + 4, 2 ** 63, 2 ** 64]


def weights():
    rng = np.random.default_rng(3)
    return dict(e_prev=rng.standard_normal((V, R)).astype(np.float32), e_next=rng.standard_normal((V, R)).astype(np.float32),
                w_h=rng.standard_normal((R, E)).astype(np.float32))


def plan_args(**change):
    args = dict(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=B, max_blocks=NB)
    args.update(weights())
    args.update(change)
    return args


def run_inputs():
    rng = np.random.default_rng(4)
    return dict(logits=rng.standard_normal((NB * B, V)).astype(np.float32),
                hidden=rng.standard_normal((NB * B, E)).astype(np.float32), anchors=np.array([3, 150], np.int32))


def misaligned(a, shift):
    """a's values in memory that starts shift bytes past an aligned address."""
    raw = np.zeros(a.nbytes + 16, np.uint8)
    start = (-raw.ctypes.data) % 16 + shift
    view = raw[start:start + a.nbytes].view(a.dtype).reshape(a.shape)
    view[...] = a
    return view


def sane(p, out, n_blocks):
    L = p.n_drafted
    assert out.path.shape[1] == L
    for b in range(n_blocks):
        n = int(out.n_emitted[b])
        assert 0 <= n <= L
        assert all(0 <= t < p.n_vocab for t in out.path[b, :n]) and all(t == -1 for t in out.path[b, n:])


def outcome(call, name, strict=True):
    """Runs call(); a dfsel.Error must name the argument (strict), or at least be one that is
    no internal error (a value the C field holds may be refused through another argument it
    contradicts: n_vocab against e_prev's rows). Returns the result or None."""
    try:
        return call()
    except dfsel.Error as e:
        assert e.status != Status.INTERNAL_ERROR, e
        assert not strict or name in e.message, "%r not in %r" % (name, e.message)
        return None


PLAN_INTS = {"n_vocab": 63, "n_embd": 63, "codebook_rank": 31, "top_k": 31, "block_size": 31, "max_blocks": 31,
             "rank": 31, "n_ranks": 31, "v_begin": 63, "v_end": 63, "n_threads": 31, "device": 31}


def fits(v, bits):
    return isinstance(v, int) and not isinstance(v, bool) and -(2 ** bits) <= v < 2 ** bits


@pytest.mark.parametrize("name", sorted(PLAN_INTS))
def test_every_plan_integer(name):
    for v in INT_EDGES + OTHER_TYPES + [V - 1, V + 1, 64, 65, 1024, 1025]:
        if name == "n_threads" and isinstance(v, int) and 64 < v <= 1024:
            continue  # as many threads as that: valid, only slow
        p = outcome(lambda: dfsel.Plan(**plan_args(**{name: v})), name, not fits(v, PLAN_INTS[name]))
        if p is not None:
            out = outcome(lambda: p.run(**run_inputs()), "")
            if out is not None:
                sane(p, out, NB)


@pytest.mark.parametrize("name", ["logit_scale", "softcap"])
def test_every_plan_float(name):
    for v in [float("nan"), float("inf"), -1.0, 0.0, 1e-45, 3.5e38, 1e300, 2, "1", None, object()]:
        p = outcome(lambda: dfsel.Plan(**plan_args(**{name: v})), name)
        if p is not None:
            sane(p, p.run(**run_inputs()), NB)


@pytest.mark.parametrize("name", ["e_prev", "e_next", "w_h"])
def test_every_weight(name):
    w = weights()[name]
    for v in [w[:-1], w[:, :-1], w.astype(np.float64), w.T, w[::2], np.zeros((0, w.shape[1]), np.float32),
              misaligned(w, 1), misaligned(w, 2), w.reshape(-1), "w", None, dfsel.typed(w, "bf16")]:
        p = outcome(lambda: dfsel.Plan(**plan_args(**{name: v})), name)
        if p is not None:
            sane(p, p.run(**run_inputs()), NB)


@pytest.mark.parametrize("name", ["temperature", "p_min", "seed", "stream", "packed"])
def test_every_run_value(name):
    p = dfsel.Plan(**plan_args())
    for v in INT_EDGES + OTHER_TYPES + [0.5, float("nan"), float("inf"), 1e39]:
        out = outcome(lambda: p.run(**run_inputs(), **{name: v}), name)
        if out is not None:
            sane(p, out, NB)


@pytest.mark.parametrize("name", ["logits", "hidden", "anchors"])
def test_every_run_input(name):
    p = dfsel.Plan(**plan_args())
    a = run_inputs()[name]
    shapes = [a[:-1], a[..., :-1] if a.ndim == 2 else a[:1], a.astype(np.float64), a.astype(np.int64)]
    for v in shapes + [misaligned(a, 1), misaligned(a, 2), misaligned(a, 3), a[::-1], np.asfortranarray(a),
                       a[None], "x", None, 3]:
        args = run_inputs()
        args[name] = v
        out = outcome(lambda: p.run(**args), name)
        if out is not None:
            sane(p, out, int(args["anchors"].shape[0]))


FIELDS = {"cand_ids": ((NB * (B - 1), K), np.int32), "unary": ((NB * (B - 1), K), np.float32),
          "scores": ((NB * (B - 1), K, K), np.float32), "q": ((NB * (B - 1), K), np.float32),
          "path": ((NB, B - 1), np.int32), "n_emitted": ((NB,), np.int32), "packed": ((NB * B, E), np.float32)}


@pytest.mark.parametrize("field", sorted(FIELDS))
def test_every_output_array(field):
    p = dfsel.Plan(**plan_args())
    shape, dtype = FIELDS[field]
    good = np.zeros(shape, dtype)
    readonly = good.copy()
    readonly.flags.writeable = False
    bigger = tuple(n + 1 for n in shape)
    inputs = run_inputs()
    over_input = inputs["logits"].view(np.int32 if dtype == np.int32 else np.float32).reshape(-1)[:good.size]
    for v in [good, good[..., :-1], np.zeros(bigger, dtype)[tuple(slice(0, n) for n in shape)],
              good.astype(np.float64), good.astype(np.int64), misaligned(good, 1), misaligned(good, 2), readonly,
              np.asfortranarray(np.zeros(shape[::-1], dtype)).T if len(shape) > 1 else good[::1],
              over_input.reshape(shape), "x", 5]:
        out = outcome(lambda: p.outputs(NB, **{field: v}), "out.%s" % field)
        if out is None:
            continue
        res = outcome(lambda: p.run(**inputs, out=out, temperature=0.5, packed=True), "out.%s" % field)
        if res is not None:
            sane(p, res, NB)


def test_outputs_sharing_memory_with_each_other():
    p = dfsel.Plan(**plan_args())
    path = np.zeros((NB, B - 1), np.int32)
    # n_emitted inside path's memory: refused by the library, which names both.
    shared = dict(path=path, n_emitted=path.reshape(-1)[:NB])
    out = p.outputs(NB, **shared)
    with pytest.raises(dfsel.Error) as e:
        p.run(**run_inputs(), out=out)
    assert "out.path" in e.value.message and "out.n_emitted" in e.value.message


def test_outputs_and_blocks_against_the_plan():
    p = dfsel.Plan(**plan_args())
    for n in [v for v in INT_EDGES + OTHER_TYPES + [NB + 1] if v is not None and not (fits(v, 31) and 1 <= v <= NB)]:
        with pytest.raises(dfsel.Error) as e:
            p.outputs(n)
        assert "n_blocks" in e.value.message
    rng = np.random.default_rng(5)

    def inputs_for(q):
        n = NB * q.block_size
        return dict(logits=rng.standard_normal((n, V)).astype(np.float32),
                    hidden=rng.standard_normal((n, q.n_embd)).astype(np.float32), anchors=np.array([3, 9], np.int32))
    for change in [dict(top_k=K + 1), dict(block_size=B + 1), dict(w_h=weights()["w_h"][:, :64], n_embd=64)]:
        other = dfsel.Plan(**plan_args(**change))
        for q, o in ((other, p.outputs(NB)), (p, other.outputs(NB))):
            with pytest.raises(dfsel.Error) as e:
                q.run(**inputs_for(q), out=o)
            assert "out holds outputs" in e.value.message


def test_check_and_group_arguments():
    p = dfsel.Plan(**plan_args())
    for v in INT_EDGES + OTHER_TYPES:
        outcome(lambda: p.check(timeout_ms=v), "timeout_ms")
    inputs = run_inputs()
    for plans in ([p, p], [p, "p"], [], [p, None]):
        n = len(plans)
        outcome(lambda: dfsel.run_group(plans, [inputs["logits"]] * n, [inputs["hidden"]] * n,
                                        [inputs["anchors"]] * n), "plans")


def test_a_plan_in_use_refuses_every_call():
    p = dfsel.Plan(**plan_args())
    p._lock.acquire()  # as a call on another thread would hold it
    try:
        for call in (lambda: p.run(**run_inputs()), lambda: p.check(), p.close,
                     lambda: dfsel.run_group([p], *[[v] for v in run_inputs().values()])):
            with pytest.raises(dfsel.Error) as e:
                call()
            assert e.value.status == Status.BUSY
    finally:
        p._lock.release()
    sane(p, p.run(**run_inputs()), NB)
