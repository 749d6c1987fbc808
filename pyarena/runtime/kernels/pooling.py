"""Pooling kernels: MaxPool / AveragePool (a loop over kernel taps, or one
reduction over a window view when windows do not overlap; 3-D inputs and
MaxPool's Indices output in :mod:`.pool_nd`), LpPool (the
same sum over |x|^p), MaxUnpool, and GlobalAveragePool / GlobalMaxPool.  Scratch: the padded input rows of a
band when there is padding or ceil-mode overhang, within the budget.
"""
import math

import numpy as np

from ...errors import InvalidArgumentError
from ..._native import check, lib
from ..._native import kernels as nk
from ..._native import qelementwise as qnative
from .native import NATIVE_DTYPE, Pointers, ordered_mean, plane_mean
from . import shape_rules as rules
from . import tflite_attrs as tfl
from .registry import Kernel, const, register
from .pool_nd import run_nd, setup_nd, wants_nd
from .spatial import Spatial


@register
class WindowPool(Spatial):
    """Max/average pooling as a loop over kernel taps with ufuncs writing
    into the output, per band of output rows.  Scratch: the padded input
    rows of a band when there is padding or ceil_mode overhang (padding
    value -inf for max, 0 for average), within SCRATCH_BUDGET."""

    op_types = ('MaxPool', 'AveragePool')
    family = 'pool'
    inplace = 'none'
    shape_rule = rules.pool
    nhwc = 'attr'
    rows = 'pool'
    qdq = {'MaxPool': 'same_scale'}
    tflite_int8 = {'MAX_POOL_2D': 'same'}
    tflite = {'AVERAGE_POOL_2D': ('AveragePool', {}, tfl.pool_2d),
              'MAX_POOL_2D': ('MaxPool', {}, tfl.pool_2d)}

    nd = None
    native_q8 = False
    mlas = False        # (MLAS's order: an average pool of a QDQ file's float island)

    def setup(self):
        k = [int(v) for v in self.attrs["kernel_shape"]]
        self.is_max = self.op.op_type == "MaxPool"
        lowest = -np.inf if self.dtype.kind == "f" else np.iinfo(self.dtype).min
        if wants_nd(self):      # 3-D and more, or Indices: pool_nd.py
            setup_nd(self, lowest if self.is_max else 0.0)
            return
        # (storage_order only orders the Indices output: nothing here)
        self.geometry(k, lowest if self.is_max else 0.0)   # max pools int8 as they are
        # a float island of a QDQ file (importers/onnx_qdq.py marks it): the
        # NumPy taps in onnxruntime's order -- its NCHWc pool (channels a
        # multiple of the 16-wide block) sums the taps row by row and divides
        # by the count (mlas/lib/snchwc.cpp, the NCHWc pooling kernels)
        self.mlas = bool(self.attrs.get("mlas_order")) and not self.is_max and \
            self.dtype == np.float32 and self.c_in % 16 == 0
        if self._setup_native():
            return
        self.plan_bands()
        self.scratch = self.pad_spec()
        # non-overlapping windows (stride = kernel, no padding/dilation, e.g.
        # MediaPipe's 64x64 "global" average pools): one reduction over a
        # (rows, kh, Wo, kw) view instead of kh*kw ufunc calls
        self.blocky = (not self.padded and (self.sh, self.sw) == (self.kh, self.kw) and
                       self.dh == self.dw == 1 and self.kh * self.kw >= 4 and not self.mlas)
        self.div = None
        if not self.is_max and self.sizing and self._divisors_vary():
            # not laid out (as large as the output), but counted: the kernel's
            # state holds them (a patched stage's bands each have theirs)
            self.keep.count(self.Ho * self.Wo * self.dtype.itemsize)
        if not self.is_max and not self.sizing:   # (divisors: as large as the output)
            cip = int(self.attrs.get("count_include_pad", 0))
            # count of the window elements that lie in the image (or in
            # the explicit pads if count_include_pad), per output position
            mask = np.zeros((self.Hp, self.Wp))
            if cip:
                mask[:self.H + self.pt + self.pb, :self.W + self.pl + self.pr] = 1
            else:
                mask[self.pt:self.pt + self.H, self.pl:self.pl + self.W] = 1
            cnt = np.zeros((self.Ho, self.Wo))
            for i in range(self.kh):
                for j in range(self.kw):
                    cnt += self.tap(mask[None] if not self.nhwc else mask[..., None], i, j
                                    ).reshape(self.Ho, self.Wo)
            cnt = np.maximum(cnt, 1)
            if np.all(cnt == self.kh * self.kw):
                self.inv = const(1.0 / (self.kh * self.kw), self.dtype)
                if self.mlas:       # (divided by, not multiplied by the inverse)
                    self.inv = const(self.kh * self.kw, self.dtype)
            else:
                d = (cnt if self.mlas else 1.0 / cnt).astype(self.dtype)
                self.div = self.keep(d[..., None] if self.nhwc else d)

    def _divisors_vary(self):
        """Some window of this average pool holds fewer counted elements
        than kh x kw (padding not counted, or a window past the padded
        image): it keeps one divisor per output position."""
        if int(self.attrs.get("count_include_pad", 0)):
            return self.Hp > self.H + self.pt + self.pb or self.Wp > self.W + self.pl + self.pr
        return bool(self.pt or self.pb or self.pl or self.pr) or \
            self.Hp > self.H or self.Wp > self.W

    def _setup_native(self):
        """float32 without dilation: the C core's pooling, no scratch; an
        8-bit MaxPool: ``pa_qmaxpool``."""
        if self.use_native and self.is_max and self.dtype in qnative.QTYPES and \
                self.dh == 1 and self.dw == 1:
            return self._setup_native_q8()
        if not self.use_native or self.dtype != NATIVE_DTYPE or self.dh != 1 or self.dw != 1 \
                or (self.mlas and not self.nhwc and self.kw > 2048):
            self.native = None
            return False
        self.native = nk.pool2d(
            nhwc=self.nhwc, n=self.N, c=self.c_in, h=self.H, w=self.W, h_out=self.Ho,
            w_out=self.Wo, kh=self.kh, kw=self.kw, sh=self.sh, sw=self.sw,
            pads=(self.pt, self.pl, self.pb, self.pr),
            count_include_pad=int(self.attrs.get("count_include_pad", 0)))
        self.native_fn = lib.pa_maxpool2d if self.is_max else lib.pa_avgpool2d
        if self.mlas:       # MLAS's order (csrc/kernels/pool_mlas.c)
            self.native_fn = lambda d, x, y, w: lib.pa_avgpool2d_ordered(
                d, lib.PA_POOL_ORDER_TAPS, x, y, w)
        self.ptrs = Pointers(self)
        self.scratch = []
        return True

    def _setup_native_q8(self):
        """The 8-bit MaxPool's ``pa_qavgpool_t`` (geometry only), unless
        the C kernel refuses it (then the NumPy taps)."""
        desc = qnative.qavgpool(
            dtype=self.dtype, nhwc=self.nhwc, dims=(self.N, self.c_in, self.H, self.W),
            out=(self.Ho, self.Wo), kernel=(self.kh, self.kw), strides=(self.sh, self.sw),
            pads=(self.pt, self.pl, self.pb, self.pr), count_include_pad=0, scales=(1.0, 1.0),
            zero_points=(0, 0))
        byte = np.zeros(1, np.uint8)
        images, desc.n = desc.n, 0          # checks the geometry without running
        if lib.pa_qmaxpool(desc, qnative.bptr(byte), qnative.bptr(byte)):
            self.native = None
            return False
        desc.n = images
        self.native, self.native_q8, self.scratch = desc, True, []
        return True

    def native_call(self, xs, ys):
        if self.native is None or self._act is not None or self.native_q8:
            return None
        if self.mlas:
            return ("avgpool_ordered", self.native, None, nk.fptr(xs[0]), None,
                    nk.fptr(ys[0]), (lib.PA_POOL_ORDER_TAPS,))
        return ("maxpool" if self.is_max else "avgpool", self.native, None, nk.fptr(xs[0]),
                None, nk.fptr(ys[0]), ())

    def run(self, xs, ys, sc):
        if self.nd is not None:
            run_nd(self, xs, ys, sc)
            return
        if self.native_q8:
            check(lib.pa_qmaxpool(self.native, qnative.bptr(xs[0]), qnative.bptr(ys[0])),
                  f"MaxPool {self.op.name!r}")
            return
        if self.native is not None:
            x, y = self.ptrs(xs[0], ys[0])
            st = self.native_fn(self.native, x, y, self.workers)
            if st:
                check(st, f"{self.op.op_type} {self.op.name!r}")
            return
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf = sc[0] if self.padded else None
        f = np.maximum if self.is_max else np.add
        if self.blocky:
            kh, kw, Wo = self.kh, self.kw, self.Wo
            for n in range(self.N):
                for r0, r1 in self.bands:
                    nr = r1 - r0
                    src = self.band_src(x[n], None, r0, r1)
                    yb = self.out_rows(y[n], r0, r1)
                    st = src.strides
                    if self.nhwc:
                        v = np.lib.stride_tricks.as_strided(
                            src, (nr, kh, Wo, kw, src.shape[2]),
                            (st[0] * kh, st[0], st[1] * kw, st[1], st[2]), writeable=False)
                        f.reduce(v, axis=(1, 3), out=yb.reshape(nr, 1, Wo, 1, -1),
                                 keepdims=True)
                    else:
                        v = np.lib.stride_tricks.as_strided(
                            src, (src.shape[0], nr, kh, Wo, kw),
                            (st[0], st[1] * kh, st[1], st[2] * kw, st[2]), writeable=False)
                        f.reduce(v, axis=(2, 4), out=yb.reshape(-1, nr, 1, Wo, 1),
                                 keepdims=True)
                    if not self.is_max:
                        np.multiply(yb, self.inv, out=yb)
            return
        for n in range(self.N):
            for r0, r1 in self.bands:
                nr = r1 - r0
                src = self.band_src(x[n], pbuf, r0, r1)
                yb = self.out_rows(y[n], r0, r1)
                np.copyto(yb, self.tap(src, 0, 0, nr))
                for i in range(self.kh):
                    for j in range(self.kw):
                        if i or j:
                            f(yb, self.tap(src, i, j, nr), out=yb)
                if not self.is_max:
                    (np.divide if self.mlas else np.multiply)(
                        yb, self.div[r0:r1] if self.div is not None else self.inv, out=yb)


