"""dfsel.DSparkPlan: one rank of a DSpark draft's Markov chain (include/dfsel/dspark.h), and
its runs: on the CPU backend with host arrays (NumPy), on the CUDA backend with CUDA arrays
(torch tensors, CuPy or any __cuda_array_interface__ / DLPack array), which a library whose
CUDA backend refuses DSpark plans answers with dfsel.Error (UNSUPPORTED)."""
import ctypes

from . import _abi, _arrays, _cvalues, _streams
from ._abi import Error, Status, Type
from ._cvalues import INT32, INT64, UINT64
from ._loader import library
from ._outputs import ArraySet, _allocate, _raw_ptr, expose
from ._owned import Owned, claimed, create, group_size
from ._plan import _backend, _comm_handle, _placement, _unwrap

_FLOATS = _arrays.FLOATS
_WEIGHTS = _arrays.WEIGHTS
FIELDS = ("tokens", "n_emitted", "draft_ids", "logits", "probs", "log_norm", "confidence")
_KINDS = {"tokens": "i32", "n_emitted": "i32", "draft_ids": "i32", "logits": "f32", "probs": "f32", "log_norm": "f32",
          "confidence": "f32"}
_ALL = ("draft_ids", "logits", "probs", "log_norm", "confidence")


# The C fields a message of the library may name, as the Python arguments that set them.
_PY_NAMES = [
    (r"\binputs\.(hidden|logits)\.data is NULL", r"\1 is None"),
    (r"\binputs\.n_blocks\b", "len(anchors)"),
    (r"\binputs\.(hidden|logits)\.ne\[0\]", r"\1.shape[1]"),
    (r"\binputs\.(hidden|logits)\.ne\[1\]", r"\1.shape[0]"),
    (r"\binputs\.", ""),
    (r"\boutputs\.", "out."),
    (r"\bconfig\.n_embd\b", "n_embd (conf_w's length - markov_rank)"),
    (r"\bconfig\.", ""),
    (r"\bshard\.(rank|n_ranks|v_begin|v_end)\b", r"\1"),
    (r"\b(w1|w2|w2_scale|conf_w)\.ne\[0\]", r"\1.shape[1]"),
    (r"\b(w1|w2|w2_scale|conf_w)\.ne\[1\]", r"\1.shape[0]"),
]


def _view(x, name, dtype=None):
    """The view of x and its explicit dfsel type (dfsel.typed, or dtype= for raw storage)."""
    if dtype is not None and not isinstance(x, _arrays.typed):
        x = _arrays.typed(x, dtype, name + "_dtype")
    arr, explicit = _unwrap(x)
    return _arrays.view(arr, name), explicit


def _tensor(st, x, name, allowed, dtype=None, device=_arrays.CPU):
    """Fills the dfsel_tensor st from a 2-D array (a 1-D one is one row) on `device`."""
    v, explicit = _view(x, name, dtype)
    _arrays.check_device(v, name, device)
    if len(v.shape) == 1:
        v.shape, v.strides = (1, v.shape[0]), (v.strides[0] * v.shape[0] if v.shape[0] else 0, v.strides[0])
    _arrays.fill_tensor(st, v, _arrays.dfsel_type(v, name, explicit, allowed), name)
    return v.owner


def _not_one_row(conf_w, t, markov_rank):
    """The refusal of a conf_w (filled into the dfsel_tensor t) that is not one row of more than
    markov_rank elements, naming its shape."""
    msg = "conf_w has shape %r; the confidence head is one row of n_embd + markov_rank elements with n_embd >= 1 " \
          "(markov_rank = %d)" % (tuple(_unwrap(conf_w)[0].shape), markov_rank)
    if t.ne[0] == 1 and t.ne[1] > markov_rank:
        msg += "; give this column as shape (%d,)" % t.ne[1]
    return Error(Status.INVALID_ARGUMENT, msg)


