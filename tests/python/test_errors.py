"""Every failure of the wrappers raises dfsel.Error with a status and a message that names the
argument; failures the library finds carry the library's message (checked here for the
argument and value it names, not for its wording, which is the library's to change)."""
import ctypes
import types

import numpy as np
import pytest

import dfsel
from dfsel import Status

V, E, R, K, B = 256, 32, 32, 4, 4


def weights(dtype=np.float32):
    rng = np.random.default_rng(1)
    return dict(e_prev=rng.standard_normal((V, R)).astype(dtype), e_next=rng.standard_normal((V, R)).astype(dtype),
                w_h=rng.standard_normal((R, E)).astype(dtype))


def make(**kw):
    args = dict(n_vocab=V, n_embd=E, codebook_rank=R, top_k=K, block_size=B, max_blocks=2)
    args.update(weights())
    args.update(kw)
    return dfsel.Plan(**args)


def inputs(n_blocks=2):
    rng = np.random.default_rng(2)
    return (rng.standard_normal((n_blocks * B, V)).astype(np.float32),
            rng.standard_normal((n_blocks * B, E)).astype(np.float32),
            np.arange(n_blocks, dtype=np.int32) + 5)


def raises(status, *words):
    class Check:
        def __enter__(self):
            self.ctx = pytest.raises(dfsel.Error)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            e = self.info.value
            assert e.status == status, "status %r for %s" % (e.status, e.message)
            for w in words:
                assert w in e.message, "%r not in %r" % (w, e.message)
            return handled
    return Check()


class FakeCuda:
    """Claims device memory through __cuda_array_interface__ (never read: refused first)."""

    def __init__(self, shape, typestr="<f4"):
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr, "data": (4096, False),
                                         "version": 3, "strides": None}


class OnlyDLPack:
    def __init__(self, a):
        self._a = a

    def __dlpack__(self, stream=None):
        return self._a.__dlpack__()

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


W = weights()


@pytest.mark.parametrize("name,value,status,words", [
    ("e_prev", W["e_prev"].astype(np.float64), Status.INVALID_ARGUMENT, ["e_prev has element type f64"]),
    ("e_prev", W["e_prev"][:, 0].copy(), Status.INVALID_ARGUMENT, ["e_prev has 1 dimensions"]),
    ("e_next", np.asfortranarray(W["e_next"]), Status.INVALID_ARGUMENT, ["e_next is not contiguous along its last axis"]),
    ("w_h", dfsel.typed(W["w_h"], "bf16"), Status.INVALID_ARGUMENT, ["w_h: storage of element type f32 cannot be read as BF16"]),
    ("e_prev", dfsel.typed(np.zeros((V, 33), np.uint8), "q8_0"), Status.INVALID_ARGUMENT, ["e_prev", "Q8_0 blocks"]),
    ("e_prev", W["e_prev"][:-1], Status.INVALID_ARGUMENT, ["e_prev.shape[0] = 255"]),
    ("e_prev", np.zeros((V, R), np.uint16), Status.INVALID_ARGUMENT, ["e_prev has element type u16", "dfsel.typed"]),
    ("w_h", "not an array", Status.INVALID_ARGUMENT, ["w_h: expected a NumPy array"]),
    ("e_next", FakeCuda((V, R)), Status.INVALID_ARGUMENT, ["e_next is on cuda", "e_prev is on cpu"]),
    ("placement", "diagonal", Status.INVALID_ARGUMENT, ["placement = 'diagonal'"]),
    ("backend", "tpu", Status.INVALID_ARGUMENT, ["backend = 'tpu'"]),
    ("backend", "cuda", Status.INVALID_ARGUMENT, ["backend = cuda but e_prev is in host memory"]),
    ("nccl_comm", "comm", Status.INVALID_ARGUMENT, ["nccl_comm = 'comm'"]),
    ("nccl_comm", 1234, Status.UNSUPPORTED, ["nccl_comm", "CPU backend"]),
    ("nccl_comm", ctypes.c_void_p(1234), Status.UNSUPPORTED, ["nccl_comm", "CPU backend"]),
    ("nccl_comm", types.SimpleNamespace(comm=1234), Status.UNSUPPORTED, ["nccl_comm", "CPU backend"]),
    ("nccl_comm", types.SimpleNamespace(comm="x"), Status.INVALID_ARGUMENT, ["nccl_comm = namespace(comm='x')"]),
    ("top_k", 300, Status.INVALID_ARGUMENT, ["top_k = 300"]),
    ("codebook_rank", 16, Status.INVALID_ARGUMENT, ["e_prev.shape[1] = 32, expected 16"]),
    ("v_end", 300, Status.INVALID_ARGUMENT, ["[0, 300)"]),
])
def test_plan_arguments(name, value, status, words):
    with raises(status, *words):
        make(**{name: value})


