"""Finds and loads libdfsel.so once, on first use.

Search order: the DFSEL_LIBRARY environment variable (a file, or a folder holding
libdfsel.so; when set, nothing else is tried), libdfsel.so next to this package, then the
dynamic loader's own path (LD_LIBRARY_PATH, the ld.so cache, the system folders).
"""
import ctypes
import os
import threading

from ._abi import ABI_VERSION, PROTOTYPES, Error, Status

LIBRARY_NAME = "libdfsel.so"
_lock = threading.Lock()
_lib = None


def _candidates():
    env = os.environ.get("DFSEL_LIBRARY")
    if env:
        path = os.path.join(env, LIBRARY_NAME) if os.path.isdir(env) else env
        return [("DFSEL_LIBRARY=%s" % env, path)], True
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), LIBRARY_NAME)
    return [("next to the package", here), ("the loader path", LIBRARY_NAME)], False


def _open():
    tried = []
    candidates, explicit = _candidates()
    for where, path in candidates:
        if os.sep in path and not os.path.exists(path):
            tried.append("%s: %s does not exist" % (where, path))
            continue
        try:
            return ctypes.CDLL(path)
        except OSError as e:
            tried.append("%s: %s" % (where, e))
    hint = "" if explicit else (
        "; build it (scripts/build.sh build, then build/host/libdfsel.so) and set DFSEL_LIBRARY "
        "to its path, or install it on the loader path")
    raise Error(Status.IO_ERROR, "libdfsel.so could not be loaded (%s)%s" % ("; ".join(tried), hint))


def _declare(lib):
    for name, (restype, argtypes) in PROTOTYPES.items():
        try:
            fn = getattr(lib, name)
        except AttributeError:
            raise Error(Status.UNSUPPORTED, "the loaded libdfsel.so (%s) has no %s" % (lib._name, name))
        fn.restype = restype
        fn.argtypes = argtypes
    v = lib.dfsel_version()
    got = (v // 10000, v // 100 % 100)
    if got != ABI_VERSION:
        raise Error(Status.UNSUPPORTED,
                    "the loaded libdfsel.so (%s) is version %d.%d.%d; this package mirrors the "
                    "%d.%d ABI" % (lib._name, got[0], got[1], v % 100, ABI_VERSION[0], ABI_VERSION[1]))


def library():
    """The loaded libdfsel.so (a ctypes.CDLL); raises dfsel.Error when none can be loaded."""
    global _lib
    if _lib is None:
        with _lock:
            if _lib is None:
                lib = _open()
                _declare(lib)
                _lib = lib
    return _lib


def library_path():
    """The path of the loaded library, as the loader reports it."""
    return library()._name


def version():
    """The loaded library's version as (major, minor, patch)."""
    v = library().dfsel_version()
    return (v // 10000, v // 100 % 100, v % 100)


def cuda_device_count():
    """The GPUs the library's CUDA backend sees (0 for a build without CUDA)."""
    n = ctypes.c_int(0)
    library().dfsel_cuda_device_count(ctypes.byref(n))
    return n.value


def status_string(status):
    s = library().dfsel_status_string(int(status))
    return s.decode() if s else "unknown status"
