"""dfsel.DSparkPlan: one rank of a DSpark draft's Markov chain (include/dfsel/dspark.h), and
its runs. This version of the library runs DSpark plans on the CPU backend (NumPy arrays)."""
import ctypes

from . import _abi, _arrays, _cvalues
from ._abi import Error, Status, Type
from ._cvalues import INT32, INT64, UINT64
from ._loader import library
from ._outputs import ArraySet, _allocate, expose
from ._owned import Owned, claimed, create, group_size
from ._plan import _backend, _comm_handle, _placement, _unwrap

_FLOATS = (Type.F32, Type.F16, Type.BF16)
_WEIGHTS = _FLOATS + (Type.Q8_0, Type.Q4_K, Type.Q6_K)
FIELDS = ("tokens", "n_emitted", "draft_ids", "logits", "probs", "log_norm", "confidence")
_KINDS = {"tokens": "i32", "n_emitted": "i32", "draft_ids": "i32", "logits": "f32", "probs": "f32", "log_norm": "f32",
          "confidence": "f32"}
_ALL = ("draft_ids", "logits", "probs", "log_norm", "confidence")


def _tensor(st, x, name, allowed, dtype=None):
    """Fills the dfsel_tensor st from a 2-D array (a 1-D one is one row)."""
    if dtype is not None and not isinstance(x, _arrays.typed):
        x = _arrays.typed(x, dtype, name + "_dtype")
    arr, explicit = _unwrap(x)
    v = _arrays.view(arr, name)
    _arrays.check_device(v, name, _arrays.CPU)
    if len(v.shape) == 1:
        v.shape, v.strides = (1, v.shape[0]), (v.strides[0] * v.shape[0] if v.shape[0] else 0, v.strides[0])
    _arrays.fill_tensor(st, v, _arrays.dfsel_type(v, name, explicit, allowed), name)
    return v.owner


class DSparkOutputs(ArraySet):
    """Output arrays for runs of up to n_blocks blocks: tokens [n_blocks, N] int32 (target ids,
    -1 after the last emitted), n_emitted [n_blocks] int32, draft_ids [n_blocks, N] int32,
    logits [n_blocks, N] (l_k at the chosen id), probs and log_norm [n_blocks, N] (sampling
    only), confidence [n_blocks, N] (plans with a confidence head). Fields not asked for are
    None and not written. The fields are read-only, and a run checks that its plan drafts the
    N positions they were shaped for (n_draft)."""

    __slots__ = ("_n_draft",)

    def __init__(self, n_blocks, n_draft, want):
        self._n_blocks, self._n_draft, self._arrays = n_blocks, n_draft, {}
        self.struct = _abi.DSparkOutputs()
        self.struct.n_blocks = n_blocks
        want = set(want) | {"tokens", "n_emitted"}
        for f in FIELDS:
            if f in want:
                arr = _allocate("numpy", _arrays.CPU, (n_blocks,) if f == "n_emitted" else (n_blocks, n_draft), _KINDS[f])
                setattr(self.struct, f, arr.ctypes.data)
                self._arrays[f] = arr
        self.ref = ctypes.pointer(self.struct)

    n_draft = property(lambda self: self._n_draft, doc="N, the drafted positions a block's arrays hold")


expose(DSparkOutputs, FIELDS)