def _where(w1, asked, device):
    """(backend, device index, where) of a plan whose w1 view is w1: the CPU backend for host
    weights, the CUDA backend on w1's device for CUDA weights."""
    if w1.device == _arrays.CPU:
        if asked == _abi.Backend.CUDA:
            raise Error(Status.INVALID_ARGUMENT, "backend = cuda but w1 is in host memory; give CUDA arrays")
        if device is not None:
            raise Error(Status.INVALID_ARGUMENT, "device = %r but the weights are in host memory (CPU backend, "
                        "which has no device); leave device unset" % (device,))
        return _abi.Backend.CPU, 0, _arrays.CPU
    if w1.device[0] != "cuda":
        raise Error(Status.INVALID_ARGUMENT, "w1 is on %s; expected host or CUDA memory"
                    % _arrays.describe_device(w1.device))
    if asked == _abi.Backend.CPU:
        raise Error(Status.INVALID_ARGUMENT, "backend = cpu but w1 is on %s; give host arrays"
                    % _arrays.describe_device(w1.device))
    if device is not None:
        device = _cvalues.integer(device, "device", INT32, 0)
    index = w1.device[1] if w1.device[1] is not None else (0 if device is None else device)
    if device is not None and device != index:
        raise Error(Status.INVALID_ARGUMENT, "device = %d but w1 is on cuda:%d" % (device, index))
    return _abi.Backend.CUDA, index, ("cuda", index)


class DSparkOutputs(ArraySet):
    """Output arrays for runs of up to n_blocks blocks: tokens [n_blocks, N] int32 (target ids,
    -1 after the last emitted), n_emitted [n_blocks] int32, draft_ids [n_blocks, N] int32,
    logits [n_blocks, N] (l_k at the chosen id), probs and log_norm [n_blocks, N] (sampling
    only), confidence [n_blocks, N] (plans with a confidence head). Fields not asked for are
    None and not written. The fields are read-only, and a run checks that its plan drafts the
    N positions they were shaped for (n_draft)."""

    __slots__ = ("_n_draft", "_device")

    def __init__(self, n_blocks, n_draft, want, device=_arrays.CPU, framework="numpy"):
        self._n_blocks, self._n_draft, self._device, self._arrays = n_blocks, n_draft, device, {}
        self.struct = _abi.DSparkOutputs()
        self.struct.n_blocks = n_blocks
        want = set(want) | {"tokens", "n_emitted"}
        for f in FIELDS:
            if f in want:
                arr = _allocate(framework, device, (n_blocks,) if f == "n_emitted" else (n_blocks, n_draft), _KINDS[f])
                setattr(self.struct, f, _raw_ptr(arr))
                self._arrays[f] = arr
        self.ref = ctypes.pointer(self.struct)

    n_draft = property(lambda self: self._n_draft, doc="N, the drafted positions a block's arrays hold")
    device = property(lambda self: self._device, doc="where the arrays are: (\"cpu\", -1) or (\"cuda\", index)")


expose(DSparkOutputs, FIELDS)


