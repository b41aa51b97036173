"""dfsel.Plan takes only what it can read as declared and names the Python argument: the
library's refusals name the arguments the caller gave (n_embd, anchors[1], out[0].cand_ids,
hidden[1]), not C fields (config.n_embd, inputs.anchors[1], outputs.cand_ids); input rows are
exactly those of len(anchors) blocks; output fields are known; a closed plan makes nothing; the
ranks of an in-process group given different anchors or hidden rows are refused by name.
test_dspark_edges.py holds the same for dfsel.DSparkPlan."""
import numpy as np
import pytest

import dfsel
from dfsel import Status
from test_errors import inputs, make, raises, weights, B, E, K, R, V

C_NAMES = ("config.", "inputs.", "outputs.", "shard.", "ne[", "nb[", ".data")


def no_c_names(e):
    for w in C_NAMES:
        assert w not in e.value.message, "%r names the C field %r" % (e.value.message, w)


@pytest.mark.parametrize("change,words", [
    (dict(n_embd=-5), ["n_embd = -5"]),
    (dict(n_embd=E + 1), ["w_h.shape[1] = %d" % E, "%d" % (E + 1)]),
    (dict(top_k=1000), ["top_k = 1000"]),
    (dict(block_size=1), ["block_size = 1"]),
    (dict(rank=3, n_ranks=2), ["rank = 3"]),
    (dict(n_ranks=0), ["n_ranks = 0"]),
])
def test_creation_refusals_name_python_arguments(change, words):
    with raises(Status.INVALID_ARGUMENT, *words) as e:
        make(**change)
    no_c_names(e)


def test_run_refusals_name_python_arguments():
    logits, hidden, anchors = inputs()
    with make() as p:
        for kw, words in ((dict(anchors=np.array([1, V], np.int32)), ["anchors[1] = %d" % V]),
                          (dict(p_min=2.0), ["p_min = 2"]),
                          (dict(temperature=float("nan")), ["temperature = nan"])):
            args = dict(logits=logits, hidden=hidden, anchors=anchors)
            args.update(kw)
            with raises(Status.INVALID_ARGUMENT, *words) as e:
                p.run(args.pop("logits"), args.pop("hidden"), args.pop("anchors"), **args)
            no_c_names(e)
        p.run(logits, hidden, anchors)
    with make(top_k=8) as p:  # a packed row of n_embd = 32 cannot hold K + K*K = 72 values
        with raises(Status.INVALID_ARGUMENT, "out.packed needs n_embd >= K + K*K", "n_embd = %d" % E) as e:
            p.run(logits, hidden, anchors, packed=True)
        no_c_names(e)


def two_ranks(**kw):
    half = dict(n_ranks=2)
    half.update(kw)
    return make(rank=0, v_begin=0, v_end=128, **half), make(rank=1, v_begin=128, v_end=256, **half)


def test_group_refusals_name_python_arguments():
    logits, hidden, anchors = inputs()
    shards = [logits[:, :128], logits[:, 128:]]
    p0, p1 = two_ranks()
    q0, q1 = make(rank=0, v_begin=0, v_end=128, n_ranks=2), make(rank=1, v_begin=128, v_end=256, n_ranks=2,
                                                                  softcap=30.0)
    with raises(Status.INVALID_ARGUMENT, "plans[1] describes another selector", "softcap = 30") as e:
        dfsel.run_group([q0, q1], shards, [hidden] * 2, [anchors] * 2)
    no_c_names(e)
    out = p0.outputs()
    with raises(Status.INVALID_ARGUMENT, "out[0].", "out[1].") as e:
        dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors] * 2, out=[out, out])
    no_c_names(e)
    dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors] * 2)


def test_group_ranks_given_different_inputs_are_refused():
    logits, hidden, anchors = inputs()
    shards = [logits[:, :128], logits[:, 128:]]
    p0, p1 = two_ranks()
    other = anchors.copy()
    other[1] += 1
    with raises(Status.INVALID_ARGUMENT, "anchors[1][1] = %d differs from anchors[0][1] = %d" % (other[1], anchors[1]),
                "must be given the same anchors, hidden rows") as e:
        dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors, other])
    no_c_names(e)
    changed = hidden.copy()
    changed[B + 1, 3] += 1.0  # block 1, position 1: a row the gate reads
    with raises(Status.INVALID_ARGUMENT, "hidden[1] row %d (block 1, position 1) differs from hidden[0]" % (B + 1)) as e:
        dfsel.run_group([p0, p1], shards, [hidden, changed], [anchors] * 2)
    no_c_names(e)
    with raises(Status.INVALID_ARGUMENT, "hidden[1]'s type = F16 differs from hidden[0]'s type = F32") as e:
        dfsel.run_group([p0, p1], shards, [hidden, hidden.astype(np.float16)], [anchors] * 2)
    no_c_names(e)
    # Equal values in other arrays run, and the ranks agree.
    outs = dfsel.run_group([p0, p1], shards, [hidden, hidden.copy()], [anchors, anchors.copy()])
    assert outs[0].path.tobytes() == outs[1].path.tobytes()


def test_rows_must_match_the_anchors_exactly():
    logits, hidden, anchors = inputs(n_blocks=2)
    with make() as p:
        # anchors for 1 block, rows for 2: refused, not 1 block drafted silently
        with raises(Status.INVALID_ARGUMENT, "logits has shape (8, %d)" % V, "len(anchors) * block_size = 1 * 4"):
            p.run(logits, hidden[:B], anchors[:1])
        with raises(Status.INVALID_ARGUMENT, "hidden has shape (8, %d)" % E, "= (4, %d)" % E):
            p.run(logits[:B], hidden, anchors[:1])
        # The same arrays again take the path that only rewrites pointers: still checked.
        p.run(logits, hidden, anchors)
        with raises(Status.INVALID_ARGUMENT, "logits has 8 rows; expected len(anchors) * block_size = 1 * 4 = 4"):
            p.run(logits, hidden, anchors[:1])
        one = p.run(logits[:B], hidden[:B], anchors[:1])
        assert one.path.shape == (1, B - 1)


def test_float16_storage_is_not_read_as_bf16():
    w = weights()
    with raises(Status.INVALID_ARGUMENT, "e_prev", "f16", "cannot be read as BF16"):
        make(e_prev=dfsel.typed(w["e_prev"].astype(np.float16), "bf16"))
    with raises(Status.INVALID_ARGUMENT, "e_prev", "f16", "BF16"):
        make(**{k: v.astype(np.float16) for k, v in w.items()}, weight_dtype="bf16")
    logits, hidden, anchors = inputs()
    with make() as p:
        with raises(Status.INVALID_ARGUMENT, "hidden", "f16", "BF16"):
            p.run(logits, hidden.astype(np.float16), anchors, hidden_dtype="bf16")
        bits = (hidden.view(np.uint32) >> 16).astype(np.uint16)
        p.run(logits, dfsel.typed(bits, "bf16"), anchors)
