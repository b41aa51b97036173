"""What every plan kind (dfsel.Plan, dfsel.DSparkPlan) does with the library handle it owns:
create it, claim it for one call at a time, and free it.

A plan serves one call at a time (dfsel.h, Threads; dspark.h). Each plan holds a lock that a
call takes without waiting for its whole length: a call on a plan that another thread is using
raises dfsel.Error with status BUSY at once, before anything is read or written, as the library
itself would answer; the lock also keeps the plan's reused input structs to one caller.
"""
import contextlib
import ctypes
import re
import threading

from . import _cvalues
from ._abi import Error, Status

_MSG_LEN = 1024


def python_message(msg, names):
    """A message of the library with the C fields it names written as the Python arguments:
    names is a sequence of (pattern, replacement), applied in order."""
    for pat, rep in names:
        msg = re.sub(pat, rep, msg)
    return msg


class Owned:
    """A library handle (_ptr) and the arrays it reads (_keep). Subclasses name the library
    calls that free the handle (_destroy) and read its last message (_last_error), the C fields
    its messages may name as Python arguments (_py_names), and call _open() before anything
    else in __init__."""
    _destroy = None
    _last_error = None
    _py_names = ()

    def _open(self):
        self._ptr = None
        self._lock = threading.Lock()  # held by the call in progress (taken without waiting)

    def _check_open(self):
        if not self._ptr:
            raise closed_error()

    def _claim(self):
        if not self._lock.acquire(blocking=False):
            raise busy_error(self)

    def _error(self, status):
        """The dfsel.Error of a failed call on this plan."""
        if status == Status.BUSY:  # the plan's message belongs to the call that holds it
            return busy_error(self)
        msg = getattr(self._lib, self._last_error)(self._ptr).decode(errors="replace")
        return Error(status, python_message(msg, self._py_names))

    def _outputs_request(self, n_blocks, want, fields):
        """The n_blocks of an outputs() call (max_blocks when None), after the plan is found open
        and want a sequence of names among fields."""
        self._check_open()
        if isinstance(want, str):
            raise Error(Status.INVALID_ARGUMENT, "want = %r: expected a sequence of field names, such as (%r,)"
                        % (want, want))
        for w in want:
            if w not in fields:
                raise Error(Status.INVALID_ARGUMENT, "want names %r, which is no output; the fields are %s" % (
                    w, ", ".join(fields)))
        if n_blocks is None:
            return self.max_blocks
        return _cvalues.integer(n_blocks, "n_blocks", _cvalues.INT32, 1, self.max_blocks)

    def close(self):
        if self._ptr:
            self._claim()
            try:
                if getattr(self._lib, self._destroy)(self._ptr) == Status.BUSY:
                    raise busy_error(self)
                self._ptr = None
                self._keep = None
            finally:
                self._lock.release()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def __enter__(self):
        return self

    # A copy would share the library handle: the first of the two to be collected would destroy
    # the plan the other still runs (or, once the address is reused, another plan's).
    def __copy__(self):
        raise not_copyable(self)

    def __deepcopy__(self, memo):
        raise not_copyable(self)

    def __reduce_ex__(self, protocol):
        raise not_copyable(self)

    def __reduce__(self):
        raise not_copyable(self)

    def __exit__(self, *exc):
        self.close()


def closed_error(where=""):
    return Error(Status.INVALID_ARGUMENT, where + "the plan is closed")


def not_copyable(plan):
    return TypeError("a dfsel.%s cannot be copied or pickled: it owns its library plan, which only it may run "
                     "and destroy; create another plan from the same weights instead" % type(plan).__name__)


def busy_error(plan):
    return Error(Status.BUSY, "%r is in use by another call (another thread); a plan serves one call at a "
                 "time: give each thread its own plan" % (plan,))


@contextlib.contextmanager
def claimed(plans, kind):
    """Every plan of a call, each an open `kind` named once, claimed for the call: all of them,
    or none and dfsel.Error."""
    for i, p in enumerate(plans):
        if not isinstance(p, kind):
            raise Error(Status.INVALID_ARGUMENT, "plans[%d] = %r is not a dfsel.%s" % (i, p, kind.__name__))
        if not p._ptr:
            raise closed_error("plans[%d]: " % i if len(plans) > 1 else "")
        for j in range(i):
            if plans[j] is p:
                raise Error(Status.INVALID_ARGUMENT, "plans[%d] and plans[%d] are the same plan; a plan may "
                            "appear once in a group" % (j, i))
    held = []
    try:
        for p in plans:
            p._claim()
            held.append(p)
        yield
    finally:
        for p in held:
            p._lock.release()


def create(create_call, desc, names=()):
    """The handle a dfsel_*_create call makes of desc, or its failure as dfsel.Error (its message
    through python_message with names)."""
    msg = ctypes.create_string_buffer(_MSG_LEN)
    ptr = ctypes.c_void_p()
    st = create_call(ctypes.byref(desc), ctypes.byref(ptr), msg, _MSG_LEN)
    if st != Status.SUCCESS:
        raise Error(st, python_message(msg.value.decode(errors="replace"), names))
    return ptr.value


def group_size(plans, **sequences):
    """len(plans), after every sequence given (not None) was found to have one entry per plan."""
    n = len(plans)
    for name, seq in sequences.items():
        if seq is not None and len(seq) != n:
            raise Error(Status.INVALID_ARGUMENT, "%s has %d entries for %d plans" % (name, len(seq), n))
    if n == 0:
        raise Error(Status.INVALID_ARGUMENT, "plans is empty")
    return n