class DSparkPlan(Owned):
    """One rank of a DSpark chain. Weights are NumPy arrays (host memory, read in place: they
    must stay unchanged while the plan lives, and the plan keeps them alive): w1 [V_target, R]
    (sharded placement: [v_end - v_begin, R]), w2 [v_end - v_begin, R], optionally w2_scale [1]
    or [v_end - v_begin] float32, conf_w [n_embd + R] (the confidence head; n_embd follows from
    its width), d2t [v_end - v_begin] int32 target ids. logit_scale and softcap transform the base
    logits before the bias (llama.cpp applies neither).

    Threads: a plan serves one call at a time. run(), dspark_run_group() and close() on a plan
    that another thread is using raise dfsel.Error with status BUSY at once (nothing is read or
    written); different plans may run on different threads together."""

    _destroy, _last_error = "dfsel_dspark_plan_destroy", "dfsel_dspark_plan_last_error"

    def __init__(self, *, n_vocab, markov_rank, n_draft, max_blocks, w1, w2, n_target_vocab=None,
                 sample_from_anchor=True, w2_scale=None, conf_w=None, conf_bias=0.0, d2t=None, logit_scale=0.0,
                 softcap=0.0, rank=0, n_ranks=1, v_begin=0, v_end=None, placement="replicated", backend="auto",
                 nccl_comm=None, n_threads=0, weight_dtype=None):
        self._open()
        lib = library()
        d = _abi.DSparkPlanDesc()
        n_vocab = _cvalues.integer(n_vocab, "n_vocab", INT64)
        n_target_vocab = n_vocab if n_target_vocab is None else _cvalues.integer(n_target_vocab, "n_target_vocab", INT64)
        markov_rank, n_draft = _cvalues.integer(markov_rank, "markov_rank"), _cvalues.integer(n_draft, "n_draft")
        max_blocks = _cvalues.integer(max_blocks, "max_blocks")
        rank, n_ranks = _cvalues.integer(rank, "rank"), _cvalues.integer(n_ranks, "n_ranks")
        v_begin = _cvalues.integer(v_begin, "v_begin", INT64)
        v_end = n_vocab if v_end is None else _cvalues.integer(v_end, "v_end", INT64)
        c = d.config
        c.n_vocab, c.n_target_vocab, c.markov_rank, c.n_draft = n_vocab, n_target_vocab, markov_rank, n_draft
        c.sample_from_anchor, c.max_blocks = 1 if sample_from_anchor else 0, max_blocks
        c.logit_scale, c.softcap = _cvalues.real(logit_scale, "logit_scale"), _cvalues.real(softcap, "softcap")
        d.shard.rank, d.shard.n_ranks, d.shard.v_begin, d.shard.v_end = rank, n_ranks, v_begin, v_end
        d.placement, asked = _placement(placement), _backend(backend)
        d.backend = _abi.Backend.CPU if asked == _abi.Backend.AUTO else asked
        keep = [_tensor(d.w1, w1, "w1", _WEIGHTS, weight_dtype), _tensor(d.w2, w2, "w2", _WEIGHTS, weight_dtype)]
        if w2_scale is not None:
            keep.append(_tensor(d.w2_scale, w2_scale, "w2_scale", (Type.F32,)))
        if conf_w is not None:
            keep.append(_tensor(d.conf_w, conf_w, "conf_w", _WEIGHTS, weight_dtype))
            c.n_embd = d.conf_w.ne[0] - c.markov_rank
        d.conf_bias = _cvalues.real(conf_bias, "conf_bias")
        if d2t is not None:
            v = _arrays.view(d2t, "d2t")
            _arrays.check_device(v, "d2t", _arrays.CPU)
            d.d2t = _arrays.vector_ptr(v, "d2t", "i32", v_end - v_begin)
            keep.append(v.owner)
        d.nccl_comm = _comm_handle(nccl_comm)
        d.n_threads = _cvalues.integer(n_threads, "n_threads")
        self._ptr, self._lib, self._desc, self._keep = create(lib.dfsel_dspark_plan_create, d), lib, d, keep
        self.n_draft, self.max_blocks, self.v_begin, self.v_end = n_draft, max_blocks, v_begin, v_end
        self.n_embd = c.n_embd
        self.rows_per_block = n_draft if sample_from_anchor else n_draft + 1
        self.backend = "cpu"

    def outputs(self, n_blocks=None, *, want=_ALL):
        """Output arrays for runs of up to n_blocks blocks (max_blocks when None); confidence
        only for a plan with a confidence head."""
        n_blocks = self.max_blocks if n_blocks is None else _cvalues.integer(n_blocks, "n_blocks", INT32, 1,
                                                                              self.max_blocks)
        return self._allocate(n_blocks, want)

    def _allocate(self, n_blocks, want=_ALL):
        return DSparkOutputs(n_blocks, self.n_draft, tuple(w for w in want if w != "confidence" or self.n_embd > 0))

    def _inputs(self, logits, anchors, hidden, temperature, p_min, seed, dtypes):
        inp = _abi.DSparkInputs()
        keep = [_tensor(inp.logits, logits, "logits", _FLOATS, dtypes[0])]
        if hidden is not None:
            keep.append(_tensor(inp.hidden, hidden, "hidden", _FLOATS, dtypes[1]))
        v = _arrays.view(anchors, "anchors")
        _arrays.check_device(v, "anchors", _arrays.CPU)
        inp.anchors = _arrays.vector_ptr(v, "anchors", "i32")
        inp.n_blocks = _cvalues.integer(v.shape[0], "anchors' length")
        inp.temperature, inp.p_min = _cvalues.real(temperature, "temperature"), _cvalues.real(p_min, "p_min")
        inp.seed = _cvalues.integer(seed, "seed", UINT64)
        return inp, keep + [v.owner]

    def _outputs_for(self, n_blocks, out):
        """out (the DSparkOutputs of a plan of this N), or new outputs for n_blocks blocks (a
        count outside [1, max_blocks] is the library's to refuse, by its field's name)."""
        if out is None:
            return self._allocate(n_blocks)
        if type(out) is not DSparkOutputs:
            raise Error(Status.INVALID_ARGUMENT, "out = %r: expected the DSparkOutputs of plan.outputs()" % (out,))
        if out.n_draft != self.n_draft:
            raise Error(Status.INVALID_ARGUMENT, "out holds outputs for N = %d drafted positions; this plan drafts "
                        "N = %d" % (out.n_draft, self.n_draft))
        return out

    def run(self, logits, anchors, *, hidden=None, temperature=0.0, p_min=0.0, seed=0, out=None, logits_dtype=None,
            hidden_dtype=None):
        """One chain: logits [n_blocks * rows_per_block, v_end - v_begin] (F32, F16, BF16; rows
        contiguous, any row stride), anchors [n_blocks] int32 target ids, hidden
        [n_blocks * rows_per_block, n_embd] for a confidence head. Returns `out` (from
        plan.outputs()) or new outputs."""
        return dspark_run_group([self], [logits], [anchors], hidden=None if hidden is None else [hidden],
                                temperature=temperature, p_min=p_min, seed=seed, out=None if out is None else [out],
                                logits_dtype=logits_dtype, hidden_dtype=hidden_dtype)[0]


