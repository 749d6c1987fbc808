"""Shape and dtype checks shared by every allocator front end.

Kept apart so the arena, the pool and plan binding validate the same way
and give the same messages.  The common case (a cached dtype and a tuple of
non-negative ints) costs a dict lookup and ``math.prod``.
"""
import math
import operator

import numpy as np

from ..errors import InvalidArgumentError

# 2**63 - 1: the C side works in size_t, NumPy in intp.
MAX_BYTES = (1 << 63) - 1

_DTYPES = {}


def resolve_dtype(dtype):
    """The ``np.dtype`` for ``dtype``; TypeError naming it if unknown or if
    it holds Python objects (raw memory cannot own references)."""
    try:
        return _DTYPES[dtype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(dtype)
    except Exception as exc:
        raise TypeError(f"unknown dtype {dtype!r}: {exc}") from None
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects and cannot live in "
                        "raw arena or pool memory")
    try:
        _DTYPES[dtype] = dt
    except TypeError:  # unhashable spec (e.g. a list of fields)
        pass
    return dt


def normalize_shape(shape):
    """A tuple of ints from an int or a sequence of ints."""
    if isinstance(shape, (int, np.integer)):
        return (operator.index(shape),)
    try:
        return tuple([operator.index(d) for d in shape])
    except TypeError:
        raise TypeError(f"shape must be an int or a sequence of ints, "
                        f"not {shape!r}") from None


def nbytes_for(shape, dt):
    """Bytes for ``shape`` (a tuple) of ``dt``; InvalidArgumentError for a
    negative dimension or a size that overflows, TypeError for a dimension
    that is not an integer."""
    n = math.prod(shape)
    if type(n) is not int:  # floats, NumPy integers, junk: the slow path
        shape = normalize_shape(shape)
        n = math.prod(shape)
    if shape and min(shape) < 0:
        raise InvalidArgumentError(f"negative dimension in shape {shape!r}")
    nbytes = n * dt.itemsize
    if nbytes > MAX_BYTES:
        raise InvalidArgumentError(
            f"shape {shape!r} of {dt} needs {nbytes:,} bytes, more than "
            f"the {MAX_BYTES:,} a size can hold")
    return nbytes
