"""Arrays of several frameworks seen one way: pointer, element kind, shape, byte strides,
device. NumPy arrays, torch tensors (CPU or CUDA), objects with __cuda_array_interface__ (CuPy,
Numba) and objects with __dlpack__ are read; nothing is copied or converted.

An element kind is a short name ("f32", "bf16", "i32", "u8", ...). dfsel's own types come from
the kind, or from dfsel.typed(array, type) for raw storage (BF16 as uint16, Q8_0 blocks as
bytes).
"""
import sys

from . import _dlpack
from ._abi import Error, Status, Type

CPU = ("cpu", -1)

# dfsel types: (elements per block, bytes per block). The block types but Q8_0 are widened to
# BF16 when a plan is created.
BLOCKS = {Type.F32: (1, 4), Type.F16: (1, 2), Type.BF16: (1, 2), Type.Q8_0: (32, 34),
          Type.Q4_0: (32, 18), Type.Q4_1: (32, 20), Type.Q5_0: (32, 22), Type.Q5_1: (32, 24),
          Type.Q2_K: (256, 84), Type.Q3_K: (256, 110), Type.Q4_K: (256, 144), Type.Q5_K: (256, 176),
          Type.Q6_K: (256, 210)}
FLOATS = (Type.F32, Type.F16, Type.BF16)
WEIGHTS = tuple(BLOCKS)  # every dfsel type may hold weights
_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "u8": 1, "i8": 1, "u16": 2, "i16": 2,
          "i64": 8, "f64": 8, "u32": 4}
_TYPE_OF_KIND = {"f32": Type.F32, "f16": Type.F16, "bf16": Type.BF16}
_TYPE_NAMES = {"f32": Type.F32, "float32": Type.F32, "f16": Type.F16, "float16": Type.F16,
               "half": Type.F16, "bf16": Type.BF16, "bfloat16": Type.BF16}
_TYPE_NAMES.update((t.name.lower(), t) for t in BLOCKS if BLOCKS[t][0] > 1)  # "q8_0", "q4_k", ...


class View:
    """readonly: the producer says the memory must not be written (a NumPy array whose
    flags.writeable is False, __cuda_array_interface__'s read-only flag); legacy DLPack
    capsules cannot say it (NumPy refuses to export a read-only array through them)."""
    __slots__ = ("ptr", "kind", "shape", "strides", "device", "framework", "owner", "readonly")

    def __init__(self, ptr, kind, shape, strides, device, framework, owner, readonly=False):
        self.ptr, self.kind, self.shape, self.strides = ptr, kind, shape, strides
        self.device, self.framework, self.owner, self.readonly = device, framework, owner, readonly


class typed:
    """An array whose storage is read as dfsel type `dtype` (a ggml name, a dfsel.Type, or a
    torch / NumPy float dtype): dfsel.typed(u16, "bf16") for BF16 held as uint16,
    dfsel.typed(blocks, "q8_0") for Q8_0 rows held as uint8 (34 bytes a block)."""
    __slots__ = ("array", "type")

    def __init__(self, array, dtype, name="dtype"):
        self.array = array
        self.type = parse_type(dtype, name)


def parse_type(t, name):
    """A dfsel Type from a Type, a ggml name ("bf16", "q8_0", ...), or a torch / NumPy dtype."""
    if isinstance(t, Type):
        return t
    if isinstance(t, str):
        key = t.lower()
    else:
        key = _kind_of_dtype(t)
    if key in _TYPE_NAMES:
        return _TYPE_NAMES[key]
    raise Error(Status.INVALID_ARGUMENT, "%s = %r is not a dfsel type; use f32, f16, bf16, q8_0, q4_0, q4_1, "
                "q5_0, q5_1, q2_K, q3_K, q4_K, q5_K, q6_K or a torch / NumPy float32, float16, bfloat16 dtype"
                % (name, t))


def _kind_of_dtype(dt):
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(dt, torch.dtype):
        return _torch_kinds(torch).get(dt, str(dt))
    np = sys.modules.get("numpy")
    if np is not None:
        try:
            return _numpy_kind(np.dtype(dt))
        except TypeError:
            pass
    return repr(dt)


_torch_kind_map = None


def _torch_kinds(torch):
    global _torch_kind_map
    if _torch_kind_map is None:
        m = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int32: "i32",
             torch.uint8: "u8", torch.int8: "i8", torch.int16: "i16", torch.int64: "i64",
             torch.float64: "f64"}
        if hasattr(torch, "uint16"):
            m[torch.uint16] = "u16"
        _torch_kind_map = m
    return _torch_kind_map


