"""dfsel.DSparkPlan takes only what it can read as declared, and names the Python argument:
storage of another float type is never read as the type it is tagged with, flags are flags,
shapes are exact, output fields are known, a closed plan makes nothing, and the library's
refusals name the arguments the caller gave, not C fields. Also: extreme temperatures sample
the greedy limit, and a d2t changed after creation is caught where it is used.
CI runs this file again over the sanitizer build of libdfsel.so."""
import numpy as np
import pytest

import dfsel
from dfsel import Status
from selector_reference import to_q4_0
from test_errors import raises

V, R, N, NB, E = 300, 32, 4, 2, 24


def weights(seed=6):
    rng = np.random.default_rng(seed)
    return dict(w1=rng.standard_normal((V, R)).astype(np.float32), w2=rng.standard_normal((V, R)).astype(np.float32))


def make(**change):
    args = dict(n_vocab=V, markov_rank=R, n_draft=N, max_blocks=NB)
    args.update(weights())
    args.update(change)
    return dfsel.DSparkPlan(**args)


def logits(blocks=NB, rows=N):
    return np.random.default_rng(7).standard_normal((blocks * rows, V)).astype(np.float32)


ANCHORS = np.array([3, 250], np.int32)


def test_float16_storage_is_not_read_as_bf16():
    w = weights()
    w16 = w["w2"].astype(np.float16)
    with raises(Status.INVALID_ARGUMENT, "w2", "f16", "cannot be read as BF16"):
        make(w2=dfsel.typed(w16, "bf16"))
    with raises(Status.INVALID_ARGUMENT, "w1", "f16", "BF16"):
        make(w1=w["w1"].astype(np.float16), w2=w16, weight_dtype="bf16")
    with raises(Status.INVALID_ARGUMENT, "w2", "f32"):
        make(w2=dfsel.typed(w["w2"], "bf16"))
    p = make()
    with raises(Status.INVALID_ARGUMENT, "logits", "f16", "BF16"):
        p.run(logits().astype(np.float16), ANCHORS, logits_dtype="bf16")
    # Raw storage tagged, and storage tagged with its own type, are read.
    bits = (w["w2"].view(np.uint32) >> 16).astype(np.uint16)
    make(w2=dfsel.typed(bits, "bf16")).close()
    make(w2=dfsel.typed(w16, "f16")).close()
    p.close()


@pytest.mark.parametrize("flag", ["no", "yes", "", 2, -1, 0.5, None, [1]])
def test_sample_from_anchor_must_be_a_flag(flag):
    with raises(Status.INVALID_ARGUMENT, "sample_from_anchor = %r" % (flag,), "True or False"):
        make(sample_from_anchor=flag)


def test_sample_from_anchor_flags_are_taken():
    for flag, rows in ((True, N), (False, N + 1), (0, N + 1), (1, N), (np.bool_(False), N + 1)):
        with make(sample_from_anchor=flag) as p:
            assert p.rows_per_block == rows
            out = p.run(logits(rows=rows), ANCHORS)
            assert list(out.n_emitted) == [N, N]


def test_rows_must_match_the_anchors_exactly():
    with make() as p:
        # anchors for 2 blocks, rows for 4: refused, not 2 blocks drafted silently
        with raises(Status.INVALID_ARGUMENT, "logits has 16 rows", "len(anchors) * rows_per_block = 2 * 4 = 8"):
            p.run(logits(blocks=4), ANCHORS)
        with raises(Status.INVALID_ARGUMENT, "logits has 4 rows", "= 8"):
            p.run(logits(blocks=1), ANCHORS)
        p.run(logits(), ANCHORS)
    rng = np.random.default_rng(3)
    conf = rng.standard_normal(E + R).astype(np.float32)
    with make(conf_w=conf) as p:
        hidden = rng.standard_normal((4 * N, E)).astype(np.float32)
        with raises(Status.INVALID_ARGUMENT, "hidden has 16 rows", "= 8"):
            p.run(logits(), ANCHORS, hidden=hidden)
        p.run(logits(), ANCHORS, hidden=hidden[: NB * N])


