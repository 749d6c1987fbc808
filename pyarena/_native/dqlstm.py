"""The C core's DynamicQuantizeLSTM time step (``pa_dqlstm_step``,
kernels/dqlstm.c).  Thin: one call, status codes to exceptions."""
from . import check, ffi, lib
from .qconv import QTYPES

__all__ = ["step"]


def _f(a):
    return ffi.from_buffer("float[]", a)


def step(h_src, c, xw, bias, r, r_zp, r_scale, g, c_out, h_out, hq, acc, mult):
    """One step for the rows of ``h_src`` (n, H): ``r`` (H, 4H) 8-bit,
    ``r_zp`` (4H,) int32 or None, ``bias`` (4H,) or None; every array
    C-contiguous; writes ``c_out`` and ``h_out`` (workspace: g, hq, acc, mult)."""
    n, hidden = h_src.shape
    check(lib.pa_dqlstm_step(_f(h_src), _f(c), _f(xw), ffi.NULL if bias is None else _f(bias),
                             ffi.from_buffer("uint8_t[]", r), QTYPES[r.dtype],
                             ffi.NULL if r_zp is None else ffi.from_buffer("int32_t[]", r_zp),
                             _f(r_scale), n, hidden, _f(g), _f(c_out), _f(h_out),
                             ffi.from_buffer("uint8_t[]", hq), ffi.from_buffer("int32_t[]", acc),
                             _f(mult)), "pa_dqlstm_step")
