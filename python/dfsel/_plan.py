"""dfsel.Plan: one shard of one selector (dfsel_plan_create), and its runs."""
import ctypes
import itertools
import sys
import weakref

from . import _abi, _arrays, _cvalues, _streams
from ._abi import Error, Status, Type
from ._cvalues import INT32, INT64, UINT64
from ._loader import library
from ._owned import Owned, claimed, create, group_size
from ._outputs import FIELDS as _OUTPUT_FIELDS, Outputs

_FLOATS = _arrays.FLOATS
_WEIGHTS = _arrays.WEIGHTS
_handles = itertools.count(1)
registry = weakref.WeakValueDictionary()  # handle -> Plan, for torch.ops.dfsel.select


# The C fields a message of the library may name, as the Python arguments that set them: a
# run's inputs (inputs[i] of a group is the i-th entry of each sequence of run_group), its
# outputs (out), the description's config and shard (keywords of dfsel.Plan), and the axes of
# a dfsel_tensor (ne[0] is an array's last axis, ne[1] its rows).
_PY_NAMES = [
    (r"\binputs\[(\d+)\]\.anchors\[(\d+)\]", r"anchors[\1][\2]"),
    (r"\binputs\[(\d+)\]\.n_blocks\b", r"len(anchors[\1])"),
    (r"\binputs\[(\d+)\]\.(hidden|logits)\.type\b", r"\2[\1]'s type"),
    (r"\binputs\[(\d+)\]\.(\w+)", r"\2[\1]"),
    (r"\bplans\[(\d+)\]'s inputs\.(\w+)", r"\2[\1]"),
    (r"\bplans\[(\d+)\]'s outputs\.(\w+)", r"out[\1].\2"),
    (r"\binputs\.(hidden|logits)\.data is NULL", r"\1 is None"),
    (r"\binputs\.n_blocks\b", "len(anchors)"),
    (r"\b(?:inputs\.)?(hidden|logits|e_prev|e_next|w_h)\.ne\[0\]", r"\1.shape[1]"),
    (r"\b(?:inputs\.)?(hidden|logits|e_prev|e_next|w_h)\.ne\[1\]", r"\1.shape[0]"),
    (r"\b(?:inputs\.)?(hidden|logits|e_prev|e_next|w_h)\.nb\[1\]", r"\1's row stride"),
    (r"\b(?:inputs\.)?(hidden|logits|e_prev|e_next|w_h)\.type\b", r"\1's type"),
    (r"\boutputs\.packed_row_stride\b", "out.packed's row stride"),
    (r"\binputs\.", ""),
    (r"\boutputs\.", "out."),
    (r"\bconfig\.", ""),
    (r"\bshard\.(rank|n_ranks|v_begin|v_end)\b", r"\1"),
]


def _unwrap(x):
    return (x.array, x.type) if isinstance(x, _arrays.typed) else (x, None)


def _enum(value, enum, name, names):
    if isinstance(value, str) and value.lower() in names:
        return names[value.lower()]
    try:
        return enum(value)
    except ValueError:
        raise Error(Status.INVALID_ARGUMENT, "%s = %r; expected one of %s" % (name, value, ", ".join(names)))


def _placement(value):
    return _enum(value, _abi.Placement, "placement",
                 {"replicated": _abi.Placement.REPLICATED, "sharded": _abi.Placement.SHARDED})


def _backend(value):
    return _enum(value, _abi.Backend, "backend", {"auto": _abi.Backend.AUTO, "cpu": _abi.Backend.CPU,
                                                  "cuda": _abi.Backend.CUDA})


def _comm_handle(comm):
    """An ncclComm_t as an int: the int itself, a ctypes.c_void_p, or an object whose .comm is
    one (CuPy's NcclCommunicator.comm is an int, vLLM's PyNcclCommunicator.comm a ctypes
    ncclComm_t)."""
    if comm is None:
        return None
    h = getattr(comm, "comm", comm)
    if isinstance(h, ctypes.c_void_p):
        h = h.value
    if not isinstance(h, int):
        raise Error(Status.INVALID_ARGUMENT, "nccl_comm = %r: expected the integer value of an ncclComm_t, "
                    "a ctypes.c_void_p, or a communicator whose .comm is one (CuPy, vLLM)" % (comm,))
    return _cvalues.integer(h, "nccl_comm", _cvalues.POINTER)


class _Slot:
    """One input tensor of a run: the last array's signature, so that an array of the same
    dtype, shape, strides and device only has its pointer rewritten."""
    __slots__ = ("sig", "rows")

    def __init__(self):
        self.sig, self.rows = None, 0