def dspark_run_group(plans, logits, anchors, *, hidden=None, temperature=0.0, p_min=0.0, seed=0, out=None,
                     logits_dtype=None, hidden_dtype=None):
    """One chain for every rank of an in-process group (dfsel_dspark_run_group): logits, anchors
    (and hidden, out when given) have one entry per plan. Returns a list of DSparkOutputs."""
    n = group_size(plans, logits=logits, anchors=anchors, hidden=hidden, out=out)
    with claimed(plans, DSparkPlan):
        ins, outs, keep = (_abi.DSparkInputs * n)(), [], []
        for i, p in enumerate(plans):
            try:
                inp, k = p._inputs(logits[i], anchors[i], None if hidden is None else hidden[i], temperature, p_min,
                                   seed, (logits_dtype, hidden_dtype))
                ins[i], keep = inp, keep + k
                outs.append(p._outputs_for(inp.n_blocks, None if out is None else out[i]))
            except Error as e:
                raise Error(e.status, "plans[%d]: %s" % (i, e.message)) if n > 1 else e
        ptrs = (ctypes.c_void_p * n)(*[p._ptr for p in plans])
        outv = (_abi.DSparkOutputs * n)(*[o.struct for o in outs])
        st = plans[0]._lib.dfsel_dspark_run_group(n, ptrs, ins, outv, None)
        if st:
            raise plans[0]._error(st)
        return outs
