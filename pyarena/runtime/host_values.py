"""Values that live outside the arena (``Tensor.host``): what a feed of one
must be, and how it is taken.

A sequence is a Python list of NumPy arrays (a list or tuple fed; each
element taken with ``np.asarray``); an optional is None or its value (a
list: a sequence, else an array); an optional input may be left unfed (None).

A string tensor is a NumPy object array of Python ``str``, as onnxruntime
takes and returns them: a feed may be an object array of ``str`` (or of
UTF-8 ``bytes``), a NumPy unicode array (``dtype "<U..."``) or UTF-8 bytes
(``"S..."``), or a list of those; anything else -- numbers, a ``str``
fed where a float is declared -- is an :class:`InvalidArgumentError`
naming the input.  The executor keeps these values with its pool tensors
(:mod:`.dynamic`): the plan gives them no bytes.
"""
import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["host_feed", "as_strings", "as_sequence"]


def _bad(name, kind, why):
    return InvalidArgumentError(f"feed {name!r}: the input holds {kind}s; {why}")


def as_strings(val, name):
    """``val`` as an object array of str; InvalidArgumentError naming
    ``name`` when it holds anything else."""
    a = val if isinstance(val, np.ndarray) else np.asarray(val, dtype=object) \
        if isinstance(val, (list, tuple)) else np.asarray(val)
    kind = a.dtype.kind
    if kind == "U":
        return a.astype(object)
    if kind == "S":
        try:
            return np.char.decode(a, "utf-8").astype(object)
        except UnicodeDecodeError as exc:
            raise _bad(name, "string", f"its bytes are not UTF-8 ({exc.reason})") from None
    if kind != "O":
        raise _bad(name, "string", f"got an array of {a.dtype}")
    out = np.empty(a.shape, object)
    flat, dst = a.reshape(-1), out.reshape(-1)
    for i, v in enumerate(flat):         # (a check per element: no vectorised isinstance)
        if type(v) is str:
            dst[i] = v
        elif isinstance(v, (str, np.str_)):
            dst[i] = str(v)
        elif isinstance(v, (bytes, np.bytes_)):
            try:
                dst[i] = bytes(v).decode("utf-8")
            except UnicodeDecodeError as exc:
                raise _bad(name, "string", f"element {i} is not UTF-8 ({exc.reason})") \
                    from None
        else:
            raise _bad(name, "string", f"element {i} is a {type(v).__name__}")
    return out


def as_sequence(val, name):
    """``val`` (a list or tuple of arrays) as a list of arrays;
    InvalidArgumentError naming ``name`` for anything else."""
    if not isinstance(val, (list, tuple)):
        raise _bad(name, "sequence", f"a list of arrays is expected, not a "
                                     f"{type(val).__name__}")
    out = []
    for i, v in enumerate(val):
        if isinstance(v, (list, tuple)) or v is None:
            raise _bad(name, "sequence", f"element {i} is a {type(v).__name__}, not an array")
        a = np.asarray(v)
        if a.dtype.kind not in "biufc":
            a = as_strings(a, f"{name}[{i}]")
        out.append(a)
    return out


def host_feed(t, val, name):
    """The value a feed ``val`` of host tensor ``t`` is held as: strings as
    an object array of str, a sequence as a list of arrays, an optional as
    None or its value (a list: a sequence; else a tensor)."""
    if t.host == "string":
        return as_strings(val, name)
    if t.host == "sequence":
        return as_sequence(val, name)
    if val is None:
        return None
    if isinstance(val, (list, tuple)):
        return as_sequence(val, name)
    a = np.asarray(val)
    return a if a.dtype.kind in "biufc" else as_strings(a, name)
