"""The 8-bit convolutions' and matrix products' native path (``pa_qconv2d_run``, the C core's
integer GEMM over im2col blocks and its depthwise kernel), chosen by
:meth:`.quantized_conv._QConv.setup` when the C kernel takes the op:
8-bit input and weights, a per-tensor input zero point (constant or
computed at run time), int32 (ConvInteger) or 8-bit (QLinearConv) output.
The arithmetic is onnxruntime's (exact int32 accumulators, float32
requantization rounded half to even); the NumPy path computes the same
values in floating point (tests/runtime/test_quantized_conv_native.py
compares the two bit for bit)."""
import numpy as np

from ..._native import qconv as nq
from ...errors import InvalidArgumentError
from .native import Pointers

__all__ = ["QConvNative", "try_native", "try_native_matmul"]

_BYTES = (np.dtype(np.uint8), np.dtype(np.int8))


def _ohwi(k, w):
    """Conv ``k``'s 8-bit weights as [c_out][kh][kw][c_in / groups]
    (``w``: OIHW / OIW as ONNX has them, or OHWI for NHWC layouts)."""
    if k.nhwc:
        return w.reshape(k.cout, k.kh, k.kw, -1)
    return w.reshape(k.cout, -1, k.kh, k.kw).transpose(0, 2, 3, 1)


def _make(k, geometry, w_ohwi, wzp, bias, xzp, x_dtype):
    """A QConvNative for ``geometry`` (the pa_conv2d_t fields), or None."""
    ydt = np.dtype(k.outs[0].dtype)
    if not k.use_native or np.dtype(x_dtype) not in _BYTES or \
            np.dtype(w_ohwi.dtype) not in _BYTES:
        return None
    req = k.requant_params()
    if req is NotImplemented:
        return None
    if (req is None) != (ydt == np.dtype(np.int32)) or (req is not None and ydt not in _BYTES):
        return None
    bias = np.asarray(bias, np.float64)
    if np.any(bias != np.rint(bias)) or np.abs(bias).max(initial=0) >= 2**31:
        return None
    mult, yzp, lo, hi = req if req is not None else (None, 0, 0, 0)
    fixed = getattr(k, "fixed_requant", lambda: None)()
    mode = None
    if fixed is not None:       # TFLite's multipliers and shifts, in the epilogue
        if not geometry["nhwc"]:
            return None
        # (FULLY_CONNECTED rounds once)
        mode = "single" if getattr(k, "single_rounding", False) else "fixed"
        fixed = np.concatenate([np.broadcast_to(v, (geometry["c_out"],)) for v in fixed])
        mult = None
    try:
        desc = nq.qconv2d(**geometry, x_dtype=x_dtype, w_dtype=w_ohwi.dtype, y_dtype=ydt,
                          x_zp=0 if xzp is None else int(xzp), y_zp=int(yzp), y_lo=int(lo),
                          y_hi=int(hi), requant=mode)
        size, scratch = nq.packed_size(desc), nq.scratch_size(desc)
    except (InvalidArgumentError, OverflowError):
        return None
    return QConvNative(k, desc, size, scratch, w_ohwi, wzp, bias, mult, fixed)


def try_native_matmul(k, b, bzp, azp, m, bias=None):
    """The native path of an integer matrix product ``A (m, K) @ b (K, N)``
    (an NHWC 1x1 convolution of m pixels; ``bias`` (N,) int32 added to
    the accumulators, None: the op has one that is not per column), or
    None."""
    K, N = b.shape
    if bias is None:
        return None
    geometry = dict(nhwc=True, n=1, c_in=K, h=m, w=1, c_out=N, h_out=m, w_out=1, kh=1, kw=1,
                    sh=1, sw=1, dh=1, dw=1, pad_top=0, pad_left=0, groups=1)
    w = np.ascontiguousarray(b.T).reshape(N, 1, 1, K)
    return _make(k, geometry, w, bzp, bias, azp, k.ins[k.layout[0]].dtype)


def try_native(k, w, wzp, bias, xzp):
    """A :class:`QConvNative` for convolution kernel ``k`` (geometry set,
    ``w`` its weights, ``wzp`` / ``bias`` per output channel, ``xzp`` the
    constant input zero point or None when read per run), or None when the
    op stays on the NumPy path."""
    geometry = dict(nhwc=k.nhwc, n=k.N, c_in=k.c_in, h=k.H, w=k.W, c_out=k.cout, h_out=k.Ho,
                    w_out=k.Wo, kh=k.kh, kw=k.kw, sh=k.sh, sw=k.sw, dh=k.dh, dw=k.dw,
                    pad_top=k.pt, pad_left=k.pl, groups=k.G)
    return _make(k, geometry, _ohwi(k, w), wzp, bias, xzp, k.ins[0].dtype)


class QConvNative:
    """One ``pa_qconv2d_run`` call per run over the whole tensor; the
    weights packed once into the weights arena; also one ``pa_call_t``
    record (:meth:`call`)."""

    def __init__(self, k, desc, size, scratch, w, wzp, bias, mult, fixed=None):
        self.kernel, self.desc, self.scratch_bytes = k, desc, scratch
        self.scratch = [((scratch,), np.uint8)] if scratch else []
        self.packed = None
        if not k.sizing:
            def pack():     # (fixed: TFLite's multipliers then shifts, packed too)
                packed = k.kept_empty(size, np.uint8)
                zps = np.asarray(wzp, np.int64).astype(np.int32)
                b = np.asarray(bias).astype(np.int64).astype(np.int32)
                if fixed is not None:
                    nq.pack_fixed(desc, w, zps, b, fixed.astype(np.int32), packed)
                else:
                    nq.pack(desc, w, zps, b, mult, packed)
                return packed
            self.packed = k.kept_layout((size,), np.uint8, pack)
            self.packed_ptr = nq.ptr(self.packed)
        self.ptrs = Pointers(k)

    def run(self, x, y, sc, x_zp=None):
        """The op on input ``x`` into ``y`` (contiguous, the descriptor's
        layout), ``x_zp`` the input zero point when it is read per run."""
        k = self.kernel
        if x_zp is not None:
            self.desc.x_zp = int(x_zp)
        s = sc[0] if self.scratch_bytes else None
        xp, yp, sp = self.ptrs(x, y, s)
        nq.run(self.desc, self.packed_ptr, xp, yp, sp, self.scratch_bytes, k.workers)

    def calls(self, x, y, sc):
        """The run on ``x`` into ``y`` (a constant input zero point) with
        scratch ``sc`` (None without any) as call records."""
        s = sc[0] if self.scratch_bytes else None
        return [("qconv2d", self.desc, self.packed_ptr, x, None, y, (self.scratch_bytes,), s)]
