"""The dtype cache shared by the arena and the pool.

Shapes are parsed in C (pyarena/_native/glue_shape.c, the one shape parser);
dtypes are resolved here once and kept in :data:`CACHE`, which the native
``empty`` looks up first, so the common case costs one dict lookup.
"""
import numpy as np

__all__ = ["CACHE", "resolve_dtype"]

#: dtype spec (np.float32, "float32", "f4" ...) -> np.dtype
CACHE = {}


def resolve_dtype(dtype):
    """The ``np.dtype`` for ``dtype`` (None: float64, like np.empty);
    TypeError naming it if unknown or if it holds Python objects (raw
    memory cannot own references)."""
    try:
        return CACHE[dtype]
    except (KeyError, TypeError):
        pass
    try:
        dt = np.dtype(np.float64 if dtype is None else dtype)
    except Exception as exc:
        raise TypeError(f"unknown dtype {dtype!r}: {exc}") from None
    if dt.hasobject:
        raise TypeError(f"dtype {dt} holds Python objects and cannot live in "
                        "raw arena or pool memory")
    try:
        CACHE[dtype] = dt
    except TypeError:  # unhashable spec (e.g. a list of fields)
        pass
    return dt
