"""Python numbers checked against the C field they are stored in.

ctypes stores an int that does not fit a field modulo its width (2**32 + 256 in an int32_t is
256) and a float beyond float's range as infinity, and raises a TypeError that names no
argument for a value of the wrong type. Every number the package hands to the C ABI passes
through here first, so that each of those is a dfsel.Error naming the argument and its value.
"""
import math
import numbers
import operator

from ._abi import Error, Status

INT32 = (-(1 << 31), (1 << 31) - 1, "int32_t")
INT64 = (-(1 << 63), (1 << 63) - 1, "int64_t")
UINT64 = (0, (1 << 64) - 1, "uint64_t")
POINTER = (0, (1 << 64) - 1, "a 64-bit address")
_FLT_MAX = 3.4028234663852886e38


def integer(value, name, c_type=INT32, lo=None, hi=None):
    """value as an int within c_type (and [lo, hi] when given); bool and non-integers refused."""
    if isinstance(value, bool) or not _is_integer(value):
        raise Error(Status.INVALID_ARGUMENT, "%s = %r is not an integer" % (name, value))
    v = operator.index(value)
    c_lo, c_hi, c_name = c_type
    if not c_lo <= v <= c_hi:
        raise Error(Status.INVALID_ARGUMENT, "%s = %d does not fit the C field (%s, [%d, %d])"
                    % (name, v, c_name, c_lo, c_hi))
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise Error(Status.INVALID_ARGUMENT, "%s = %d must be in [%s, %s]" % (
            name, v, "-inf" if lo is None else lo, "inf" if hi is None else hi))
    return v


def real(value, name):
    """value as a float that a C float holds as it is (or NaN / infinity given as such)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise Error(Status.INVALID_ARGUMENT, "%s = %r is not a real number" % (name, value))
    v = float(value)
    if math.isfinite(v) and abs(v) > _FLT_MAX:
        raise Error(Status.INVALID_ARGUMENT, "%s = %r is beyond the range of a C float (%g)" % (name, value, _FLT_MAX))
    return v


def _is_integer(value):
    if isinstance(value, numbers.Integral):
        return True
    try:  # NumPy and torch integer scalars
        operator.index(value)
        return not isinstance(value, float)
    except TypeError:
        return False