def test_bad_type_names():
    with raises(Status.INVALID_ARGUMENT, "dtype = 'iq4_nl'", "q4_0, q4_1, q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K"):
        dfsel.typed(W["e_prev"], "iq4_nl")
    with raises(Status.INVALID_ARGUMENT, "weight_dtype = 'int4'"):
        make(weight_dtype="int4")
    logits, hidden, anchors = inputs()
    with raises(Status.INVALID_ARGUMENT, "hidden_dtype = <class 'numpy.int32'>"):
        make().run(logits, hidden, anchors, hidden_dtype=np.int32)


def test_run_arguments():
    p = make()
    logits, hidden, anchors = inputs()
    cases = [
        (dict(logits=logits.astype(np.float64)), ["logits has element type f64"]),
        (dict(logits=logits[:, :-1]), ["logits has shape (8, 255)", "(len(anchors) * block_size = 2 * 4, 256) = (8, 256)"]),
        (dict(logits=logits[:-1]), ["logits has shape (7, 256)"]),
        (dict(logits=np.asfortranarray(logits)), ["logits is not contiguous along its last axis"]),
        (dict(logits=logits[None]), ["logits has 3 dimensions"]),
        (dict(logits=FakeCuda((8, V))), ["logits is on cuda", "the plan runs on cpu"]),
        (dict(hidden=hidden.astype(np.int32)), ["hidden has element type i32"]),
        (dict(hidden=dfsel.typed(hidden, "f16")), ["hidden: storage of element type f32 cannot be read as F16"]),
        (dict(anchors=anchors.astype(np.int64)), ["anchors has element type i64; expected i32"]),
        (dict(anchors=anchors[None]), ["anchors has shape (1, 2)"]),
        (dict(anchors=np.arange(4, dtype=np.int32)[::2]), ["anchors is not contiguous"]),
        (dict(anchors=np.zeros(3, np.int32)), ["anchors has 3 elements", "max_blocks = 2"]),
        (dict(anchors=np.zeros(0, np.int32)), ["anchors has 0 elements"]),
        (dict(anchors=np.array([1, V], np.int32)), ["anchors[1] = 256"]),
        (dict(p_min=2.0), ["p_min = 2"]),
        (dict(temperature=float("nan")), ["temperature = nan"]),
        (dict(out={"path": None}), ["out = {'path': None}: expected the dfsel.Outputs"]),
        (dict(out=p.outputs(1)), ["out holds outputs for K = 4", "and 1 blocks", "this run needs", "and 2 blocks"]),
    ]
    for change, words in cases:
        args = dict(logits=logits, hidden=hidden, anchors=anchors)
        args.update(change)
        with raises(Status.INVALID_ARGUMENT, *words):
            p.run(args.pop("logits"), args.pop("hidden"), args.pop("anchors"), **args)
    # the plan still runs after every refusal
    assert p.run(logits, hidden, anchors).n_emitted.shape == (2,)
    with raises(Status.INVALID_ARGUMENT, "out.packed", "72"):
        make(top_k=8).run(logits, hidden, anchors, packed=True)


def test_output_buffers():
    p = make()
    d = 2 * (B - 1)
    cases = [
        (dict(cand_ids=np.zeros((d, K), np.float32)), ["out.cand_ids has element type f32; expected i32"]),
        (dict(scores=np.zeros((d, K), np.float32)), ["out.scores has shape (6, 4); expected (6, 4, 4)"]),
        (dict(unary=np.zeros((K, d), np.float32).T), ["out.unary is not C-contiguous"]),
        (dict(path=FakeCuda((2, B - 1), "<i4")), ["out.path is on cuda", "the plan runs on cpu"]),
        (dict(packed=np.zeros((2 * B, E), np.float64)), ["out.packed has element type f64"]),
        (dict(bogus=np.zeros(3)), ["bogus is not an output"]),
    ]
    for arrays, words in cases:
        with raises(Status.INVALID_ARGUMENT, *words):
            p.outputs(2, **arrays)


def test_closed_plan_and_streams():
    p = make()
    p.close()
    logits, hidden, anchors = inputs()
    with raises(Status.INVALID_ARGUMENT, "the plan is closed"):
        p.run(logits, hidden, anchors)
    with raises(Status.INVALID_ARGUMENT, "stream = 'fast'"):
        dfsel._streams.handle("fast")


