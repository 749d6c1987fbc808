"""Conv's paths on the C core's convolution (``pa_conv2d_run``), chosen by
:meth:`.conv.Conv._choose`.

* :class:`NativeConv` -- the whole tensor in one call: the depthwise
  kernel ("native-dw"), the packed SGEMM of a pointwise or disjoint-window
  convolution ("native-gemm"), the few-output / few-input / direct
  kernels ("native"); the C core picks the kernel by the geometry, so one
  class runs all three.  :class:`NativeResidual` adds a fused residual.
* :class:`NativeBands` -- the packed SGEMM band by band over padded input
  rows ("native-band": full NHWC convolutions).

Each packs its weights once (:func:`pack_weights`: the prior kernel's
packing when it is the same, :meth:`.conv.Conv._lender`), fuses the bias
and the activation, and needs no workspace beyond the padded band.
"""
import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .native import Pointers, native_act

__all__ = ["ohwi", "pack_weights", "NativeConv", "NativeResidual", "NativeBands"]


def ohwi(k, w, g):
    """Conv ``k``'s weights ``w`` as [c_out][kh][kw][c_in / groups] and the
    groups."""
    if k.attrs.get("weight_layout") == "1HWC":           # TFLite depthwise
        return w.reshape(k.kh, k.kw, k.cout).transpose(2, 0, 1)[..., None], k.c_in
    if k.nhwc:                                            # TFLite OHWI
        return w.reshape(k.cout, k.kh, k.kw, -1), g
    return w.reshape(k.cout, -1, k.kh, k.kw).transpose(0, 2, 3, 1), g   # ONNX OIHW


def pack_weights(k, desc, mode, weights):
    """(packed, its pointer) for ``desc``: the prior kernel's
    (:meth:`.conv.Conv._lender`) when it packed the same for ``mode``, else
    the OHWI ``weights`` (folded, with the bias) packed into the weights
    arena; (None, None) when only the scratch is asked (the geometry
    checked)."""
    lender = k._lender(mode)
    n = nk.conv2d_packed_floats(desc)
    if lender is not None and n == getattr(lender, "packed_floats", None):
        return lender.packed, lender.packed_ptr     # shared: nothing kept
    if k.sizing:     # only the scratch is asked: the geometry checked, nothing packed
        k.keep.count(n * 4)     # (what packing would keep)
        return None, None
    packed = k.kept_layout((n,), np.float32, lambda: nk.pack_conv2d(
        desc, k._fold(weights),
        k.const(2, "bias").astype(k.dtype).reshape(-1) if k.has(2) else None, k.kept_empty))
    return packed, nk.fptr(packed)


class NativeConv:
    """The whole tensor in one ``pa_conv2d_run`` call, bias and activation
    fused; also one ``pa_call_t`` record (:meth:`native_call`)."""

    act_fused = True

    def __init__(self, k, weights, groups, mode):
        self.kernel, self.mode, self.scratch = k, mode, []
        self.desc = nk.conv2d(
            nhwc=k.nhwc, n=k.N, c_in=k.c_in, h=k.H, w=k.W, c_out=k.cout,
            h_out=k.Ho, w_out=k.Wo, kh=k.kh, kw=k.kw, sh=k.sh, sw=k.sw,
            dh=k.dh, dw=k.dw, pad_top=k.pt, pad_left=k.pl, groups=groups,
            act=native_act(k.attrs))
        self.packed, self.packed_ptr = pack_weights(k, self.desc, mode, weights)
        self.packed_floats = nk.conv2d_packed_floats(self.desc)
        self.ptrs = Pointers(k)

    def run(self, xs, ys, sc):
        x, y = self.ptrs(xs[0], ys[0])
        st = lib.pa_conv2d_run(self.desc, self.packed_ptr, x, y, self.kernel.workers)
        if st:
            check(st, f"conv {self.kernel.op.name!r}")

    def native_call(self, xs, ys):
        return ("conv2d", self.desc, self.packed_ptr, nk.fptr(xs[0]), None, nk.fptr(ys[0]), ())


class NativeResidual(NativeConv):
    """A pointwise convolution with a fused residual (input 3, its first
    ``res_c`` channels added before the activation: ``pa_conv2d_run_residual``)."""

    def run(self, xs, ys, sc):
        k = self.kernel
        x, r, y = self.ptrs(xs[0], xs[3], ys[0])
        st = lib.pa_conv2d_run_residual(self.desc, self.packed_ptr, x, r, k.res_c, y,
                                        k.workers)
        if st:
            check(st, f"conv {k.op.name!r}")

    def native_call(self, xs, ys):
        return ("conv2d_residual", self.desc, self.packed_ptr, nk.fptr(xs[0]),
                nk.fptr(xs[3]), nk.fptr(ys[0]), (self.kernel.res_c,))


class NativeBands:
    """NHWC, groups 1, no dilation (the full convolutions the rule leaves to
    im2col otherwise): the packed SGEMM of ``_pa_conv2d_is_disjoint`` over each
    band of padded input rows -- an unpadded disjoint-window convolution per band, the
    padded band the only scratch, no im2col columns (a YOLO-style
    detector's 3x3 layers: see docs/native-kernels.md).  One geometry per
    band height (``descs``); no step record (the band is copied first)."""

    mode = "native-band"
    act_fused = True
    native_call = None

    def __init__(self, k, weights):
        self.kernel = k
        nr = k.plan_bands()
        self.scratch = k.pad_spec()
        act = native_act(k.attrs)
        self.descs = {r: nk.conv2d(
            nhwc=True, n=1, c_in=k.c_in, h=k.rows_in(r), w=k.Wp, c_out=k.cout,
            h_out=r, w_out=k.Wo, kh=k.kh, kw=k.kw, sh=k.sh, sw=k.sw, dh=1,
            dw=1, pad_top=0, pad_left=0, groups=1, act=act) for r in {nr, k.bands[-1][1] -
                                                                      k.bands[-1][0]}}
        self.packed, self.packed_ptr = pack_weights(k, self.descs[nr], self.mode, weights)
        self.packed_floats = nk.conv2d_packed_floats(self.descs[nr])

    def run(self, xs, ys, sc):
        k = self.kernel
        x, y = k.x4(xs[0]), k.y4(ys[0])
        pbuf = sc[0] if k.padded else None
        for n in range(k.N):
            for r0, r1 in k.bands:
                src = k.band_src(x[n], pbuf, r0, r1)
                st = lib.pa_conv2d_run(self.descs[r1 - r0], self.packed_ptr, nk.fptr(src),
                                       nk.fptr(y[n, r0:r1]), k.workers)
                if st:
                    check(st, f"conv {k.op.name!r}")
