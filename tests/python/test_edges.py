"""Edges the C suite covers too, reached from Python: plans across os.fork() (a child runs its
parent's plan on its own thread and closes it; the parent's plan is unaffected; a child that
leaves its plans to the interpreter's exit ends), handles that are no live plan of the kind a
call expects, non-finite DSpark scalars, and outputs() of either plan kind (the fields it is
asked for, a closed plan), copies and pickles of a plan (refused: a copy would share, and one
day destroy, the plan's library handle). Every child is bounded by a timeout, so that a
hang fails the test."""
import copy
import os
import pickle
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import dfsel
from dfsel import Status
from test_errors import raises

V, E, R, K, B, N = 512, 32, 32, 4, 4, 3
THREADS = 4  # workers exist whatever the machine's core count
CHILD_SECONDS = 60


def selector_plan():
    rng = np.random.default_rng(1)
    return dfsel.Plan(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=B, max_blocks=2, backend="cpu",
                      e_prev=rng.standard_normal((V, R)).astype(np.float32),
                      e_next=rng.standard_normal((V, R)).astype(np.float32),
                      w_h=rng.standard_normal((R, E)).astype(np.float32), n_threads=THREADS)


def selector_run(plan):
    rng = np.random.default_rng(2)
    out = plan.run(rng.standard_normal((2 * B, V)).astype(np.float32), rng.standard_normal((2 * B, E)).astype(np.float32),
                   np.array([5, 9], dtype=np.int32))
    return [np.array(out.path), np.array(out.cand_ids)]


def dspark_plan(**kw):
    rng = np.random.default_rng(3)
    args = dict(n_vocab=V, markov_rank=R, n_draft=N, max_blocks=2, backend="cpu", n_threads=THREADS,
                w1=rng.standard_normal((V, R)).astype(np.float32), w2=rng.standard_normal((V, R)).astype(np.float32))
    args.update(kw)
    return dfsel.DSparkPlan(**args)


def dspark_run(plan):
    rng = np.random.default_rng(4)
    out = plan.run(rng.standard_normal((2 * N, V)).astype(np.float32), np.array([7, 11], dtype=np.int32))
    return [np.array(out.tokens)]


def same(a, b):
    return len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))


def wait_child(pid):
    """The child's exit status, or a failure after CHILD_SECONDS (the child killed)."""
    deadline = time.monotonic() + CHILD_SECONDS
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return status
        time.sleep(0.02)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail("the child hung (killed after %d s)" % CHILD_SECONDS)


# Not under AddressSanitizer (the CI's asan stage preloads it): its allocator (GCC 12's runtime)
# takes no lock around fork(), so a child whose parent had another thread inside malloc or free
# can block in its first free (seen: Python's finalizers in a child at exit, stuck in the
# allocator's mutex). tests/fork_plan_test.cpp skips its fork-while-running case the same way.
under_asan = pytest.mark.skipif("libasan" in os.environ.get("LD_PRELOAD", ""),
                                reason="the AddressSanitizer allocator is not fork-safe while other threads allocate")


def in_children(n, body):
    """body(i) in n forked children at once; each exits 0 when body returns True."""
    pids = []
    for i in range(n):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if body(i) else 2
            except BaseException:
                code = 3
            finally:
                os._exit(code)
        pids.append(pid)
    return [wait_child(pid) for pid in pids]


@under_asan
@pytest.mark.parametrize("kind", ["selector", "dspark"])
def test_a_plan_runs_and_closes_in_forked_children(kind):
    plan = selector_plan() if kind == "selector" else dspark_plan()
    run = selector_run if kind == "selector" else dspark_run
    first = run(plan)

    def child(i):
        if i % 2 == 0:  # half the children run first, half only close
            again = run(plan)
            if not same(again, first):
                return False
        plan.close()
        return True

    statuses = in_children(6, child)
    assert statuses == [0] * 6, "children's exit statuses %r" % (statuses,)
    again = run(plan)
    assert same(again, first)
    plan.close()


