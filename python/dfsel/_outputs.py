"""The output buffers of a run, as arrays of the caller's framework on the plan's device.

An Outputs object owns (or wraps) the arrays and the dfsel_outputs struct that points at
them, built once: a run with out= only hands the struct to the library, so the same Outputs
can be captured in a CUDA graph and replayed.
"""
import ctypes
import sys

from . import _abi, _arrays
from ._abi import Error, Status

FIELDS = ("cand_ids", "unary", "scores", "q", "path", "n_emitted", "packed")
_KINDS = {"cand_ids": "i32", "unary": "f32", "scores": "f32", "q": "f32", "path": "i32",
          "n_emitted": "i32", "packed": "f32"}
_DTYPES = {"i32": ("int32", "int32"), "f32": ("float32", "float32")}


def shapes(n_blocks, K, L, block_size, n_embd):
    d = n_blocks * L
    return {"cand_ids": (d, K), "unary": (d, K), "scores": (d, K, K), "q": (d, K),
            "path": (n_blocks, L), "n_emitted": (n_blocks,), "packed": (n_blocks * block_size, n_embd)}


def _allocate(framework, device, shape, kind):
    np_name, torch_name = _DTYPES[kind]
    if framework == "numpy" or (framework in ("dlpack",) and device == _arrays.CPU):
        import numpy as np
        return np.empty(shape, dtype=np_name)
    torch = sys.modules.get("torch")
    if framework == "torch" or (framework != "cupy" and torch is not None):
        if torch is None:
            import torch
        dev = "cpu" if device == _arrays.CPU else "cuda:%d" % device[1]
        return torch.empty(shape, dtype=getattr(torch, torch_name), device=dev)
    try:
        import cupy
    except ImportError:
        raise Error(Status.UNSUPPORTED, "outputs for %s inputs need torch or CuPy to allocate them; "
                    "pass out= buffers" % framework)
    with cupy.cuda.Device(device[1]):
        return cupy.empty(shape, dtype=np_name)


def _raw_ptr(arr):
    if hasattr(arr, "data_ptr"):
        return arr.data_ptr()  # torch
    if hasattr(arr, "ctypes"):
        return arr.ctypes.data  # NumPy
    return arr.data.ptr  # CuPy


class ArraySet:
    """Output arrays of one plan kind and the C struct that points at them. The fields are
    read-only properties (installed by expose()): the library writes the arrays the struct
    held when the set was made, so an array put in a field's place would never be written."""

    __slots__ = ("_arrays", "_n_blocks", "struct", "ref")

    n_blocks = property(lambda self: self._n_blocks, doc="the most blocks a run may write")

    def as_dict(self):
        return dict(self._arrays)

    def __repr__(self):
        return "dfsel.%s(n_blocks=%d, %s)" % (type(self).__name__, self._n_blocks, ", ".join(
            "%s=%s" % (f, tuple(getattr(a, "shape", ()))) for f, a in self._arrays.items()))


def expose(cls, fields):
    """cls.<field> for every field: the array, or None where the set holds none."""
    for f in fields:
        setattr(cls, f, property(lambda self, f=f: self._arrays.get(f)))
    return cls


class Outputs(ArraySet):
    """Output arrays for runs of up to `n_blocks` blocks: cand_ids [n_blocks*L, K] int32,
    unary [n_blocks*L, K], scores [n_blocks*L, K, K], q [n_blocks*L, K] (sampling only),
    path [n_blocks, L] int32 (-1 after the last emitted token), n_emitted [n_blocks] int32,
    packed [n_blocks*block_size, n_embd] (llama.cpp's packed lattice). Fields not asked for are
    None and not written. A run of fewer blocks writes the leading rows only. The fields are
    read-only: the library writes the arrays they held when the Outputs was made, so a run
    checks that its plan has the K, block size and n_embd they were shaped for (dims)."""

    __slots__ = ("_dims", "_device")

    def __init__(self, n_blocks, dims, device, framework, want, given, trusted=False):
        """trusted: every array was allocated here or by the torch op with the right shape
        and dtype, so the pointers are taken without the checks (a cheaper eager call)."""
        self._n_blocks, self._dims, self._device = n_blocks, tuple(dims), device
        self._arrays = {}
        self.struct = _abi.Outputs()
        want = set(want) | {"path", "n_emitted"} | {k for k, v in given.items() if v is not None}
        shp = shapes(n_blocks, *dims)
        for f in FIELDS:
            arr = given.get(f)
            if arr is None and f in want:
                arr = _allocate(framework, device, shp[f], _KINDS[f])
            if arr is None:
                continue
            self._arrays[f] = arr
            if trusted:
                setattr(self.struct, f, _raw_ptr(arr))
                continue
            name = "out.%s" % f
            v = _arrays.view(arr, name)
            _arrays.check_device(v, name, device)
            if v.readonly:
                raise Error(Status.INVALID_ARGUMENT, "%s is read-only; the run writes its outputs" % name)
            if f == "packed":
                t = _arrays.dfsel_type(v, name, None, (_abi.Type.F32,))
                tensor = _abi.Tensor()
                _arrays.fill_tensor(tensor, v, t, name)
                if v.shape != shp[f]:
                    raise Error(Status.INVALID_ARGUMENT, "%s has shape %s; expected %s (rows may be padded)" % (
                        name, tuple(v.shape), shp[f]))
                self.struct.packed = v.ptr
                self.struct.packed_row_stride = tensor.nb[1]
            else:
                setattr(self.struct, f, _arrays.contiguous_ptr(v, name, _KINDS[f], shp[f]))
        self.ref = ctypes.pointer(self.struct)

    dims = property(lambda self: self._dims, doc="(K, L, block_size, n_embd) the arrays are shaped for")
    device = property(lambda self: self._device)


expose(Outputs, FIELDS)
