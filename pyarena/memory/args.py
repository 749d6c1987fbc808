"""The checks of size and alignment arguments shared by Arena and Policy.

One wording for every allocator argument: a size is any integral value
(int, NumPy integer, anything with ``__index__``; not bool) in a stated
range that fits a size_t; an alignment is a power of two in a stated
range.  The per-block ``align=`` of ``empty`` is parsed in C
(pyarena/_native/glue_shape.c) with the same wording.
"""
import operator

from ..errors import AlignmentError, InvalidArgumentError

SIZE_MAX = (1 << 64) - 1
MAX_ALIGN = 1 << 30

__all__ = ["SIZE_MAX", "MAX_ALIGN", "as_size", "as_pow2", "pow2_range"]


def pow2_range(low, high):
    """'a power of two from 8 to 2**30' -- the one way a range is stated."""
    def name(v):
        return f"2**{v.bit_length() - 1}" if v >= 1024 else str(v)
    return f"a power of two from {name(low)} to {name(high)}"


def as_size(value, what, low=0, optional=False):
    """``value`` as a Python int in [low, SIZE_MAX] (None passes when
    ``optional``); InvalidArgumentError naming ``what`` otherwise."""
    if value is None and optional:
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        v = operator.index(value)
    except TypeError:
        raise InvalidArgumentError(f"{what} must be an int{' or None' if optional else ''}, "
                                   f"not {value!r}") from None
    if v < low:
        raise InvalidArgumentError(f"{what} must be >= {low}, not {v!r}")
    if v > SIZE_MAX:
        raise InvalidArgumentError(f"{what} {v!r} does not fit in a size_t (at most 2**64 - 1)")
    return v


def as_pow2(value, what, low, high):
    """``value`` as an int power of two in [low, high]; InvalidArgumentError
    if not an integer, AlignmentError if out of range or not a power of two."""
    v = as_size(value, what) if not isinstance(value, int) or value >= 0 else value
    if v < low or v > high or v & (v - 1):
        raise AlignmentError(f"{what} {value!r} is not {pow2_range(low, high)}")
    return v