class DSparkPlan(Owned):
    """One rank of a DSpark chain. Weights are NumPy arrays for the CPU backend or CUDA arrays
    (torch tensors, ...) on one device for the CUDA backend (read in place: they must stay
    unchanged while the plan lives, and the plan keeps them alive): w1 [V_target, R]
    (sharded placement: [v_end - v_begin, R]), w2 [v_end - v_begin, R], optionally w2_scale [1]
    or [v_end - v_begin] float32, conf_w [n_embd + R] (the confidence head; n_embd follows from
    its width), d2t [v_end - v_begin] int32 target ids (every one checked here; a run checks the
    entry of each chosen id again and raises dfsel.Error naming it if it was changed out of
    range). Raw storage is given as dfsel.typed(array, "bf16" / "q8_0" / "q4_k" / ...), or
    weight_dtype= for w1 and w2 together (a quantised draft's quantised tensors; conf_w keeps its
    own type, F32 in drafts, or takes dfsel.typed). logit_scale and softcap transform the base
    logits before the bias (llama.cpp applies neither). A CUDA plan's runs take CUDA inputs on
    its device, write outputs there (torch tensors when torch is loaded) and are enqueued on
    the caller's current stream (or stream=); plan.check() waits and reports what the device
    found (an anchor out of range).

    Threads: a plan serves one call at a time. run(), dspark_run_group() and close() on a plan
    that another thread is using raise dfsel.Error with status BUSY at once (nothing is read or
    written); different plans may run on different threads together."""
    _py_names = _PY_NAMES

    _destroy, _last_error = "dfsel_dspark_plan_destroy", "dfsel_dspark_plan_last_error"

    def __init__(self, *, n_vocab, markov_rank, n_draft, max_blocks, w1, w2, n_target_vocab=None,
                 sample_from_anchor=True, w2_scale=None, conf_w=None, conf_bias=0.0, d2t=None, logit_scale=0.0,
                 softcap=0.0, rank=0, n_ranks=1, v_begin=0, v_end=None, placement="replicated", backend="auto",
                 device=None, nccl_comm=None, n_threads=0, weight_dtype=None):
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
        if not isinstance(sample_from_anchor, (bool, np_bool_types())) and sample_from_anchor not in (0, 1):
            raise Error(Status.INVALID_ARGUMENT, "sample_from_anchor = %r: expected True or False" % (sample_from_anchor,))
        c.sample_from_anchor, c.max_blocks = 1 if sample_from_anchor else 0, max_blocks
        c.logit_scale, c.softcap = _cvalues.real(logit_scale, "logit_scale"), _cvalues.real(softcap, "softcap")
        d.shard.rank, d.shard.n_ranks, d.shard.v_begin, d.shard.v_end = rank, n_ranks, v_begin, v_end
        d.placement, asked = _placement(placement), _backend(backend)
        w1_view, _ = _view(w1, "w1", weight_dtype)
        d.backend, d.device, self._device = _where(w1_view, asked, device)
        where = self._device
        keep = [_tensor(d.w1, w1, "w1", _WEIGHTS, weight_dtype, where),
                _tensor(d.w2, w2, "w2", _WEIGHTS, weight_dtype, where)]
        if w2_scale is not None:
            keep.append(_tensor(d.w2_scale, w2_scale, "w2_scale", (Type.F32,), None, where))
        if conf_w is not None:
            # weight_dtype is W1's and W2's storage: a quantised draft's conf_proj is F32 beside its
            # quantised W1 and W2, and raw conf_w storage takes dfsel.typed.
            keep.append(_tensor(d.conf_w, conf_w, "conf_w", _WEIGHTS, None, where))
            if d.conf_w.ne[1] != 1 or d.conf_w.ne[0] <= markov_rank:
                raise _not_one_row(conf_w, d.conf_w, markov_rank)
            c.n_embd = d.conf_w.ne[0] - c.markov_rank
        d.conf_bias = _cvalues.real(conf_bias, "conf_bias")
        if d2t is not None:
            v = _arrays.view(d2t, "d2t")
            _arrays.check_device(v, "d2t", where)
            d.d2t = _arrays.vector_ptr(v, "d2t", "i32", v_end - v_begin)
            keep.append(v.owner)
        d.nccl_comm = _comm_handle(nccl_comm)
        d.n_threads = _cvalues.integer(n_threads, "n_threads")
        self._py_names = _arrays.block_row_names(d, ("w1", "w2", "conf_w")) + _PY_NAMES
        ptr = create(lib.dfsel_dspark_plan_create, d, self._py_names)
        self._ptr, self._lib, self._desc, self._keep = ptr, lib, d, keep
        self.n_draft, self.max_blocks, self.v_begin, self.v_end = n_draft, max_blocks, v_begin, v_end
        self.n_embd = c.n_embd
        self.rows_per_block = n_draft if sample_from_anchor else n_draft + 1
        self.backend = "cuda" if d.backend == _abi.Backend.CUDA else "cpu"
        self.device = None if where == _arrays.CPU else where[1]
        self._framework = "numpy" if where == _arrays.CPU else w1_view.framework

    def outputs(self, n_blocks=None, *, want=_ALL):
        """Output arrays for runs of up to n_blocks blocks (max_blocks when None); confidence
        only for a plan with a confidence head. want names the optional fields (of draft_ids,
        logits, probs, log_norm, confidence); tokens and n_emitted are always made."""
        n_blocks = self._outputs_request(n_blocks, want, FIELDS)
        return self._allocate(n_blocks, want)

    def _allocate(self, n_blocks, want=_ALL):
        framework = "numpy" if self._device == _arrays.CPU else ("cupy" if self._framework == "cupy" else "torch")
        return DSparkOutputs(n_blocks, self.n_draft, tuple(w for w in want if w != "confidence" or self.n_embd > 0),
                             self._device, framework)

    def _inputs(self, logits, anchors, hidden, temperature, p_min, seed, dtypes):
        inp = _abi.DSparkInputs()
        keep = [_tensor(inp.logits, logits, "logits", _FLOATS, dtypes[0], self._device)]
        if hidden is not None:
            keep.append(_tensor(inp.hidden, hidden, "hidden", _FLOATS, dtypes[1], self._device))
        v = _arrays.view(anchors, "anchors")
        _arrays.check_device(v, "anchors", self._device)
        inp.anchors = _arrays.vector_ptr(v, "anchors", "i32")
        inp.n_blocks = _cvalues.integer(v.shape[0], "anchors' length")
        # The rows are those of len(anchors) blocks exactly: more rows would be a caller's
        # blocks that silently draft nothing.
        if hidden is None and self.n_embd > 0:
            raise Error(Status.INVALID_ARGUMENT, "hidden is None, but this plan has a confidence head (n_embd = %d): "
                        "give hidden [n_blocks * rows_per_block, n_embd]" % self.n_embd)
        for name, t in (("logits", inp.logits), ("hidden", inp.hidden if hidden is not None else None)):
            if t is not None and t.ne[1] != inp.n_blocks * self.rows_per_block:
                raise Error(Status.INVALID_ARGUMENT, "%s has %d rows; expected len(anchors) * rows_per_block = "
                            "%d * %d = %d" % (name, t.ne[1], inp.n_blocks, self.rows_per_block,
                                              inp.n_blocks * self.rows_per_block))
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
        if out.device != self._device:
            raise Error(Status.INVALID_ARGUMENT, "out holds outputs on %s; this plan runs on %s" % (
                _arrays.describe_device(out.device), _arrays.describe_device(self._device)))
        return out

    def _stream(self, stream):
        return _streams.for_run(self.backend, self._framework, self.device, stream)

    def check(self, stream=None, timeout_ms=-1):
        """Waits for the last run (at most timeout_ms; < 0: no limit) and raises dfsel.Error for
        what the device found (an anchor out of range), or a timeout."""
        self._check_open()
        timeout_ms = _cvalues.integer(timeout_ms, "timeout_ms", INT64)
        with claimed([self], DSparkPlan):
            st = self._lib.dfsel_dspark_plan_wait(self._ptr, self._stream(stream), timeout_ms)
            if st:
                raise self._error(st)

    def run(self, logits, anchors, *, hidden=None, temperature=0.0, p_min=0.0, seed=0, out=None, stream=None,
            logits_dtype=None, hidden_dtype=None):
        """One chain: logits [n_blocks * rows_per_block, v_end - v_begin] (F32, F16, BF16; rows
        contiguous, any row stride), anchors [n_blocks] int32 target ids, hidden
        [n_blocks * rows_per_block, n_embd] for a confidence head, all where the plan runs.
        Returns `out` (from plan.outputs()) or new outputs. CUDA: enqueued on `stream` (default:
        the caller's current stream), nothing waited for; plan.check() waits."""
        return dspark_run_group([self], [logits], [anchors], hidden=None if hidden is None else [hidden],
                                temperature=temperature, p_min=p_min, seed=seed, out=None if out is None else [out],
                                streams=None if stream is None else [stream], logits_dtype=logits_dtype,
                                hidden_dtype=hidden_dtype)[0]

    def __repr__(self):
        return "dfsel.DSparkPlan(backend=%s, device=%s, vocab [%d, %d), N=%d)" % (
            self.backend, self.device, self.v_begin, self.v_end, self.n_draft)