def test_run_group_arguments():
    logits, hidden, anchors = inputs()
    half = dict(n_ranks=2)
    p0 = make(rank=0, v_begin=0, v_end=128, **half)
    p1 = make(rank=1, v_begin=128, v_end=256, **half)
    shards = [logits[:, :128], logits[:, 128:]]
    with raises(Status.INVALID_ARGUMENT, "logits has 1 entries for 2 plans"):
        dfsel.run_group([p0, p1], shards[:1], [hidden] * 2, [anchors] * 2)
    with raises(Status.INVALID_ARGUMENT, "plans[1] = 'p1' is not a dfsel.Plan"):
        dfsel.run_group([p0, "p1"], shards, [hidden] * 2, [anchors] * 2)
    with raises(Status.INVALID_ARGUMENT, "plans[1]: logits has shape (8, 256)"):
        dfsel.run_group([p0, p1], [shards[0], logits], [hidden] * 2, [anchors] * 2)
    with raises(Status.INVALID_ARGUMENT, "n_ranks = 2"):
        dfsel.run_group([p0], shards[:1], [hidden], [anchors])
    with raises(Status.INVALID_ARGUMENT, "plans is empty"):
        dfsel.run_group([], [], [], [])
    with raises(Status.INVALID_ARGUMENT, "plans[0] and plans[1] are the same plan"):
        dfsel.run_group([p0, p0], [shards[0]] * 2, [hidden] * 2, [anchors] * 2)
    outs = dfsel.run_group([p0, p1], shards, [hidden] * 2, [anchors] * 2)
    assert outs[0].path.tobytes() == outs[1].path.tobytes()


def test_dlpack_and_typed_inputs_read_like_numpy():
    """The DLPack path (an object with only __dlpack__) and dfsel.typed give what NumPy gives."""
    p = make()
    logits, hidden, anchors = inputs()
    ref = p.run(logits, hidden, anchors)
    got = p.run(OnlyDLPack(logits), OnlyDLPack(hidden), OnlyDLPack(anchors))
    assert type(got.path) is np.ndarray
    for k, v in ref.as_dict().items():
        assert v.tobytes() == got.as_dict()[k].tobytes(), k
    half = logits.astype(np.float16)
    a = p.run(half, hidden, anchors)
    b = p.run(dfsel.typed(half.view(np.uint16), "f16"), hidden, anchors)
    b2 = p.run(dfsel.typed(half.view(np.uint16), np.float16), hidden, anchors)
    b3 = p.run(half.view(np.uint16), hidden, anchors, logits_dtype="f16")
    b4 = p.run(half.view(np.uint16), hidden.view(np.uint32), anchors, logits_dtype="f16", hidden_dtype=np.float32)
    assert a.scores.tobytes() == b.scores.tobytes() == b2.scores.tobytes() == b3.scores.tobytes() == \
        b4.scores.tobytes()
    w = {k: (v.view(np.uint32) >> 16).astype(np.uint16) for k, v in W.items()}  # BF16 by truncation
    c = make(weight_dtype="bf16", **w).run(logits, hidden, anchors)
    d = make(e_prev=dfsel.typed(w["e_prev"], "bf16"), e_next=dfsel.typed(w["e_next"], "bf16"),
             w_h=dfsel.typed(w["w_h"], "bf16")).run(logits, hidden, anchors)
    assert c.scores.tobytes() == d.scores.tobytes()  # weight_dtype= is typed() on each weight


def test_ml_dtypes_bfloat16_when_present():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    p = make()
    logits, hidden, anchors = inputs()
    bf = logits.astype(ml_dtypes.bfloat16)
    a = p.run(bf, hidden, anchors)
    b = p.run(dfsel.typed(bf.view(np.uint16), "bf16"), hidden, anchors)
    assert a.scores.tobytes() == b.scores.tobytes()


def test_repeated_runs_read_each_new_array():
    """Runs with arrays of an already seen dtype, shape and strides take the short path; they
    must still read the new arrays (and a new shape must be checked again)."""
    p, fresh = make(), make()
    rng = np.random.default_rng(9)
    for _ in range(3):
        logits, hidden, anchors = inputs()
        logits = rng.standard_normal(logits.shape).astype(np.float32)
        anchors = rng.integers(0, V, 2).astype(np.int32)
        a = p.run(logits, hidden, anchors)
        b = fresh.run(logits.copy(), hidden.copy(), anchors.copy())
        assert a.cand_ids.tobytes() == b.cand_ids.tobytes() and a.path.tobytes() == b.path.tobytes()
    one = p.run(logits[:B], hidden[:B], anchors[:1])
    assert one.path.shape == (1, B - 1)
    with raises(Status.INVALID_ARGUMENT, "logits has 4 rows; expected len(anchors) * block_size = 2 * 4 = 8"):
        p.run(logits[:B], hidden, anchors)


def test_quantised_storage_is_named_by_its_elements():
    """Q4_0 codebooks held as uint8 have shape[1] bytes, not elements: a refusal of their element
    count names it as such (once "e_prev.shape[1] = 64" of arrays whose shape[1] is 36)."""
    from selector_reference import to_q4_0
    rng = np.random.default_rng(4)
    cb = to_q4_0(rng.standard_normal((V, 64)).astype(np.float32))[0]  # 64 elements a row, 36 bytes
    with raises(Status.INVALID_ARGUMENT, "e_prev's rows hold 64 Q4_0 elements (shape[1] = 36 bytes), expected 32") as e:
        make(e_prev=dfsel.typed(cb, "q4_0"), e_next=dfsel.typed(cb, "q4_0"))
    assert "shape[1] = 64" not in e.value.message, e.value.message