@register
class LpPool(WindowPool):
    """(sum over the window of |x|^p)^(1/p), 1-D or 2-D: |x|^p into the
    scratch, summed by the window pool's tap loop (zero padding adds
    nothing), then the root in place.  NumPy path only."""

    op_types = ('LpPool',)
    nhwc = False
    rows = None
    qdq = None
    tflite = {}
    tflite_int8 = {}

    def setup(self):
        k = [int(v) for v in self.attrs["kernel_shape"]]
        self.p = float(self.attrs.get("p", 2))
        if self.p <= 0:
            self.fail(f"p must be positive, not {self.p:g}")
        self.is_max = False
        if wants_nd(self):
            setup_nd(self, 0.0, average=False)
            self.scratch = self.scratch + [(self.shape(0), self.dtype)]
            self.root = const(1.0 / self.p, self.dtype)
            return
        self.geometry(k, 0.0)
        self.native = None
        self.plan_bands()
        self.scratch = self.pad_spec() + [(self.shape(0), self.dtype)]
        self.blocky = (not self.padded and (self.sh, self.sw) == (self.kh, self.kw) and
                       self.dh == self.dw == 1 and self.kh * self.kw >= 4 and not self.mlas)
        self.div, self.inv = None, const(1.0, self.dtype)
        self.root = const(1.0 / self.p, self.dtype)

    def run(self, xs, ys, sc):
        powered = sc[-1]
        np.abs(xs[0], out=powered)
        if self.p != 1:
            np.power(powered, self.p, out=powered)
        WindowPool.run(self, [powered], ys, sc[:-1])
        if self.p != 1:
            np.power(ys[0], self.root, out=ys[0])