def test_refusals_name_python_arguments():
    rng = np.random.default_rng(4)
    # conf_w shorter than markov_rank: n_embd would be negative
    with raises(Status.INVALID_ARGUMENT, "conf_w has shape (27,)", "markov_rank = 32") as e:
        make(conf_w=rng.standard_normal(R - 5).astype(np.float32))
    assert "config." not in e.value.message
    # A column of the right length was blamed on its element count (56, the count the head needs).
    with raises(Status.INVALID_ARGUMENT, "conf_w has shape (%d, 1)" % (E + R), "one row", "shape (%d,)" % (E + R)):
        make(conf_w=rng.standard_normal((E + R, 1)).astype(np.float32))
    with raises(Status.INVALID_ARGUMENT, "conf_w has shape (2, %d)" % (E + R), "one row"):
        make(conf_w=rng.standard_normal((2, E + R)).astype(np.float32))
    with make(conf_w=rng.standard_normal(E + R).astype(np.float32)) as p:
        with raises(Status.INVALID_ARGUMENT, "hidden is None", "confidence head") as e:
            p.run(logits(), ANCHORS)
        assert "inputs." not in e.value.message and ".data" not in e.value.message
        hidden = rng.standard_normal((NB * N, E + 1)).astype(np.float32)
        with raises(Status.INVALID_ARGUMENT, "hidden") as e:
            p.run(logits(), ANCHORS, hidden=hidden)
        assert "inputs." not in e.value.message and "ne[" not in e.value.message, e.value.message
    with make() as p:
        with raises(Status.INVALID_ARGUMENT, "anchors[1] = 300") as e:
            p.run(logits(), np.array([3, 300], np.int32))
        assert "inputs." not in e.value.message and "config." not in e.value.message, e.value.message
        with raises(Status.INVALID_ARGUMENT, "p_min = 0.5") as e:
            p.run(logits(), ANCHORS, p_min=0.5)
        assert "inputs." not in e.value.message, e.value.message
    with raises(Status.INVALID_ARGUMENT, "n_target_vocab") as e:
        make(n_target_vocab=V + 10)
    assert "config." not in e.value.message, e.value.message


@pytest.mark.parametrize("temperature", [1e-38, 1e-40, 1.4e-45])
def test_tiny_temperatures_sample_the_greedy_chain(temperature):
    with make() as p:
        greedy = p.run(logits(), ANCHORS)
        out = p.run(logits(), ANCHORS, temperature=temperature, seed=5)
        assert (out.tokens == greedy.tokens).all(), (out.tokens, greedy.tokens)
        assert (out.probs == 1.0).all(), out.probs


def test_d2t_changed_after_creation_is_caught():
    rng = np.random.default_rng(9)
    d2t = rng.permutation(V + 100)[:V].astype(np.int32)
    with make(n_target_vocab=V + 100, d2t=d2t, w1=rng.standard_normal((V + 100, R)).astype(np.float32)) as p:
        out = p.run(logits(), ANCHORS)
        chosen = int(out.draft_ids[0, 0])
        d2t[chosen] = 1 << 30  # the plan reads d2t in place
        with raises(Status.INVALID_ARGUMENT, "d2t maps draft id %d" % chosen, "outside [0, n_target_vocab = 400)",
                    "must not change"):
            p.run(logits(), ANCHORS)


def q4_0_weights(rows, cols, seed):
    """[rows, cols] random values as Q4_0 blocks held as uint8 [rows, cols / 32 * 18]."""
    return to_q4_0(np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32))[0]


def test_weight_dtype_is_w1_and_w2s_storage():
    """weight_dtype tags W1 and W2 (a draft's quantised tensors); the confidence head keeps its
    own type (a draft's conf_proj is F32): a quantised chain with a confidence head once needed
    each of W1 and W2 wrapped in dfsel.typed."""
    w1, w2 = q4_0_weights(V, R, 1), q4_0_weights(V, R, 2)
    conf = np.random.default_rng(3).standard_normal(E + R).astype(np.float32)
    hidden = np.random.default_rng(4).standard_normal((NB * N, E)).astype(np.float32)
    with make(w1=w1, w2=w2, conf_w=conf, weight_dtype="q4_0") as p, \
            make(w1=dfsel.typed(w1, "q4_0"), w2=dfsel.typed(w2, "q4_0"), conf_w=conf) as q:
        a = p.run(logits(), ANCHORS, hidden=hidden, p_min=0.3)
        b = q.run(logits(), ANCHORS, hidden=hidden, p_min=0.3)
        for name, arr in a.as_dict().items():
            assert arr.tobytes() == b.as_dict()[name].tobytes(), name
    # Raw conf_w storage is tagged by itself.
    bits = (conf.view(np.uint32) >> 16).astype(np.uint16)
    make(w1=w1, w2=w2, conf_w=dfsel.typed(bits, "bf16"), weight_dtype="q4_0").close()


def test_quantised_storage_is_named_by_its_elements():
    """A row of Q4_0 blocks held as uint8 has shape[1] bytes, not elements: the library's count of
    its elements is named as such (once "w1.shape[1] = 64" of an array whose shape[1] is 36)."""
    w1 = q4_0_weights(V, 64, 5)  # 64 elements a row, 36 bytes
    with raises(Status.INVALID_ARGUMENT, "w1's rows hold 64 Q4_0 elements (shape[1] = 36 bytes), expected 96") as e:
        make(w1=w1, w2=q4_0_weights(V, 96, 6), markov_rank=96, weight_dtype="q4_0")
    assert "shape[1] = 64" not in e.value.message, e.value.message
