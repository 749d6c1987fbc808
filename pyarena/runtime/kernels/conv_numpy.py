"""Conv's paths on NumPy / BLAS, chosen by :meth:`.conv.Conv._choose`:
per image, the product written straight into the output, then the fused
residual and the bias (:class:`NumpyPath`, what the three share; float32:
the bias and activation in one native pass after the product instead).

* :class:`Pointwise` ("1x1") -- 1x1, stride 1, unpadded: one (batched)
  matmul over the input as it is, no scratch.
* :class:`DepthwiseTaps` ("dw") -- every input channel feeds its output
  channel: the kernel taps accumulated per band of output rows (scratch:
  the padded rows + one band-sized product).
* :class:`Im2col` ("im2col") -- the rest: per band of output rows, the
  windows copied into columns and one (batched) matmul (scratch: the
  padded rows + ``C_in * kh * kw * rows * W_out`` columns).

The weights each lays out are the prior kernel's when they are the same
(:meth:`.conv.Conv._lender`), else the op's folded (:meth:`.conv.Conv._fold`).
"""
import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .native import NATIVE_DTYPE, Pointers, native_act


def _addr(a):
    return None if a is None else a.__array_interface__["data"][0]

__all__ = ["NumpyPath", "Pointwise", "DepthwiseTaps", "Im2col"]


class NumpyPath:
    """Setup: the subclass lays out its weights (:meth:`lay_out`), then the
    bias (the lender's or input 2) and the epilogue; run: :meth:`image` per
    image, the residual and the bias, then the epilogue over the output."""

    act_fused = False
    native_call = None
    mode = None

    def __init__(self, k, w):
        self.kernel = k
        self.scratch = []
        lender = self.lay_out(k, w)
        self.bias = None
        if lender is not None:
            self.bias = lender.bias
        elif k.has(2):
            b = k.const(2, "bias").astype(k.dtype, copy=False)
            if k.shuffle:       # channel j of group g is written at j*G + g
                b = np.ascontiguousarray(b.reshape(k.G, -1).T).reshape(-1)
            self.bias = k.keep(b if k.nhwc else b.reshape(-1, 1, 1))
        self._setup_epilogue(lender)

    def lay_out(self, k, w):
        """Weights, bands and scratch; returns the prior kernel's path it
        took the weights from (:meth:`.conv.Conv._lender`), or None."""
        raise NotImplementedError

    def _setup_epilogue(self, lender=None):
        """float32: bias and activation in one native pass after the product
        (``lender``'s, of the same bias and activation, when given)."""
        k = self.kernel
        self.epilogue = None
        if lender is not None:
            if lender.epilogue is not None:
                self.act_fused = True
                self.ptrs = Pointers(k)
                self.epilogue = lender.epilogue
            return
        act = native_act(k.attrs) if k.dtype == NATIVE_DTYPE and k.use_native else None
        if act is not None and (self.bias is not None or act.kind != 0):
            self.act_fused = True
            self.ptrs = Pointers(k)
            self.epilogue = (nk.layout("NHWC" if k.nhwc else "NCHW"),
                             nk.NULL if self.bias is None else nk.fptr(self.bias), act)

    def image(self, xn, yn, pbuf, sc):
        """The product of image ``xn`` into ``yn``."""
        raise NotImplementedError

    def run(self, xs, ys, sc):
        k = self.kernel
        x, y = k.x4(xs[0]), k.y4(ys[0])
        pbuf = sc[0] if k.padded else None
        r = xs[3] if k.residual else None
        if r is not None and _addr(r) == _addr(ys[0]):
            r = r.copy()    # planned in place (conv.residual_in_place): not on these paths
        for n in range(k.N):
            yn = y[n]
            self.image(x[n], yn, pbuf, sc)
            if k.residual:
                yr = yn[..., :k.res_c] if k.nhwc else yn[:k.res_c]
                np.add(yr, r[n], out=yr)
            if self.bias is not None and self.epilogue is None:
                np.add(yn, self.bias, out=yn)
        if self.epilogue is not None:
            y, = self.ptrs(ys[0])
            st = lib.pa_bias_act(self.epilogue[0], k.N, k.cout, k.Ho * k.Wo, y,
                                 self.epilogue[1], y, self.epilogue[2], k.workers)
            if st:
                check(st, f"conv {k.op.name!r}")


