"""The C core's MatMulNBits (``pa_nbits_rows`` / ``pa_nbits_panel``,
kernels/nbits.c).  Thin: one call each, status codes to exceptions."""
from . import check, ffi, lib

__all__ = ["rows", "panel"]


def _zeros(zp):
    """(packed uint8 zero points, float zero points) as pointers."""
    if zp is None:
        return ffi.NULL, ffi.NULL
    if zp.dtype.kind == "u":
        return ffi.from_buffer("uint8_t[]", zp), ffi.NULL
    return ffi.NULL, ffi.from_buffer("float[]", zp)


def rows(a, b, scales, zp, bits, block, n, bias, y, ws):
    """``y`` (m, n) = ``a`` (m, k) @ W^T (+ ``bias``) for m <= 64; every
    array C-contiguous, float32 but B (uint8) and packed zero points;
    ``ws`` m * blocks * block floats."""
    m, k = a.shape
    zu, zf = _zeros(zp)
    check(lib.pa_nbits_rows(ffi.from_buffer("float[]", a), m, k, ffi.from_buffer("uint8_t[]", b),
                            bits, block, ffi.from_buffer("float[]", scales), zu, zf, n,
                            ffi.NULL if bias is None else ffi.from_buffer("float[]", bias),
                            ffi.from_buffer("float[]", y),
                            ffi.from_buffer("float[]", ws)),
          "pa_nbits_rows")


def panel(b, scales, zp, bits, block, k, n, n0, n1, out):
    """W's rows [n0, n1) into ``out`` (n1 - n0, k), C-contiguous."""
    zu, zf = _zeros(zp)
    check(lib.pa_nbits_panel(ffi.from_buffer("uint8_t[]", b), bits, block, k,
                             ffi.from_buffer("float[]", scales), zu, zf, n, n0, n1,
                             ffi.from_buffer("float[]", out)), "pa_nbits_panel")