@register
class GlobalPool(Kernel):
    """The mean, the maximum or (GlobalLpPool) ``(sum |x|^p)^(1/p)`` of each
    channel's plane: one reduction (|x|^p first into the scratch)."""

    op_types = ('GlobalAveragePool', 'GlobalMaxPool', 'GlobalLpPool')
    family = 'pool'
    inplace = 'none'
    shape_rule = rules.global_pool
    nhwc = {'GlobalAveragePool': 'attr', 'GlobalMaxPool': 'attr'}
    mlas = False

    def setup(self):
        xs = self.shape(0)
        self.p = None
        if self.op.op_type == "GlobalLpPool":
            self.p = float(self.attrs.get("p", 2))
            if self.p <= 0:
                self.fail(f"p must be positive, not {self.p:g}")
            self.scratch = [(xs, self.dtype)]
            self.root = const(1.0 / self.p, self.dtype)
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        n, c = (xs[0], xs[-1]) if self.nhwc else xs[:2]
        self.n, self.c = n, c
        self.sp = math.prod(xs[1:-1]) if self.nhwc else math.prod(xs[2:])
        self.inv = const(1.0 / max(self.sp, 1), self.dtype)
        self.f = np.maximum if self.op.op_type == "GlobalMaxPool" else np.add
        # a float island of a QDQ file (importers/onnx_qdq.py marks it):
        # onnxruntime's order, MLAS's global kernel (mlas/lib/pooling.cpp,
        # MlasPoolGlobalKernel: four lanes over the plane, (l0 + l2) + (l1 +
        # l3) -- MlasReduceAddFloat32x4 --, the tail one by one, / size)
        self.mlas = bool(self.attrs.get("mlas_order")) and self.f is np.add and \
            self.p is None and self.dtype == np.float32
        self.native = plane_mean(self, n, xs[1], math.prod(xs[2:-1]), c) if \
            self.nhwc and self.p is None and self.f is np.add and len(xs) >= 3 and \
            not self.mlas else None
        if self.mlas:       # MLAS's order (csrc/kernels/pool_mlas.c)
            self.native = ordered_mean(self, self.nhwc, n, c, self.sp)

    def run(self, xs, ys, sc):
        if self.native is not None:
            self.native(xs, ys)
            return
        if self.p is not None:
            self.run_lp(xs[0], ys[0], sc[0])
            return
        if self.mlas:
            self.run_mlas(xs[0], ys[0])
            return
        if self.nhwc:
            x = xs[0].reshape(self.n, self.sp, self.c)
            y = ys[0].reshape(self.n, 1, self.c)
            self.f.reduce(x, axis=1, out=y, keepdims=True)
        else:
            x = xs[0].reshape(self.n, self.c, self.sp)
            y = ys[0].reshape(self.n, self.c, 1)
            self.f.reduce(x, axis=2, out=y, keepdims=True)
        if self.f is np.add:
            np.multiply(y, self.inv, out=y)

    def run_mlas(self, x, y):
        """The average in MLAS's global kernel's order (see setup)."""
        xv = x.reshape(self.n, self.sp, self.c).transpose(0, 2, 1) if self.nhwc else \
            x.reshape(self.n, self.c, self.sp)
        n4 = self.sp // 4 * 4
        # the lanes' sums in order: a reduction over an outer axis adds row
        # after row (NumPy's pairwise sum is for the inner, contiguous one)
        lanes = np.add.reduce(xv[:, :, :n4].reshape(self.n, self.c, n4 // 4, 4), axis=2) \
            if n4 else np.zeros((self.n, self.c, 4), np.float32)
        s = (lanes[..., 0] + lanes[..., 2]) + (lanes[..., 1] + lanes[..., 3])
        for i in range(n4, self.sp):
            np.add(s, xv[:, :, i], out=s)
        np.divide(s, np.float32(self.sp), out=s)
        np.copyto(y.reshape(s.shape), s)

    def run_lp(self, x, y, powered):
        np.abs(x, out=powered)
        if self.p != 1:
            np.power(powered, self.p, out=powered)
        np.add.reduce(powered.reshape(self.n, self.c, self.sp), axis=2,
                      out=y.reshape(self.n, self.c, 1), keepdims=True)
        if self.p != 1:
            np.power(y, self.root, out=y)


@register
class MaxUnpool(Kernel):
    """Each value written back at its index (MaxPool's Indices: flat over
    the whole output) in an output of zeros: one fill, one ``put``.
    Indices outside the output are refused."""

    op_types = ('MaxUnpool',)
    family = 'pool'
    inplace = 'none'
    shape_rule = rules.max_unpool

    def setup(self):
        self.runtime = (0, 1)
        if self.shape(0) != self.shape(1):
            self.malformed(f"values {list(self.shape(0))} and indices {list(self.shape(1))} "
                           f"differ in shape")
        # the indices count in the shape MaxPool's input would have had (the
        # inferred one); a larger output_shape gets that block at its origin,
        # zeros around it (ONNX's reference)
        xs_, a = self.shape(0), self.attrs
        ks = [int(k) for k in a.get("kernel_shape", [])]
        nsp = len(ks)
        st = [int(v) for v in a.get("strides", [1] * nsp)]
        pd = [int(v) for v in a.get("pads", [0] * 2 * nsp)]
        inferred = tuple(xs_[:2]) + tuple(
            (xs_[2 + d] - 1) * st[d] - (pd[d] + pd[nsp + d]) + ks[d] for d in range(nsp))
        out = tuple(self.oshape())
        if len(inferred) != len(out) or any(i > o for i, o in zip(inferred, out)):
            self.malformed(f"output shape {list(out)} is smaller than the unpooled "
                           f"{list(inferred)}")
        self.block = None if inferred == out else tuple(slice(0, i) for i in inferred)
        if self.block is not None:
            self.scratch = [(inferred, self.dtype)]
        self.size = math.prod(inferred)

    def run(self, xs, ys, sc):
        idx = xs[1]
        if idx.size and (idx.min() < 0 or idx.max() >= self.size):
            raise InvalidArgumentError(f"operator {self.op.name!r} (MaxUnpool): indices "
                                       f"outside the unpooled {self.size} elements")
        ys[0].fill(0)
        if self.block is None:
            np.put(ys[0].reshape(-1), idx, xs[0])
            return
        sc[0].fill(0)
        np.put(sc[0].reshape(-1), idx, xs[0])
        np.copyto(ys[0][self.block], sc[0])
