"""The C core's float32 LSTM time loop (``pa_lstm_run``, kernels/lstm.c).
Thin: one call, status codes to exceptions."""
from . import check, ffi, lib

__all__ = ["run"]


def _f(a):
    return ffi.from_buffer("float[]", a)


def _view(a):
    """``float *`` to the first element of a view, and its first two
    strides in elements (its last axis must be contiguous)."""
    return (ffi.cast("float *", a.__array_interface__["data"][0]),
            a.strides[0] // 4, a.strides[1] // 4)


def run(x, wt, bias, rt, h, c, y, reverse, g):
    """Every step of one direction: ``x`` a [steps, n, input] view, ``y``
    None or a [steps, n, H] view (each with a contiguous last axis; either
    may be a transposed layout-1 view); ``wt`` (input, 4H) and ``rt`` (H,
    4H), ``bias`` (4H,) or None; ``h`` and ``c`` (n, H), the state in and
    out; ``g`` a workspace of 4H floats; all but ``x`` and ``y``
    C-contiguous.  float32 throughout."""
    steps, n, inp = x.shape
    xp, xs, xr = _view(x)
    yp, ys, yr = (ffi.NULL, 0, 0) if y is None else _view(y)
    check(lib.pa_lstm_run(xp, xs, xr, inp, _f(wt), ffi.NULL if bias is None else _f(bias),
                          _f(rt), n, h.shape[1], steps, 1 if reverse else 0, _f(h), _f(c),
                          yp, ys, yr, _f(g)), "pa_lstm_run")