@under_asan
def test_a_child_leaves_its_plans_to_the_interpreter_exit():
    """A forked child that exits normally: the plans' finalizers destroy them at exit."""
    script = textwrap.dedent("""
        import os, sys
        sys.path[:0] = %r
        import test_edges as t
        plans = [t.selector_plan(), t.dspark_plan()]
        t.selector_run(plans[0]); t.dspark_run(plans[1])
        pid = os.fork()
        if pid == 0:
            sys.exit(0)  # the interpreter's exit, finalizers and all
        _, status = os.waitpid(pid, 0)
        sys.exit(0 if status == 0 else 1)
    """ % ([os.path.dirname(os.path.abspath(__file__))] + sys.path,))
    r = subprocess.run([sys.executable, "-c", script], timeout=CHILD_SECONDS, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_a_handle_that_is_no_live_plan_of_the_kind_is_refused():
    lib = dfsel._loader.library()
    selector, chain = selector_plan(), dspark_plan()
    # The library's own answer, below the package's checks: the other kind's handle is not read.
    assert lib.dfsel_plan_destroy(chain._ptr) == Status.INVALID_ARGUMENT
    assert lib.dfsel_dspark_plan_destroy(selector._ptr) == Status.INVALID_ARGUMENT
    assert b"DSpark plan" in lib.dfsel_plan_last_error(chain._ptr)
    gone = selector._ptr
    selector.close()
    assert lib.dfsel_plan_destroy(gone) == Status.INVALID_ARGUMENT
    assert lib.dfsel_plan_wait(gone, None, 0) == Status.INVALID_ARGUMENT
    assert b"not a live plan" in lib.dfsel_plan_last_error(gone)
    dspark_run(chain)  # the live plan is untouched
    chain.close()


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_dspark_scalars_are_refused(bad):
    rng = np.random.default_rng(5)
    scale = np.ones(V, dtype=np.float32)
    scale[9] = bad
    with pytest.raises(dfsel.Error) as e:
        dspark_plan(w2_scale=scale)
    assert e.value.status == Status.INVALID_ARGUMENT and "w2_scale[9]" in e.value.message
    conf = rng.standard_normal(E + R).astype(np.float32)
    conf[3] = bad
    with pytest.raises(dfsel.Error) as e:
        dspark_plan(conf_w=conf)
    assert e.value.status == Status.INVALID_ARGUMENT and "conf_w[3]" in e.value.message


# outputs(want=...) of either kind: a name that is no field, or one bare string, is refused;
# known names give exactly those optional fields.
@pytest.mark.parametrize("kind, fields, field, other", [("selector", "cand_ids", "q", "scores"),
                                                        ("dspark", "draft_ids", "probs", "logits")])
def test_outputs_want_names_known_fields(kind, fields, field, other):
    with (selector_plan() if kind == "selector" else dspark_plan()) as p:
        with raises(Status.INVALID_ARGUMENT, "'foo'", fields):
            p.outputs(want=("foo",))
        with raises(Status.INVALID_ARGUMENT, "want = %r" % field):
            p.outputs(want=field)
        out = p.outputs(want=(field,))
        assert getattr(out, field) is not None and getattr(out, other) is None


@pytest.mark.parametrize("kind", ["selector", "dspark"])
def test_outputs_of_a_closed_plan_are_refused(kind):
    p = selector_plan() if kind == "selector" else dspark_plan()
    p.close()
    with raises(Status.INVALID_ARGUMENT, "closed"):
        p.outputs()
    with raises(Status.INVALID_ARGUMENT, "closed"):
        p.outputs(1, want=())


# A copy shared the library handle: when it was collected it destroyed the original's plan, and a
# later plan made at the same address was then run (and destroyed) through the stale original.
@pytest.mark.parametrize("kind", ["selector", "dspark"])
def test_a_plan_cannot_be_copied_or_pickled(kind):
    plan, run = (selector_plan(), selector_run) if kind == "selector" else (dspark_plan(), dspark_run)
    before = run(plan)
    for how in (copy.copy, copy.deepcopy, pickle.dumps, lambda p: pickle.dumps(p, protocol=0)):
        with pytest.raises(TypeError) as e:
            how(plan)
        assert "dfsel.%s cannot be copied or pickled" % type(plan).__name__ in str(e.value)
    assert same(run(plan), before)
    plan.close()


# Both kinds word a run of a closed plan alike, alone or in a group.
@pytest.mark.parametrize("kind", ["selector", "dspark"])
def test_a_closed_plan_runs_nothing_in_one_wording(kind):
    plan, run = (selector_plan(), selector_run) if kind == "selector" else (dspark_plan(), dspark_run)
    plan.close()
    with raises(Status.INVALID_ARGUMENT, "the plan is closed"):
        run(plan)
    with raises(Status.INVALID_ARGUMENT, "the plan is closed"):
        plan.check()
