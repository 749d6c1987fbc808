"""The C core's 8-bit matrix product for a few columns of W (``pa_qcols_pack``
/ ``pa_qcols_run``, kernels/qcols.c: W packed once, exact int32 sums, the
VNNI tile where the processor has it).  Thin: one call each, status codes
to exceptions."""
from . import check, ffi, lib
from .qconv import QTYPES

__all__ = ["pack", "packed_size", "run"]


def packed_size(k, n):
    """Bytes of a (k, n) W packed by :func:`pack` (0: sizes refused)."""
    return int(lib.pa_qcols_packed_size(k, n))


def pack(w, w_zp, packed):
    """``w`` (k, n) int8 or uint8 with ``w_zp`` (n,) int32 or None into
    ``packed`` (C-contiguous, 4-byte aligned, :func:`packed_size` bytes)."""
    k, n = w.shape
    zp = ffi.NULL if w_zp is None else ffi.from_buffer("int32_t[]", w_zp)
    check(lib.pa_qcols_pack(ffi.from_buffer("uint8_t[]", w), QTYPES[w.dtype], zp, k, n,
                            ffi.from_buffer(packed), packed.nbytes), "pa_qcols_pack")


def run(packed, a, a_zp, y):
    """``y`` (m, n) int32 = (a - a_zp) @ (w - w_zp), ``w`` packed in
    ``packed`` by :func:`pack`; ``a`` (m, k) uint8; all C-contiguous."""
    check(lib.pa_qcols_run(ffi.from_buffer(packed), ffi.from_buffer("uint8_t[]", a),
                           a.shape[0], int(a_zp), ffi.from_buffer("int32_t[]", y)),
          "pa_qcols_run")