def np_bool_types():
    """NumPy's bool scalar type, when NumPy is loaded (a mask element is a fine flag)."""
    np = __import__("sys").modules.get("numpy")
    return np.bool_ if np is not None else bool


def dspark_run_group(plans, logits, anchors, *, hidden=None, temperature=0.0, p_min=0.0, seed=0, out=None,
                     streams=None, logits_dtype=None, hidden_dtype=None):
    """One chain for every rank of an in-process group (dfsel_dspark_run_group): logits, anchors
    (and hidden, out, streams when given) have one entry per plan. CUDA plans are enqueued on
    their stream (default: the caller's current stream) and not waited for. Returns a list of
    DSparkOutputs."""
    n = group_size(plans, logits=logits, anchors=anchors, hidden=hidden, out=out, streams=streams)
    with claimed(plans, DSparkPlan):
        ins, outs, keep, handles = (_abi.DSparkInputs * n)(), [], [], []
        for i, p in enumerate(plans):
            try:
                inp, k = p._inputs(logits[i], anchors[i], None if hidden is None else hidden[i], temperature, p_min,
                                   seed, (logits_dtype, hidden_dtype))
                ins[i], keep = inp, keep + k
                outs.append(p._outputs_for(inp.n_blocks, None if out is None else out[i]))
                handles.append(p._stream(None if streams is None else streams[i]))
            except Error as e:
                raise Error(e.status, "plans[%d]: %s" % (i, e.message)) if n > 1 else e
        ptrs = (ctypes.c_void_p * n)(*[p._ptr for p in plans])
        outv = (_abi.DSparkOutputs * n)(*[o.struct for o in outs])
        strv = None if all(p.backend == "cpu" for p in plans) else (ctypes.c_void_p * n)(*handles)
        st = plans[0]._lib.dfsel_dspark_run_group(n, ptrs, ins, outv, strv)
        if st:
            raise plans[0]._error(st)
        return outs