class Pointwise(NumpyPath):
    """1x1, stride 1, unpadded; grouped NCHW too: group g reads channels
    [g*C/G, (g+1)*C/G), a contiguous block, so one batched matmul over x as
    it is (no im2col copy: ShuffleNet's 4-group 1x1 layers).  With a fused
    channel shuffle (``shuffle_groups``, runtime/fusion.py) group g's
    channel j is written at j*G + g: the matmul's output is a strided view
    (rows G planes apart, which BLAS takes as they are)."""

    mode = "1x1"

    def lay_out(self, k, w):
        g, C, cout = k.G, k.c_in, k.cout
        lender = k._lender(self.mode)
        self.wm = lender.wm if lender is not None else k.keep(np.ascontiguousarray(
            k._fold(w).reshape((g, cout // g, C // g) if g > 1 else (cout, C))))
        return lender

    def image(self, xn, yn, pbuf, sc):
        k = self.kernel
        cout = k.cout
        if k.nhwc:
            np.matmul(xn.reshape(-1, k.c_in), self.wm.T, out=yn.reshape(-1, cout))
        elif k.G > 1:
            out = yn.reshape(cout // k.G, k.G, -1).transpose(1, 0, 2) if k.shuffle else \
                yn.reshape(k.G, cout // k.G, -1)
            np.matmul(self.wm, xn.reshape(k.G, k.c_in // k.G, -1), out=out)
        else:
            np.matmul(self.wm, xn.reshape(k.c_in, -1), out=yn.reshape(cout, -1))


class DepthwiseTaps(NumpyPath):
    """Weights as (kh, kw, C) taps; per band, the first tap's product into
    the output rows and every other one's added through a band-sized
    product buffer."""

    mode = "dw"

    def lay_out(self, k, w):
        C = k.c_in
        lender = k._lender(self.mode)
        if lender is not None:
            self.wt = lender.wt
        else:
            if k.nhwc:
                wt = w.reshape(k.kh, k.kw, C)          # 1HWC
            else:
                wt = w.reshape(C, k.kh, k.kw).transpose(1, 2, 0)
            wt = np.ascontiguousarray(k._fold(wt, -1))
            if not k.nhwc:
                wt = wt.reshape(k.kh, k.kw, C, 1, 1)
            self.wt = k.keep(wt)
        # float16: the taps summed in float32 and rounded once, as a matmul
        # (and onnxruntime) would; summed in float16 they drift by ulps
        self.wide = k.dtype.kind == "f" and k.dtype.itemsize < 4
        if self.wide:
            self.wt32 = k.keep(np.asarray(self.wt, np.float32))
        nr = k.plan_bands(extra_per_row=C * k.Wo * (8 if self.wide else k.dtype.itemsize))
        tshape = (nr, k.Wo, C) if k.nhwc else (C, nr, k.Wo)
        self.scratch = k.pad_spec() + ([(tshape, np.float32)] * 2 if self.wide
                                       else [(tshape, k.dtype)])
        return lender

    def image(self, xn, yn, pbuf, sc):
        k = self.kernel
        for r0, r1 in k.bands:
            nr = r1 - r0
            src = k.band_src(xn, pbuf, r0, r1)
            yb = k.out_rows(yn, r0, r1)
            tmp = sc[-1][:nr] if k.nhwc else sc[-1][:, :nr]
            acc, wt = yb, self.wt
            if self.wide:
                acc, wt = (sc[-2][:nr] if k.nhwc else sc[-2][:, :nr]), self.wt32
            first = True
            for i in range(k.kh):
                for j in range(k.kw):
                    win = k.tap(src, i, j, nr)
                    if first:
                        np.multiply(win, wt[i, j], out=acc)
                        first = False
                    else:
                        np.multiply(win, wt[i, j], out=tmp)
                        np.add(acc, tmp, out=acc)
            if acc is not yb:
                np.copyto(yb, acc)


class Im2col(NumpyPath):
    """Weights as per-group matrices; per band, the windows copied into
    columns and one (batched) matmul into the output rows."""

    mode = "im2col"
    _ops = None     # {buffers' addresses: each band's views}, stable buffers only

    def lay_out(self, k, w):
        g, C, cout = k.G, k.c_in, k.cout
        K = self.K = C // g * k.kh * k.kw
        nr = k.plan_bands(extra_per_row=C * k.kh * k.kw * k.Wo * k.dtype.itemsize)
        self.scratch = k.pad_spec() + [((C * k.kh * k.kw * nr * k.Wo,), k.dtype)]
        # NHWC with few channels per group: columns (G, K, rows*W_out),
        # filled with W_out innermost -- a copy with a 1- or 2-wide
        # channel axis innermost is slow (32 groups of 2 channels at
        # 28x28: copy + matmul 1.2 ms vs 0.3 ms with this layout)
        self.kmajor = k.nhwc and g > 1 and C // g <= 8
        lender = k._lender(self.mode)
        if lender is not None:
            self.wm = lender.wm
        elif k.nhwc:
            # OHWI -> per group (K, Cout/G) matching the (kh, kw, C/G) column
            # order, or (Cout/G, K) for the K-major layout
            cog = cout // g
            wm = k._fold(w).reshape(g, cog, K)
            if not self.kmajor:
                wm = wm.transpose(0, 2, 1)
            self.wm = k.keep(np.ascontiguousarray(wm if g > 1 else wm[0]))
        else:
            self.wm = k.keep(np.ascontiguousarray(k._fold(w).reshape(g, cout // g, K)))
        return lender

    def image(self, xn, yn, pbuf, sc):
        """Per band: the padded rows refreshed, the windows copied into the
        columns, one (batched) matmul.  The views each band reads and
        writes depend on the buffers alone: on stable (planned) buffers
        they are made once and kept (a small convolution's Python cost was
        mostly making them: a Silero VAD step's five)."""
        k = self.kernel
        key = (_addr(xn), _addr(yn), _addr(pbuf), _addr(sc[-1]))
        ops = self._ops.get(key) if self._ops else None
        if ops is None:
            ops = [self._band_ops(xn, yn, pbuf, sc, r0, r1) for r0, r1 in k.bands]
            self._ops = {key: ops} if k.stable else None
        for (r0, r1), (cols, win, a, b, out) in zip(k.bands, ops):
            if pbuf is not None:        # (the padded rows of this band, afresh)
                k.band_src(xn, pbuf, r0, r1)
            np.copyto(cols, win)
            np.matmul(a, b, out=out)

    def _band_ops(self, xn, yn, pbuf, sc, r0, r1):
        """(columns, windows, a, b, out) of band [r0, r1): copy the
        windows into the columns, then ``out = a @ b``."""
        k = self.kernel
        G, K, Wo, cout, kh, kw = k.G, self.K, k.Wo, k.cout, k.kh, k.kw
        nr = r1 - r0
        src = k.band_src(xn, pbuf, r0, r1)
        yb = k.out_rows(yn, r0, r1)
        cols = sc[-1][:K * G * nr * Wo]
        if self.kmajor:
            cg = k.c_in // G
            return (cols.reshape(G, kh, kw, cg, nr, Wo), k.windows(src, nr, G, kmajor=True),
                    self.wm, cols.reshape(G, K, nr * Wo),
                    yb.reshape(nr * Wo, G, cout // G).transpose(1, 2, 0))
        if k.nhwc and G > 1:
            cg = k.c_in // G
            return (cols.reshape(G, nr, Wo, kh, kw, cg), k.windows(src, nr, G),
                    cols.reshape(G, nr * Wo, K), self.wm,
                    yb.reshape(nr * Wo, G, cout // G).transpose(1, 0, 2))
        if k.nhwc:
            return (cols.reshape(nr, Wo, kh, kw, k.c_in), k.windows(src, nr),
                    cols.reshape(nr * Wo, K), self.wm, yb.reshape(nr * Wo, cout))
        out = yn.reshape(G, cout // G, k.Ho * Wo)
        return (cols.reshape(k.c_in, kh, kw, nr, Wo), k.windows(src, nr),
                self.wm, cols.reshape(G, K, nr * Wo), out[:, :, r0 * Wo:r1 * Wo])