def _numpy_kind(dt):
    if dt.name == "bfloat16":  # ml_dtypes
        return "bf16"
    if dt.byteorder == ">" or (dt.byteorder == "=" and sys.byteorder == "big"):
        return "big-endian " + dt.name
    code = {"f": "f", "i": "i", "u": "u"}.get(dt.kind)
    return "%s%d" % (code, dt.itemsize * 8) if code else dt.name


def view(obj, name):
    """A View of obj, or dfsel.Error naming the argument."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(obj, torch.Tensor):
        dev = obj.device
        device = CPU if dev.type == "cpu" else (dev.type, dev.index if dev.index is not None else 0)
        es = obj.element_size()
        return View(obj.data_ptr(), _torch_kinds(torch).get(obj.dtype, str(obj.dtype)), tuple(obj.shape),
                    tuple(s * es for s in obj.stride()), device, "torch", obj)
    np = sys.modules.get("numpy")
    if np is not None and isinstance(obj, np.ndarray):
        return View(obj.ctypes.data, _numpy_kind(obj.dtype), obj.shape, obj.strides, CPU, "numpy", obj,
                    not obj.flags.writeable)
    cai = getattr(obj, "__cuda_array_interface__", None)
    if cai is not None:
        return _cai_view(obj, cai, name)
    if hasattr(obj, "__dlpack__") and hasattr(obj, "__dlpack_device__"):
        try:
            capsule, ptr, kind, shape, strides, (dt, di) = _dlpack.read(obj, name)
        except ValueError as e:
            raise Error(Status.INVALID_ARGUMENT, str(e))
        if dt in (_dlpack.KDL_CPU, _dlpack.KDL_CUDA_HOST):
            device = CPU
        elif dt in (_dlpack.KDL_CUDA, _dlpack.KDL_CUDA_MANAGED):
            device = ("cuda", di)
        else:
            device = ("dlpack device type %d" % dt, di)
        return View(ptr, kind, shape, strides, device, "dlpack", (obj, capsule))
    raise Error(Status.INVALID_ARGUMENT, "%s: expected a NumPy array, a torch tensor, or an object with "
                "__cuda_array_interface__ or __dlpack__; got %s" % (name, type(obj).__name__))


def _cai_view(obj, cai, name):
    typestr = cai["typestr"]
    kinds = {"f4": "f32", "f2": "f16", "i4": "i32", "u1": "u8", "i1": "i8", "u2": "u16", "i2": "i16",
             "i8": "i64", "f8": "f64", "u4": "u32"}
    kind = kinds.get(typestr[1:], typestr) if typestr[0] in "<|" else "big-endian " + typestr
    shape = tuple(cai["shape"])
    itemsize = int(typestr[2:]) if typestr[2:].isdigit() else 1
    strides = cai.get("strides")
    if strides is None:
        strides, acc = [], itemsize
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= max(n, 1)
    dev = getattr(obj, "device", None)
    index = getattr(dev, "id", None)  # CuPy; other producers do not say
    framework = "cupy" if type(obj).__module__.startswith("cupy") else "cuda_array_interface"
    return View(cai["data"][0], kind, shape, tuple(strides), ("cuda", index), framework, obj, bool(cai["data"][1]))


def describe_device(device):
    return "cpu" if device == CPU else "%s:%s" % (device[0], "?" if device[1] is None else device[1])


def check_device(v, name, device):
    """The view lives where the plan computes (an unknown CUDA index passes: it cannot be read)."""
    if v.device == device:
        return
    if v.device[0] == "cuda" and device[0] == "cuda" and v.device[1] is None:
        return
    raise Error(Status.INVALID_ARGUMENT, "%s is on %s but the plan runs on %s" % (
        name, describe_device(v.device), describe_device(device)))


def dfsel_type(v, name, explicit, allowed):
    """The dfsel type of a view: explicit (dfsel.typed) or its element kind."""
    if explicit is None:
        t = _TYPE_OF_KIND.get(v.kind)
        if t is None:
            hint = "; wrap raw storage in dfsel.typed(array, type)" if v.kind in ("u8", "i8", "u16", "i16") else ""
            raise Error(Status.INVALID_ARGUMENT, "%s has element type %s; expected %s%s" % (
                name, v.kind, ", ".join(a.name for a in allowed), hint))
    else:
        t = explicit
        bpe = BLOCKS[t][1] if BLOCKS[t][0] == 1 else 1
        if _BYTES.get(v.kind) != bpe or (BLOCKS[t][0] > 1 and v.kind not in ("u8", "i8")):
            raise Error(Status.INVALID_ARGUMENT, "%s: storage of element type %s cannot be read as %s "
                        "(it needs %s)" % (name, v.kind, t.name,
                                           "uint8 blocks" if BLOCKS[t][0] > 1 else "%d-byte elements" % bpe))
        own = _TYPE_OF_KIND.get(v.kind)
        if own is not None and own != t:
            # float16 storage tagged bf16 has the right size, but its values are no BF16 bits
            raise Error(Status.INVALID_ARGUMENT, "%s: %s storage cannot be read as %s (its values are not %s bits); "
                        "give the array as it is, or integer storage of %d-byte elements tagged with dfsel.typed" % (
                            name, v.kind, t.name, t.name, bpe))
    if t not in allowed:
        raise Error(Status.INVALID_ARGUMENT, "%s has type %s; expected %s" % (
            name, t.name, ", ".join(a.name for a in allowed)))
    return t


def fill_tensor(st, v, t, name):
    """Writes the ggml view {ne0, rows} of a 2-D view v of type t into the Tensor struct st:
    ne[0] is the last axis (contiguous), nb[1] the row stride read from the array."""
    if len(v.shape) != 2:
        raise Error(Status.INVALID_ARGUMENT, "%s has %d dimensions (shape %s); expected 2" % (
            name, len(v.shape), v.shape))
    rows, cols = v.shape
    if rows == 0 or cols == 0:
        raise Error(Status.INVALID_ARGUMENT, "%s has shape %s, which holds no element" % (name, tuple(v.shape)))
    item = _BYTES.get(v.kind, 1)
    if cols > 1 and v.strides[1] != item:
        raise Error(Status.INVALID_ARGUMENT, "%s is not contiguous along its last axis (strides %s bytes, "
                    "element %d bytes); rows must be contiguous" % (name, v.strides, item))
    epb, bpb = BLOCKS[t]
    row_bytes = cols * item
    if epb > 1:
        if row_bytes % bpb:
            raise Error(Status.INVALID_ARGUMENT, "%s: a row of %d bytes is not a whole number of %s blocks "
                        "(%d bytes each)" % (name, row_bytes, t.name, bpb))
        ne0 = row_bytes // bpb * epb
    else:
        ne0 = cols
    nb1 = v.strides[0] if rows > 1 else row_bytes
    if nb1 < 0:
        raise Error(Status.INVALID_ARGUMENT, "%s has a negative row stride (%d bytes)" % (name, nb1))
    st.data = v.ptr or None
    st.type = int(t)
    st.ne[0], st.ne[1], st.ne[2], st.ne[3] = ne0, rows, 1, 1
    st.nb[0], st.nb[1] = bpb, nb1
    st.nb[2] = st.nb[3] = nb1 * rows
    return ne0


def block_row_names(desc, names):
    """Message names for the weights of desc (fields `names`) held as block storage: the library
    counts a row's elements (ne[0]), which for uint8 blocks is not the array's shape[1] (its bytes),
    so such a count is named as the elements the row's bytes hold. To go before the general names."""
    out = []
    for name in names:
        t = getattr(desc, name)
        if not t.data or Type(t.type) not in BLOCKS or BLOCKS[Type(t.type)][0] == 1:
            continue
        epb, bpb = BLOCKS[Type(t.type)]
        out.append((r"\b%s\.ne\[0\] = (\d+)" % name, r"%s's rows hold \1 %s elements (shape[1] = %d bytes)"
                    % (name, Type(t.type).name, t.ne[0] // epb * bpb)))
    return out


def vector_ptr(v, name, kind, length=None):
    """The pointer of a contiguous 1-D view of `kind` (and `length` elements when given)."""
    if len(v.shape) != 1:
        raise Error(Status.INVALID_ARGUMENT, "%s has shape %s; expected 1 dimension" % (name, v.shape))
    if v.kind != kind:
        raise Error(Status.INVALID_ARGUMENT, "%s has element type %s; expected %s" % (name, v.kind, kind))
    if v.shape[0] > 1 and v.strides[0] != _BYTES[kind]:
        raise Error(Status.INVALID_ARGUMENT, "%s is not contiguous (stride %d bytes)" % (name, v.strides[0]))
    if length is not None and v.shape[0] != length:
        raise Error(Status.INVALID_ARGUMENT, "%s has %d elements; expected %d" % (name, v.shape[0], length))
    return v.ptr


def contiguous_ptr(v, name, kind, shape):
    """The pointer of a C-contiguous view of `kind` and exactly `shape` (an output buffer)."""
    if tuple(v.shape) != tuple(shape):
        raise Error(Status.INVALID_ARGUMENT, "%s has shape %s; expected %s" % (name, tuple(v.shape), tuple(shape)))
    if v.kind != kind:
        raise Error(Status.INVALID_ARGUMENT, "%s has element type %s; expected %s" % (name, v.kind, kind))
    acc = _BYTES[kind]
    for n, s in reversed(list(zip(v.shape, v.strides))):
        if n > 1 and s != acc:
            raise Error(Status.INVALID_ARGUMENT, "%s is not C-contiguous (strides %s bytes)" % (name, v.strides))
        acc *= n
    return v.ptr
