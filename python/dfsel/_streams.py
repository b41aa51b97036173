"""The cudaStream_t a run is enqueued on."""
import ctypes
import sys

from ._abi import Error, Status


def current(framework, device_index):
    """The caller's current stream: CuPy's for CuPy arrays, otherwise torch's when torch is
    loaded, then CuPy's when CuPy is loaded, else the legacy default stream (NULL)."""
    if framework == "cupy":
        cupy = sys.modules.get("cupy")
        if cupy is not None:
            return cupy.cuda.get_current_stream().ptr or None
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.cuda.current_stream(device_index).cuda_stream or None
    cupy = sys.modules.get("cupy")
    if cupy is not None:
        return cupy.cuda.get_current_stream().ptr or None
    return None


def handle(stream, name="stream"):
    """A stream given by the caller as a raw handle: an int, a torch.cuda.Stream (cuda_stream),
    a CuPy stream (ptr) or a ctypes.c_void_p."""
    if isinstance(stream, int):
        return stream or None
    for attr in ("cuda_stream", "ptr"):
        h = getattr(stream, attr, None)
        if isinstance(h, int):
            return h or None
    if isinstance(stream, ctypes.c_void_p):
        return stream.value
    raise Error(Status.INVALID_ARGUMENT, "%s = %r: expected an int cudaStream_t, a torch.cuda.Stream or "
                "a CuPy stream" % (name, stream))


def for_run(backend, framework, device_index, stream):
    """The cudaStream_t of a plan's run or wait: None on the CPU backend (which has none; a
    stream given there is refused), else `stream` or the caller's current stream on the plan's
    device."""
    if backend == "cpu":
        if stream is not None:
            raise Error(Status.INVALID_ARGUMENT, "stream = %r on a CPU plan, which runs on the calling thread "
                        "and has no stream; leave stream unset" % (stream,))
        return None
    if stream is None:
        return current(framework, device_index)
    return handle(stream)
