"""What the package accepted before and should not have: outputs shaped for another plan
(the CPU backend wrote past them), read-only or swapped outputs, integers that ctypes
truncated, arguments a CPU plan has no use for, and one plan called from two threads at once
(a deadlock, or paths of the other call returned with success)."""
import threading

import numpy as np
import pytest

import dfsel
from dfsel import Status
from test_errors import B, E, K, R, V, inputs, make, raises


def test_outputs_of_a_plan_with_another_k_or_block_size_are_refused():
    logits, hidden, anchors = inputs()
    p = make(top_k=8, block_size=B)
    for other in (make(top_k=2), make(block_size=2), make(n_embd=E, top_k=K)):
        out = other.outputs(2, want=("cand_ids", "unary", "scores", "q"))
        if other._dims == p._dims:
            continue
        before = {f: a.copy() for f, a in out.as_dict().items()}
        with raises(Status.INVALID_ARGUMENT, "out holds outputs for", "this run needs outputs for K = 8"):
            p.run(logits, hidden, anchors, out=out, temperature=0.5)
        for f, a in out.as_dict().items():
            assert np.array_equal(a, before[f], equal_nan=True), "out.%s was written" % f


def test_read_only_outputs_are_refused():
    p = make()
    path = np.zeros((2, B - 1), np.int32)
    path.flags.writeable = False
    with raises(Status.INVALID_ARGUMENT, "out.path is read-only"):
        p.outputs(2, path=path)


def test_output_fields_cannot_be_swapped():
    out = make().outputs(2)
    with pytest.raises(AttributeError):
        out.path = np.zeros((2, B - 1), np.int32)  # the library would still write the old array
    with pytest.raises(AttributeError):
        out.n_blocks = 100


def test_outputs_beyond_max_blocks_are_refused():
    p = make()
    for n in (0, 3, 2 ** 40):
        with raises(Status.INVALID_ARGUMENT, "n_blocks = %d" % n):
            p.outputs(n)


@pytest.mark.parametrize("name,value", [
    ("codebook_rank", 2 ** 32 + R), ("top_k", 2 ** 32 + K), ("block_size", 2 ** 32 + B), ("max_blocks", 2 ** 32 + 2),
    ("rank", 2 ** 32), ("n_ranks", 2 ** 32 + 1), ("n_threads", 2 ** 32), ("v_begin", 2 ** 64),
    ("v_end", -(2 ** 64) + V), ("n_vocab", 2 ** 64 + V), ("n_embd", 2 ** 63), ("max_blocks", 2 ** 62),
])
def test_plan_integers_that_do_not_fit_their_c_field_are_refused(name, value):
    with raises(Status.INVALID_ARGUMENT, "%s = %d does not fit the C field" % (name, value)):
        make(**{name: value})


@pytest.mark.parametrize("name,value,words", [
    ("seed", 1.5, ["seed = 1.5 is not an integer"]),
    ("seed", 2 ** 64, ["seed = %d does not fit" % 2 ** 64]),
    ("seed", -1, ["seed = -1 does not fit"]),
    ("temperature", "hot", ["temperature = 'hot' is not a real number"]),
    ("p_min", 1e40, ["p_min = 1e+40 is beyond the range of a C float"]),
    ("stream", 12345, ["stream = 12345 on a CPU plan"]),
])
def test_run_values_are_checked_by_name(name, value, words):
    with raises(Status.INVALID_ARGUMENT, *words):
        make().run(*inputs(), **{name: value})


def test_arguments_a_cpu_plan_cannot_use_are_refused():
    with raises(Status.INVALID_ARGUMENT, "device = 3 but the weights are in host memory"):
        make(device=3)
    with raises(Status.INVALID_ARGUMENT, "timeout_ms = %d does not fit" % 2 ** 63):
        make().check(timeout_ms=2 ** 63)


def test_messages_name_the_cause():
    w = dict(e_prev=np.zeros((0, R), np.float32))
    with raises(Status.INVALID_ARGUMENT, "e_prev has shape (0, %d), which holds no element" % R):
        make(**w)


def _hammer(run, seconds=10):
    """Two threads call run() until both have succeeded and one was refused; returns
    (successes, refusals, wrong results)."""
    tally = {"ok": 0, "busy": 0, "wrong": 0}
    lock = threading.Lock()
    stop = threading.Event()

    def worker():
        mine = 0
        while not stop.is_set():
            try:
                good = run()
            except dfsel.Error as e:
                assert e.status == Status.BUSY, e
                assert "in use by another call" in e.message
                with lock:
                    tally["busy"] += 1
                continue
            mine += 1
            with lock:
                tally["ok"] += 1
                tally["wrong"] += 0 if good else 1
                if mine >= 20 and tally["busy"] > 0:
                    return

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(seconds)
    stop.set()
    for t in threads:
        t.join(60)
        assert not t.is_alive(), "a call never returned: a deadlock"
    return tally


@pytest.mark.parametrize("n_threads", [0, 1])
def test_one_plan_from_two_threads_is_refused_not_mixed(n_threads):
    p = make(n_threads=n_threads)
    logits, hidden, anchors = inputs()
    want = p.run(logits, hidden, anchors).path.copy()
    outs = {}

    def run():
        out = outs.setdefault(threading.get_ident(), p.outputs(2))
        p.run(logits, hidden, anchors, out=out)
        return np.array_equal(out.path, want)
    tally = _hammer(run)
    assert tally["wrong"] == 0 and tally["ok"] > 0 and tally["busy"] > 0, tally


def test_two_plans_on_two_threads_both_work():
    plans = [make(), make()]
    logits, hidden, anchors = inputs()
    want = plans[0].run(logits, hidden, anchors).path.copy()
    errors = []

    def worker(p):
        try:
            for _ in range(30):
                assert np.array_equal(p.run(logits, hidden, anchors).path, want)
        except Exception as e:  # reported on the main thread
            errors.append(e)
    threads = [threading.Thread(target=worker, args=(p,)) for p in plans]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors


def test_a_group_with_a_plan_in_use_is_refused_and_claims_nothing():
    p0, p1 = make(rank=0, n_ranks=2, v_end=128), make(rank=1, n_ranks=2, v_begin=128)
    logits, hidden, anchors = inputs()
    shards = [logits[:, :128], logits[:, 128:]]
    p1._lock.acquire()  # as a call on another thread holds it
    try:
        with raises(Status.BUSY, "in use by another call"):
            dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors] * 2)
    finally:
        p1._lock.release()
    outs = dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors] * 2)
    assert outs[0].path.tobytes() == outs[1].path.tobytes()
