"""An NCHW <-> NHWC Transpose of few channels in C (``pa_transpose_planes``):
the image a model reads, into the NHWC region after it (runtime/nhwc.py).
NumPy copies it one channel plane at a time, each a strided pass over the
whole output (164 us for ddddocr's 3 x 416 x 416 input); the C kernel
reads every plane once per block of 16 pixels and writes each output
block once (AVX-512 shuffles for 2-4 channels; elsewhere, and for other
channel counts, NumPy's copies stay: value by value is no faster), threads
sharing a large image.  Values move as 4-byte words: NumPy's bits."""
import numpy as np

from ..._native import check, ffi, lib

__all__ = ["planes_record", "run_planes", "RUN_MIN_VALUES"]

#: a Transpose run alone (not in a batch) calls the C kernel from this many
#: values on: below, the call's Python cost (a few us) is more than NumPy's
#: plane copies take (3 x 40 x 40: 4.2 vs 2.6 us; 3 x 160 x 160: 12.7 vs 20)
RUN_MIN_VALUES = 1 << 14


def _geometry(x, y, n, c, to_nhwc):
    """(n, c, hw) when ``x`` -> ``y`` is what the C kernel takes: two
    C-contiguous arrays of one 4-byte plain dtype and size, apart, of a
    channel count the C kernel shuffles in vectors; else None."""
    if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
        return None
    if x.dtype != y.dtype or x.dtype.itemsize != 4 or x.dtype.kind not in "fiu" or \
            x.size != y.size or not x.flags.c_contiguous or not y.flags.c_contiguous:
        return None
    if x.size == 0 or n * c == 0 or x.size % (n * c) or np.may_share_memory(x, y):
        return None
    if not lib.pa_transpose_planes_vectorised(c):
        return None     # value by value in C: no faster than NumPy's plane copies
    return n, c, x.size // (n * c)


def planes_record(x, y, n, c, to_nhwc):
    """[the ``transpose_planes`` record] of ``x`` (n images of c channels,
    NCHW when ``to_nhwc``, else NHWC) into ``y``, or None (see
    :func:`_geometry`)."""
    g = _geometry(x, y, n, c, to_nhwc)
    if g is None:
        return None
    return [("transpose_planes", None, None, x, None, y, g + (int(bool(to_nhwc)),))]


def run_planes(x, y, n, c, to_nhwc, workers):
    """Run that reorder in C; False (nothing done) where it does not take
    the arrays or they are fewer than RUN_MIN_VALUES."""
    g = None if x.size < RUN_MIN_VALUES else _geometry(x, y, n, c, to_nhwc)
    if g is None:
        return False
    xp, yp = (ffi.cast("void *", a.__array_interface__["data"][0]) for a in (x, y))
    check(lib.pa_transpose_planes(xp, yp, *g, int(bool(to_nhwc)), workers),
          "pa_transpose_planes")
    return True
