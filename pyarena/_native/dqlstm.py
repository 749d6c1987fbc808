"""The C core's DynamicQuantizeLSTM time step and walk (``pa_dqlstm_step``,
``pa_dqlstm_run``, kernels/dqlstm.c).  Thin: one call each, status codes to
exceptions."""
from ..errors import InvalidArgumentError
from . import check, ffi, lib

__all__ = ["run", "step"]


def _f(a):
    return ffi.from_buffer("float[]", a)


def step(h_src, c, xw, bias, r_packed, r_scale, g, c_out, h_out, hq, acc, mult):
    """One step for the rows of ``h_src`` (n, H): ``r_packed`` R (H, 4H)
    packed by ``qrows.pack``, ``bias`` (4H,) or None; every array
    C-contiguous; writes ``c_out`` and ``h_out`` (workspace: g, hq, acc, mult)."""
    n, hidden = h_src.shape
    check(lib.pa_dqlstm_step(_f(h_src), _f(c), _f(xw), ffi.NULL if bias is None else _f(bias),
                             ffi.from_buffer(r_packed), _f(r_scale), n, hidden, _f(g),
                             _f(c_out), _f(h_out), ffi.from_buffer("uint8_t[]", hq),
                             ffi.from_buffer("int32_t[]", acc), _f(mult)), "pa_dqlstm_step")


def run(xw, reverse, bias, r_packed, r_scale, h, c, y, g, hq, acc, mult):
    """Every step of ``xw`` (steps, n, 4H) from the state ``h``, ``c`` (n, H,
    left holding the last); ``y`` (steps, n, H) float32 view whose last axis
    is contiguous, or None, gets each step's h.  As :func:`step` otherwise."""
    steps, n, _ = xw.shape
    hidden = h.shape[1]
    yp, y_step, y_row = ffi.NULL, 0, 0
    if y is not None:
        if y.dtype.itemsize != 4 or y.strides[2] != 4 or any(s % 4 for s in y.strides) or \
                min(y.strides) < 0:
            raise InvalidArgumentError("pa_dqlstm_run: y needs float32 rows of contiguous units")
        yp = ffi.cast("float *", y.__array_interface__["data"][0])
        y_step, y_row = y.strides[0] // 4, y.strides[1] // 4
    check(lib.pa_dqlstm_run(_f(xw), steps, 1 if reverse else 0,
                            ffi.NULL if bias is None else _f(bias), ffi.from_buffer(r_packed),
                            _f(r_scale), n, hidden, _f(h), _f(c), yp, y_step, y_row, _f(g),
                            ffi.from_buffer("uint8_t[]", hq), ffi.from_buffer("int32_t[]", acc),
                            _f(mult)), "pa_dqlstm_run")
