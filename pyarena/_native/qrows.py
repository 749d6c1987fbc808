"""The C core's 8-bit matrix product for a few rows of A
(``pa_qmatmul_rows``, kernels/qrows.c): exact int32 sums, W read where it
lies.  Thin: one call, status codes to exceptions."""
from . import check, ffi, lib
from .qconv import QTYPES

__all__ = ["matmul_rows"]


def matmul_rows(a, a_zp, w, w_zp, y):
    """``y`` (m, n) int32 = (a - a_zp) @ (w - w_zp): ``a`` (m, k) uint8, ``w``
    (k, n) int8 or uint8, ``w_zp`` (n,) int32 or None; all C-contiguous."""
    m, k = a.shape
    n = w.shape[1]
    zp = ffi.NULL if w_zp is None else ffi.from_buffer("int32_t[]", w_zp)
    check(lib.pa_qmatmul_rows(ffi.from_buffer("uint8_t[]", a), m, k, int(a_zp),
                              ffi.from_buffer("uint8_t[]", w), QTYPES[w.dtype], zp, n,
                              ffi.from_buffer("int32_t[]", y)), "pa_qmatmul_rows")
