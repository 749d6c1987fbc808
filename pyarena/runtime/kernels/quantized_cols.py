"""``MatMulInteger`` with a few columns of B on the C core's few-columns
product (``pa_qcols_pack`` / ``pa_qcols_run``, kernels/qcols.c): each
output column one dot product per row of A, 64 bytes of k per VNNI
instruction.  The 8-bit convolution's GEMM (the path of wider B,
:func:`.quantized_conv_native.try_native_matmul`) pads its tiles to 16
columns or more: text2tashkeel's attention scores (4096 rows of 512 bytes
against one column) took 0.27 ms there, about 0.04 ms here.  Chosen by
:meth:`.quantized_matmul._QMatMul.setup` for int32 out, uint8 A (its zero
point a constant or fed at run time), 8-bit B of at most
:data:`MAX_COLUMNS` columns; one thread.  The sums are exact int32, the
NumPy path's and onnxruntime's values
(tests/runtime/test_quantized_cols.py compares the three bit for bit)."""
import numpy as np

from ..._native import qcols

__all__ = ["MAX_COLUMNS", "QColsNative", "try_few_columns"]

#: the widest B taken (4096 x 512 rows of A, one thread: 16 columns 0.26
#: ms here, 0.39 ms on the GEMM; 32 columns 0.45 and 0.43)
MAX_COLUMNS = 16

_BYTES = (np.dtype(np.uint8), np.dtype(np.int8))


def try_few_columns(k, b, bzp):
    """A :class:`QColsNative` for integer product kernel ``k`` with the
    constant ``b`` (K, N) and its zero points ``bzp`` (N,), or None."""
    K, N = b.shape
    if not (k.integer and k.use_native) or N > MAX_COLUMNS or \
            np.dtype(k.ins[k.layout[0]].dtype) != np.uint8 or np.dtype(b.dtype) not in _BYTES:
        return None
    lo, hi = (0, 255) if np.dtype(b.dtype) == np.uint8 else (-128, 127)
    if k.azp_input is None and (k.azp != int(k.azp) or not 0 <= k.azp <= 255):
        return None
    if np.any(bzp != np.rint(bzp)) or np.any((bzp < lo) | (bzp > hi)) or \
            qcols.packed_size(K, N) == 0:
        return None
    return QColsNative(k, b, bzp)


class QColsNative:
    """B packed once (kept: the weights arena, or a compiled model's
    stored copy); one ``pa_qcols_run`` per run, no workspace."""

    scratch = []

    def __init__(self, k, b, bzp):
        self.a_zp = int(k.azp)
        words = -(-qcols.packed_size(*b.shape) // 4)        # int32 words: 4-byte aligned
        zp32 = np.ascontiguousarray(bzp, np.int32) if np.any(bzp) else None

        def pack():
            packed = k.kept_empty(words, np.int32)
            if not k.sizing:
                qcols.pack(np.ascontiguousarray(b), zp32, packed)
            return packed
        self.packed = k.kept_layout((words,), np.int32, pack)

    def run(self, a, y, sc, a_zp=None):
        """``y`` (M, N) int32 = (a - a_zp) @ (b - b_zp) for ``a`` (M, K)
        uint8; ``a_zp`` the zero point read at run time, else the
        constant's."""
        qcols.run(self.packed, a, self.a_zp if a_zp is None else int(a_zp), y)
