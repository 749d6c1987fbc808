"""ConvTranspose's native path: the C core's transposed convolution of
disjoint taps (``pa_deconv2d_run``, csrc/kernels/deconv.c) where the taps
of one input pixel do not overlap -- stride = kernel size, no dilation,
no padding, groups 1, NCHW, float32 (the 2x2 stride-2 upsampling layers
of segmentation heads: PP-OCR's text detector).  Each output row is
written once with the bias (and a fused activation) added in registers,
where the NumPy path writes the columns to scratch and adds each tap's
share into the output.  Anything else keeps the NumPy path
(:class:`.conv.ConvTranspose`)."""
import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .native import NATIVE_DTYPE, Pointers, native_act

__all__ = ["disjoint_taps", "NativeTranspose"]

#: the largest kernel side the C kernel takes (pa_deconv2d_t)
MAX_KERNEL = 16


def disjoint_taps(k, at, strides, dilations):
    """Whether ConvTranspose kernel ``k`` (its 2-D geometry set up) has taps
    that never overlap and the native path takes it."""
    pads = [int(v) for v in at.get("pads", None) or [0, 0, 0, 0]]
    return (k.use_native and k.dtype == NATIVE_DTYPE and not k.nhwc and not k.one_d
            and k.G == 1 and list(strides) == [k.kh, k.kw] and list(dilations) == [1, 1]
            and not any(pads) and k.Ho == k.H * k.kh and k.Wo == k.W * k.kw
            and k.kh <= MAX_KERNEL and k.kw <= MAX_KERNEL
            and native_act(k.attrs) is not None)


class NativeTranspose:
    """The whole tensor in one ``pa_deconv2d_run`` call, weights packed
    once (ONNX's [c_in][c_out][kh][kw] with the bias), no scratch."""

    def __init__(self, k, w):
        self.kernel = k
        self.desc = nk.deconv2d(n=k.N, c_in=k.C, h=k.H, w=k.W, c_out=k.cout, kh=k.kh,
                                kw=k.kw, act=native_act(k.attrs))
        bias = k.const(2, "bias").astype(k.dtype).reshape(-1) if k.has(2) else None
        n = int(lib.pa_deconv2d_packed_size(self.desc))
        if k.sizing:        # only the scratch is asked: nothing packed
            k.keep.count(n * 4)
            self.packed, self.packed_ptr = None, None
        else:
            self.packed = k.kept_layout((n,), np.float32, lambda: nk.pack_deconv2d(
                self.desc, np.asarray(w, np.float32), bias, k.kept_empty))
            self.packed_ptr = nk.fptr(self.packed)
        self.ptrs = Pointers(k)

    def run(self, xs, ys, sc):
        k = self.kernel
        x, y = self.ptrs(xs[0], ys[0])
        st = lib.pa_deconv2d_run(self.desc, self.packed_ptr, x, y, k.workers)
        if st:
            check(st, f"ConvTranspose {k.op.name!r}")

    def call(self, xs, ys):
        """The run as one ``pa_call_t`` record (batched with its neighbours')."""
        return ("deconv2d", self.desc, self.packed_ptr, nk.fptr(xs[0]), None, nk.fptr(ys[0]),
                ())