def _signature(x):
    torch = sys.modules.get("torch")
    if torch is not None and type(x) is torch.Tensor:
        return (x.dtype, x.shape, x.stride(), x.device)
    np = sys.modules.get("numpy")
    if np is not None and type(x) is np.ndarray:
        return (x.dtype, x.shape, x.strides)
    return None


def _data_ptr(x):
    return x.data_ptr() if hasattr(x, "data_ptr") else x.ctypes.data


class Plan(Owned):
    """One shard of a DFlash2 selector. Weights (e_prev, e_next {V or V_shard rows, R};
    w_h {R rows, n_embd}) are NumPy arrays for the CPU backend, CUDA arrays for the CUDA
    backend; they must stay unchanged while the plan lives (the plan keeps them alive).
    Raw storage is given as dfsel.typed(array, "bf16" / "q8_0" / ...), or weight_dtype= for
    all three weights.

    plan.workspace: for a plan made of torch tensors, the memory every run writes besides its
    outputs (a torch uint8 tensor that the plan owns; torch.ops.dfsel.select takes it); None
    for other plans, whose workspace the library allocates.

    Threads: a plan serves one call at a time. run(), run_group() and check() on a plan that
    another thread is using raise dfsel.Error with status BUSY at once (nothing is read or
    written); different plans may run on different threads together."""
    _py_names = _PY_NAMES

    _destroy, _last_error = "dfsel_plan_destroy", "dfsel_plan_last_error"

    def __init__(self, *, n_vocab, n_embd, codebook_rank, top_k, block_size, max_blocks,
                 e_prev, e_next, w_h, logit_scale=1.0, softcap=0.0, rank=0, n_ranks=1,
                 v_begin=0, v_end=None, placement="replicated", backend="auto", device=None,
                 nccl_comm=None, n_threads=0, weight_dtype=None):
        self._open()
        lib = library()
        n_vocab, n_embd = _cvalues.integer(n_vocab, "n_vocab", INT64), _cvalues.integer(n_embd, "n_embd", INT64)
        codebook_rank, top_k = _cvalues.integer(codebook_rank, "codebook_rank"), _cvalues.integer(top_k, "top_k")
        block_size, max_blocks = _cvalues.integer(block_size, "block_size"), _cvalues.integer(max_blocks, "max_blocks")
        rank, n_ranks = _cvalues.integer(rank, "rank"), _cvalues.integer(n_ranks, "n_ranks")
        v_begin = _cvalues.integer(v_begin, "v_begin", INT64)
        v_end = n_vocab if v_end is None else _cvalues.integer(v_end, "v_end", INT64)
        d = _abi.PlanDesc()
        c = d.config
        c.n_vocab, c.n_embd, c.codebook_rank, c.top_k = n_vocab, n_embd, codebook_rank, top_k
        c.block_size, c.max_blocks = block_size, max_blocks
        c.logit_scale, c.softcap = _cvalues.real(logit_scale, "logit_scale"), _cvalues.real(softcap, "softcap")
        d.shard.rank, d.shard.n_ranks, d.shard.v_begin, d.shard.v_end = rank, n_ranks, v_begin, v_end
        d.placement, asked = _placement(placement), _backend(backend)
        views, keep = {}, []
        for name, w in (("e_prev", e_prev), ("e_next", e_next), ("w_h", w_h)):
            if weight_dtype is not None and not isinstance(w, _arrays.typed):
                w = _arrays.typed(w, weight_dtype, "weight_dtype")
            arr, explicit = _unwrap(w)
            v = _arrays.view(arr, name)
            views[name] = (v, _arrays.dfsel_type(v, name, explicit, _WEIGHTS))
            keep.append(v.owner)
        where = views["e_prev"][0].device
        for name, (v, _) in views.items():
            if (v.device == _arrays.CPU) != (where == _arrays.CPU):
                raise Error(Status.INVALID_ARGUMENT, "%s is on %s but e_prev is on %s; the weights must share "
                            "one device" % (name, _arrays.describe_device(v.device), _arrays.describe_device(where)))
        if where == _arrays.CPU:
            if asked == _abi.Backend.CUDA:
                raise Error(Status.INVALID_ARGUMENT, "backend = cuda but e_prev is in host memory; give CUDA arrays")
            if device is not None:
                raise Error(Status.INVALID_ARGUMENT, "device = %r but the weights are in host memory (CPU backend, "
                            "which has no device); leave device unset" % (device,))
            d.backend, self._device = _abi.Backend.CPU, _arrays.CPU
        else:
            if asked == _abi.Backend.CPU:
                raise Error(Status.INVALID_ARGUMENT, "backend = cpu but e_prev is on %s; give host arrays"
                            % _arrays.describe_device(where))
            if device is not None:
                device = _cvalues.integer(device, "device", INT32, 0)
            index = where[1] if where[1] is not None else (0 if device is None else device)
            if device is not None and device != index:
                raise Error(Status.INVALID_ARGUMENT, "device = %d but e_prev is on cuda:%d" % (device, index))
            d.backend, d.device, self._device = _abi.Backend.CUDA, index, ("cuda", index)
        for name, (v, t) in views.items():
            _arrays.check_device(v, name, self._device)
            _arrays.fill_tensor(getattr(d, name), v, t, name)
        d.nccl_comm = _comm_handle(nccl_comm)
        d.n_threads = _cvalues.integer(n_threads, "n_threads")
        self.workspace = _torch_workspace(lib, d, views["e_prev"][0])
        if self.workspace is not None:
            keep.append(self.workspace)
        self._py_names = _arrays.block_row_names(d, ("e_prev", "e_next", "w_h")) + _PY_NAMES
        ptr = create(lib.dfsel_plan_create, d, self._py_names)
        self._ptr, self._lib, self._desc, self._keep = ptr, lib, d, keep
        self.top_k, self.block_size, self.n_embd = top_k, block_size, n_embd
        self.n_drafted = block_size - 1  # L, drafted positions per block
        self.max_blocks, self.v_begin, self.v_end, self.n_vocab = max_blocks, v_begin, v_end, n_vocab
        self._dims = (top_k, self.n_drafted, block_size, n_embd)
        self.backend = "cuda" if d.backend == _abi.Backend.CUDA else "cpu"
        self.device = None if self._device == _arrays.CPU else self._device[1]
        self._inputs = _abi.Inputs()
        self._inputs_ref = ctypes.pointer(self._inputs)
        self._slots = (_Slot(), _Slot())
        self._anchor_sig = None
        self._framework = views["e_prev"][0].framework
        self.handle = next(_handles)
        registry[self.handle] = self

    # -- inputs -------------------------------------------------------------------------
    def _bind(self, slot, tensor, x, name, n_tokens, ne0, dtype):
        """Fills tensor from x, whose rows are exactly those of len(anchors) blocks: more rows
        would be a caller's blocks that silently draft nothing."""
        if dtype is not None and not isinstance(x, _arrays.typed):
            x = _arrays.typed(x, dtype, name + "_dtype")
        arr, explicit = _unwrap(x)
        sig = _signature(arr)
        if sig is not None:
            sig = (sig, explicit)
        if sig is not None and sig == slot.sig:
            if slot.rows != n_tokens:
                raise Error(Status.INVALID_ARGUMENT, "%s has %d rows; expected len(anchors) * block_size = %d * %d = %d"
                            % (name, slot.rows, n_tokens // self.block_size, self.block_size, n_tokens))
            tensor.data = _data_ptr(arr)
            return
        v = _arrays.view(arr, name)
        _arrays.check_device(v, name, self._device)
        t = _arrays.dfsel_type(v, name, explicit, _FLOATS)
        if len(v.shape) == 2 and (v.shape[1] != ne0 or v.shape[0] != n_tokens):
            raise Error(Status.INVALID_ARGUMENT, "%s has shape %s; expected (len(anchors) * block_size = %d * %d, %d) = "
                        "(%d, %d)" % (name, tuple(v.shape), n_tokens // self.block_size, self.block_size, ne0,
                                      n_tokens, ne0))
        _arrays.fill_tensor(tensor, v, t, name)
        slot.sig, slot.rows = sig, v.shape[0]

    def _n_blocks(self, anchors):
        sig = _signature(anchors)
        if sig is not None and sig == self._anchor_sig:
            self._inputs.anchors = _data_ptr(anchors)
            return self._inputs.n_blocks
        v = _arrays.view(anchors, "anchors")
        _arrays.check_device(v, "anchors", self._device)
        self._inputs.anchors = _arrays.vector_ptr(v, "anchors", "i32")
        n = v.shape[0]
        if not 1 <= n <= self.max_blocks:
            raise Error(Status.INVALID_ARGUMENT, "anchors has %d elements; expected n_blocks in [1, max_blocks = %d]"
                        % (n, self.max_blocks))
        self._inputs.n_blocks, self._anchor_sig, self._anchor_fw = n, sig, v.framework
        return n

    def _prepare_inputs(self, logits, hidden, anchors, temperature, p_min, seed, dtypes=(None, None)):
        """Checks the inputs and writes them into the plan's inputs struct; returns n_blocks."""
        n_blocks = self._n_blocks(anchors)
        n_tokens = n_blocks * self.block_size
        inp = self._inputs
        self._bind(self._slots[0], inp.logits, logits, "logits", n_tokens, self.v_end - self.v_begin, dtypes[0])
        self._bind(self._slots[1], inp.hidden, hidden, "hidden", n_tokens, self.n_embd, dtypes[1])
        inp.temperature = _cvalues.real(temperature, "temperature")
        inp.p_min = _cvalues.real(p_min, "p_min")
        inp.seed = _cvalues.integer(seed, "seed", UINT64)
        return n_blocks

    def _prepare(self, logits, hidden, anchors, temperature, p_min, seed, out, packed, dtypes=(None, None)):
        n_blocks = self._prepare_inputs(logits, hidden, anchors, temperature, p_min, seed, dtypes)
        if out is None:
            want = ("cand_ids", "unary", "scores", "path", "n_emitted") + (("q",) if temperature > 0 else ()) \
                + (("packed",) if packed else ())
            out = Outputs(n_blocks, self._dims, self._device, self._anchor_fw, want, {}, trusted=True)
        elif type(out) is not Outputs:
            raise Error(Status.INVALID_ARGUMENT, "out = %r: expected the dfsel.Outputs of plan.outputs()" % (out,))
        elif out.dims != self._dims or out.n_blocks < n_blocks or out.device != self._device:
            raise Error(Status.INVALID_ARGUMENT, "out holds %s on %s; this run needs %s on %s" % (
                _describe_outputs(out.dims, out.n_blocks), _arrays.describe_device(out.device),
                _describe_outputs(self._dims, n_blocks), _arrays.describe_device(self._device)))
        return out

    def _stream(self, stream):
        # The framework of the last run's anchors, else (before any run) of the weights.
        return _streams.for_run(self.backend, getattr(self, "_anchor_fw", self._framework), self.device, stream)

    # -- public -------------------------------------------------------------------------
    def outputs(self, n_blocks=None, *, want=("cand_ids", "unary", "scores", "q", "path", "n_emitted"),
                framework=None, **arrays):
        """Output buffers for runs of up to n_blocks blocks (max_blocks when None): the fields in
        `want` are allocated in `framework` ("numpy", "torch", "cupy"; the weights' when None)
        on the plan's device, and arrays given by name (cand_ids=..., packed=...) are used as
        they are, after their dtype, shape, contiguity and device are checked."""
        n_blocks = self._outputs_request(n_blocks, want, _OUTPUT_FIELDS)
        for k in arrays:
            if k not in ("cand_ids", "unary", "scores", "q", "path", "n_emitted", "packed"):
                raise Error(Status.INVALID_ARGUMENT, "outputs(): %s is not an output" % k)
        return Outputs(n_blocks, self._dims, self._device, framework or self._framework, want, arrays)

    def run(self, logits, hidden, anchors, *, temperature=0.0, p_min=0.0, seed=0, stream=None,
            out=None, packed=False, logits_dtype=None, hidden_dtype=None):
        """One selector step. logits [n_blocks*block_size, v_end - v_begin] and hidden
        [n_blocks*block_size, n_embd] (F32, F16, BF16; rows contiguous, any row stride;
        logits_dtype= / hidden_dtype= read raw storage, e.g. "bf16" for uint16),
        anchors [n_blocks] int32, all on the plan's device. Returns `out` (a dfsel.Outputs),
        or new outputs in the framework of `anchors`. CUDA: enqueued on `stream` (default: the
        caller's current stream), nothing waited for; plan.check() reports device-side errors."""
        self._check_open()
        self._claim()
        try:
            out = self._prepare(logits, hidden, anchors, temperature, p_min, seed, out, packed,
                                (logits_dtype, hidden_dtype))
            st = self._lib.dfsel_plan_run(self._ptr, self._inputs_ref, out.ref, self._stream(stream))
            if st:
                raise self._error(st)
        finally:
            self._lock.release()
        return out

    def _run_into(self, logits, hidden, anchors, temperature, p_min, seed, outputs_for, stream):
        """plan.run for torch.ops.dfsel: outputs_for(n_blocks) gives the dfsel_outputs pointer
        once the inputs are checked, and `stream` is the raw handle (None on the CPU)."""
        self._check_open()
        self._claim()
        try:
            n_blocks = self._prepare_inputs(logits, hidden, anchors, temperature, p_min, seed)
            st = self._lib.dfsel_plan_run(self._ptr, self._inputs_ref, outputs_for(n_blocks), stream)
            if st:
                raise self._error(st)
        finally:
            self._lock.release()

    def check(self, stream=None, timeout_ms=-1):
        """Waits for the last run (at most timeout_ms; < 0: no limit) and raises dfsel.Error for
        what the device found (an anchor id out of range), a timeout or a failed peer."""
        self._check_open()
        timeout_ms = _cvalues.integer(timeout_ms, "timeout_ms", INT64)
        self._claim()
        try:
            st = self._lib.dfsel_plan_wait(self._ptr, self._stream(stream), timeout_ms)
            if st:
                raise self._error(st)
        finally:
            self._lock.release()

    def __repr__(self):
        return "dfsel.Plan(backend=%s, device=%s, vocab [%d, %d) of %d, K=%d, block_size=%d)" % (
            self.backend, self.device, self.v_begin, self.v_end, self.n_vocab, self.top_k, self.block_size)


def _torch_workspace(lib, desc, weights):
    """A plan made of torch tensors owns its workspace as a torch uint8 tensor (plan.workspace,
    on the plan's device): torch.ops.dfsel.select takes it as the argument the op writes, so
    that torch sees the plan's memory change, and torch's allocator accounts for it. Other
    plans leave it to the library (None). When the size cannot be known, plan creation is left
    to report why."""
    if weights.framework != "torch":
        return None
    n = ctypes.c_size_t()
    msg = ctypes.create_string_buffer(256)
    if lib.dfsel_workspace_size(ctypes.byref(desc), ctypes.byref(n), msg, len(msg)) or n.value >= 1 << 62:
        return None
    torch = sys.modules["torch"]
    # The caching allocator aligns blocks to 512 bytes (CUDA) and 64 (CPU): more than the
    # 256 and 16 the library asks of a caller's workspace.
    ws = torch.empty(max(n.value, 1), dtype=torch.uint8, device=weights.owner.device)
    desc.workspace, desc.workspace_bytes = ws.data_ptr(), n.value
    return ws


def run_group(plans, logits, hidden, anchors, *, temperature=0.0, p_min=0.0, seed=0, streams=None,
              out=None, packed=False, logits_dtype=None, hidden_dtype=None):
    """One step for several plans driven by this thread (dfsel_run_group): every rank of an
    in-process group, or this process's ranks of an NCCL group. logits, hidden, anchors (and
    streams, out when given) are sequences with one entry per plan; every rank gets its own
    slice of the logits and the same anchors and hidden rows (an in-process group of CPU plans
    refuses a difference, naming it: anchors[1][0], hidden[1] row 5; CUDA plans find it on the
    device, that block drafts nothing, and every rank's check() raises, naming it). Returns a
    list of Outputs."""
    group_size(plans, logits=logits, hidden=hidden, anchors=anchors, streams=streams, out=out)
    with claimed(plans, Plan):
        return _run_group(plans, logits, hidden, anchors, temperature, p_min, seed, streams, out, packed,
                          (logits_dtype, hidden_dtype))


def _run_group(plans, logits, hidden, anchors, temperature, p_min, seed, streams, out, packed, dtypes):
    n = len(plans)
    outs, handles = [], []
    for i, p in enumerate(plans):
        try:
            outs.append(p._prepare(logits[i], hidden[i], anchors[i], temperature, p_min, seed,
                                   None if out is None else out[i], packed, dtypes))
            handles.append(p._stream(None if streams is None else streams[i]))
        except Error as e:
            raise Error(e.status, "plans[%d]: %s" % (i, e.message)) if n > 1 else e
    ptrs = (ctypes.c_void_p * n)(*[p._ptr for p in plans])
    ins = (_abi.Inputs * n)(*[p._inputs for p in plans])
    outv = (_abi.Outputs * n)(*[o.struct for o in outs])
    strv = (ctypes.c_void_p * n)(*handles)
    st = plans[0]._lib.dfsel_run_group(n, ptrs, ins, outv, strv)
    if st:
        raise plans[0]._error(st)
    return outs


def _describe_outputs(dims, n_blocks):
    K, L, block_size, n_embd = dims
    return "outputs for K = %d, block_size = %d, n_embd = %d and %d blocks" % (K, block_size, n_embd, n_blocks)
