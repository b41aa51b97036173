"""Reads a DLPack capsule (the legacy "dltensor" one) without consuming it.

The capsule stays unconsumed and is kept alive by the caller for as long as the memory is
used: its destructor then runs the producer's deleter, as DLPack asks of a capsule that no
consumer renamed.
"""
import ctypes

KDL_CPU, KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 1, 2, 3, 13


class _Device(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _Device), ("ndim", ctypes.c_int32),
                ("dtype", _DataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_get_pointer.restype = ctypes.c_void_p
_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_is_valid = ctypes.pythonapi.PyCapsule_IsValid
_is_valid.restype = ctypes.c_int
_is_valid.argtypes = [ctypes.py_object, ctypes.c_char_p]

# (type code, bits) -> the element kind names of _arrays
_KINDS = {(2, 32): "f32", (2, 16): "f16", (4, 16): "bf16", (0, 32): "i32", (1, 8): "u8",
          (0, 8): "i8", (1, 16): "u16", (0, 16): "i16", (0, 64): "i64", (2, 64): "f64"}


def read(obj, name, stream=None):
    """(capsule, data pointer, kind, shape, byte strides, (device type, id)) of obj."""
    try:
        dev_type, dev_id = obj.__dlpack_device__()
        capsule = obj.__dlpack__() if stream is None else obj.__dlpack__(stream=stream)
    except Exception as e:  # the producer's own refusal, reported with the argument's name
        raise ValueError("%s: __dlpack__ failed: %s" % (name, e))
    if not _is_valid(capsule, b"dltensor"):
        raise ValueError("%s: __dlpack__ did not return an unused \"dltensor\" capsule" % name)
    t = _DLTensor.from_address(_get_pointer(capsule, b"dltensor"))
    if t.dtype.lanes != 1:
        raise ValueError("%s: DLPack dtype with %d lanes is not supported" % (name, t.dtype.lanes))
    kind = _KINDS.get((t.dtype.code, t.dtype.bits), "dlpack(code=%d,bits=%d)" % (t.dtype.code, t.dtype.bits))
    itemsize = max(t.dtype.bits // 8, 1)
    shape = tuple(t.shape[i] for i in range(t.ndim))
    if t.strides:
        strides = tuple(t.strides[i] * itemsize for i in range(t.ndim))
    else:  # NULL strides: compact row-major
        strides, acc = [], itemsize
        for n in reversed(shape):
            strides.insert(0, acc)
            acc *= max(n, 1)
        strides = tuple(strides)
    return capsule, (t.data or 0) + t.byte_offset, kind, shape, strides, (t.device.device_type, t.device.device_id)
