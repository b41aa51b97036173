"""dfsel.DSparkPlan: one rank of a DSpark draft's Markov chain (include/dfsel/dspark.h), and
its runs. This version of the library runs DSpark plans on the CPU backend (NumPy arrays)."""
import ctypes

from . import _abi, _arrays
from ._abi import Error, Status, Type
from ._loader import library
from ._outputs import _allocate
from ._plan import _U64, _Owned, _comm_handle, _create, _enum, _group_size, _unwrap

_FLOATS = (Type.F32, Type.F16, Type.BF16)
_WEIGHTS = _FLOATS + (Type.Q8_0, Type.Q4_K, Type.Q6_K)
FIELDS = ("tokens", "n_emitted", "draft_ids", "logits", "probs", "log_norm", "confidence")
_KINDS = {"tokens": "i32", "n_emitted": "i32", "draft_ids": "i32", "logits": "f32", "probs": "f32", "log_norm": "f32",
          "confidence": "f32"}


def _int(value, bits, name, low=None):
    """A Python integer that fits the C field it goes to (ctypes would wrap it silently)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise Error(Status.INVALID_ARGUMENT, "%s = %r: expected an integer" % (name, value))
    lo = -(1 << (bits - 1)) if low is None else low
    if not lo <= value < (1 << (bits - 1)):
        raise Error(Status.INVALID_ARGUMENT, "%s = %d does not fit a %d-bit C integer" % (name, value, bits))
    return value


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


class DSparkOutputs:
    """Output arrays for runs of up to n_blocks blocks: tokens [n_blocks, N] int32 (target ids,
    -1 after the last emitted), n_emitted [n_blocks] int32, draft_ids [n_blocks, N] int32,
    logits [n_blocks, N] (l_k at the chosen id), probs and log_norm [n_blocks, N] (sampling
    only), confidence [n_blocks, N] (plans with a confidence head). Fields not asked for are
    None and not written."""

    def __init__(self, n_blocks, n_draft, want):
        self.n_blocks = n_blocks
        self.struct = _abi.DSparkOutputs()
        self.struct.n_blocks = n_blocks
        want = set(want) | {"tokens", "n_emitted"}
        for f in FIELDS:
            arr = None
            if f in want:
                arr = _allocate("numpy", _arrays.CPU, (n_blocks,) if f == "n_emitted" else (n_blocks, n_draft), _KINDS[f])
                setattr(self.struct, f, arr.ctypes.data)
            setattr(self, f, arr)
        self.ref = ctypes.pointer(self.struct)

    def as_dict(self):
        return {f: getattr(self, f) for f in FIELDS if getattr(self, f) is not None}


class DSparkPlan(_Owned):
    """One rank of a DSpark chain. Weights are NumPy arrays (host memory, read in place: they
    must stay unchanged while the plan lives, and the plan keeps them alive): w1 [V_target, R]
    (sharded placement: [v_end - v_begin, R]), w2 [v_end - v_begin, R], optionally w2_scale [1]
    or [v_end - v_begin] float32, conf_w [n_embd + R] (the confidence head; n_embd follows from
    its width), d2t [v_end - v_begin] int32 target ids. logit_scale and softcap transform the base
    logits before the bias (llama.cpp applies neither). One thread at a time may run a plan."""

    _destroy = "dfsel_dspark_plan_destroy"

    def __init__(self, *, n_vocab, markov_rank, n_draft, max_blocks, w1, w2, n_target_vocab=None,
                 sample_from_anchor=True, w2_scale=None, conf_w=None, conf_bias=0.0, d2t=None, logit_scale=0.0,
                 softcap=0.0, rank=0, n_ranks=1, v_begin=0, v_end=None, placement="replicated", backend="auto",
                 nccl_comm=None, n_threads=0, weight_dtype=None):
        self._ptr = None
        lib = library()
        d = _abi.DSparkPlanDesc()
        v_end = n_vocab if v_end is None else v_end
        n_target_vocab = n_vocab if n_target_vocab is None else n_target_vocab
        c = d.config
        c.n_vocab, c.n_target_vocab = _int(n_vocab, 64, "n_vocab"), _int(n_target_vocab, 64, "n_target_vocab")
        c.markov_rank, c.n_draft = _int(markov_rank, 32, "markov_rank"), _int(n_draft, 32, "n_draft")
        c.sample_from_anchor, c.max_blocks = 1 if sample_from_anchor else 0, _int(max_blocks, 32, "max_blocks")
        c.logit_scale, c.softcap = logit_scale, softcap
        d.shard.rank, d.shard.n_ranks = _int(rank, 32, "rank"), _int(n_ranks, 32, "n_ranks")
        d.shard.v_begin, d.shard.v_end = _int(v_begin, 64, "v_begin"), _int(v_end, 64, "v_end")
        d.placement = _enum(placement, _abi.Placement, "placement",
                            {"replicated": _abi.Placement.REPLICATED, "sharded": _abi.Placement.SHARDED})
        asked = _enum(backend, _abi.Backend, "backend",
                      {"auto": _abi.Backend.AUTO, "cpu": _abi.Backend.CPU, "cuda": _abi.Backend.CUDA})
        d.backend = _abi.Backend.CPU if asked == _abi.Backend.AUTO else asked
        keep = [_tensor(d.w1, w1, "w1", _WEIGHTS, weight_dtype), _tensor(d.w2, w2, "w2", _WEIGHTS, weight_dtype)]
        if w2_scale is not None:
            keep.append(_tensor(d.w2_scale, w2_scale, "w2_scale", (Type.F32,)))
        if conf_w is not None:
            keep.append(_tensor(d.conf_w, conf_w, "conf_w", _WEIGHTS, weight_dtype))
            c.n_embd = d.conf_w.ne[0] - c.markov_rank
        d.conf_bias = conf_bias
        if d2t is not None:
            v = _arrays.view(d2t, "d2t")
            _arrays.check_device(v, "d2t", _arrays.CPU)
            d.d2t = _arrays.vector_ptr(v, "d2t", "i32", v_end - v_begin)
            keep.append(v.owner)
        d.nccl_comm = _comm_handle(nccl_comm)
        d.n_threads = _int(n_threads, 32, "n_threads")
        self._ptr, self._lib, self._desc, self._keep = _create(lib.dfsel_dspark_plan_create, d), lib, d, keep
        self.n_draft, self.max_blocks, self.v_begin, self.v_end = n_draft, max_blocks, v_begin, v_end
        self.n_embd = c.n_embd
        self.rows_per_block = n_draft if sample_from_anchor else n_draft + 1
        self.backend = "cpu"

    def outputs(self, n_blocks=None, *, want=("draft_ids", "logits", "probs", "log_norm", "confidence")):
        """Output arrays for runs of up to n_blocks blocks (max_blocks when None); confidence
        only for a plan with a confidence head."""
        want = tuple(w for w in want if w != "confidence" or self.n_embd > 0)
        return DSparkOutputs(self.max_blocks if n_blocks is None else n_blocks, self.n_draft, want)

    def _inputs(self, logits, anchors, hidden, temperature, p_min, seed, dtypes):
        inp = _abi.DSparkInputs()
        keep = [_tensor(inp.logits, logits, "logits", _FLOATS, dtypes[0])]
        if hidden is not None:
            keep.append(_tensor(inp.hidden, hidden, "hidden", _FLOATS, dtypes[1]))
        v = _arrays.view(anchors, "anchors")
        _arrays.check_device(v, "anchors", _arrays.CPU)
        inp.anchors = _arrays.vector_ptr(v, "anchors", "i32")
        inp.n_blocks = _int(v.shape[0], 32, "anchors' length")
        inp.temperature, inp.p_min, inp.seed = temperature, p_min, _int(seed, 65, "seed", 0) & _U64
        return inp, keep + [v.owner]

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
    n = _group_size(plans, logits=logits, anchors=anchors, hidden=hidden, out=out)
    ins, outs, keep = (_abi.DSparkInputs * n)(), [], []
    for i, p in enumerate(plans):
        if not isinstance(p, DSparkPlan) or not p._ptr:
            raise Error(Status.INVALID_ARGUMENT, "plans[%d] is not an open dfsel.DSparkPlan" % i)
        try:
            inp, k = p._inputs(logits[i], anchors[i], None if hidden is None else hidden[i], temperature, p_min, seed,
                               (logits_dtype, hidden_dtype))
        except Error as e:
            raise Error(e.status, "plans[%d]: %s" % (i, e.message)) if n > 1 else e
        ins[i], keep = inp, keep + k
        o = out[i] if out is not None else p.outputs(inp.n_blocks)
        if not isinstance(o, DSparkOutputs):
            raise Error(Status.INVALID_ARGUMENT, "out[%d] = %r: expected the DSparkOutputs of plan.outputs()" % (i, o))
        outs.append(o)
    ptrs = (ctypes.c_void_p * n)(*[p._ptr for p in plans])
    outv = (_abi.DSparkOutputs * n)(*[o.struct for o in outs])
    st = plans[0]._lib.dfsel_dspark_run_group(n, ptrs, ins, outv, None)
    if st:
        raise Error(st, plans[0]._lib.dfsel_dspark_plan_last_error(plans[0]._ptr).decode(errors="replace"))
    return outs
