"""Convolution kernels: Conv (im2col + one batched matmul per band of
output rows; depthwise by accumulating kernel taps) and ConvTranspose
(columns per band of input rows, taps added into the cropped output).

Scratch rules, in elements of the op's dtype: Conv, im2col --
``C_in * kh * kw * rows * W_out`` plus the zero-padded input rows of a
band when there is padding; 1x1 / stride 1 / unpadded -- none; depthwise
-- the padded rows + one band-sized product buffer; ConvTranspose --
``C_out * kh * kw * rows * W_in`` columns.  ``rows`` is the most rows that
fit the scratch budget (at least one).
"""
from dataclasses import replace

import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from .native import NATIVE_DTYPE, Pointers, fused_activation, native_act
from . import shape_rules as rules
from . import tflite_attrs as tfl
from .registry import Kernel, const, register
from .spatial import Spatial
from .weight_scales import fold_scales

#: NHWC convolutions with at most this many output channels run the native
#: dot-product kernel (pa_conv2d_run picks it by the same rule: PA_CONV_DOT_MAX)
FEW_COUT = 4
#: convolutions (groups 1) over at most this many input channels run the
#: native stack-tile kernel when their input rows fit FEW_CIN_TILE floats
#: (pa_conv2d_run picks it by the same rule: PA_FEWIN_MAX_CIN,
#: PA_FEWIN_TILE_FLOATS)
FEW_CIN = 4
FEW_CIN_TILE = 4096


@register
class Conv(Spatial):
    """Convolution by im2col + one (batched) matmul, writing straight into
    the output; depthwise convolution by accumulating kernel taps.  Done
    per image and per band of output rows, so the scratch -- the padded
    input rows of a band and its im2col matrix (C_in * kh * kw * rows *
    W_out elements) or, for depthwise, one band-sized product buffer -- stays
    within SCRATCH_BUDGET (at least one output row).  A 1x1 stride-1
    unpadded conv needs no scratch at all."""

    op_types = ('Conv',)
    family = 'conv'
    inplace = 'none'
    shape_rule = rules.conv
    fold = 'expanding'
    nhwc = 'conv'
    rows = 'conv'
    tflite = {
        'CONV_2D': ('Conv', {}, tfl.conv_2d),
        'DEPTHWISE_CONV_2D': ('Conv', {'weight_layout': '1HWC'}, tfl.depthwise_conv_2d)}

    def setup(self):
        self.runtime = (0,)
        self.residual = self.has(3)     # fused Add (runtime/fusion.py)
        if self.residual:
            self.runtime = (0, 3)
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        # the weights as this layout reads them, their values as in the graph:
        # what fusion folded in is applied where they are laid out (_fold)
        w = self._weights()
        wshape = w.shape
        g = int(self.attrs.get("group", 1))
        k_sp = wshape[1:-1] if self.nhwc else wshape[2:]   # OHWI / 1HWC vs OIHW
        self.geometry(k_sp)
        C = self.c_in
        self.G = g
        cout = self.oshape()[-1] if self.nhwc else self.oshape()[1]
        self.cout = cout
        if C % g or cout % g:
            self.fail(f"group={g} does not divide channels {C} -> {cout}")
        if self.residual:
            rs = self.shape(3)
            self.res_c = int(rs[-1] if self.nhwc else rs[1])
            if not self._pointwise(g):
                self.fail("a residual input needs a pointwise (1x1, stride 1) convolution")
        if self._setup_native(w, g, cout) or self._setup_bands(w, g, cout):
            return
        K = C // g * self.kh * self.kw
        self.K = K
        # depthwise (every input channel c feeds output channel c): a loop
        # over kernel taps.  TFLite 1HWC weights with a depth multiplier
        # M = C_out / C_in > 1 (channel c*M + m reads input channel c) become
        # OHWI weights of a grouped conv (group = C_in) and go to im2col:
        # measured 0.3 ms vs 1.4 ms (NCHW) / 7.6 ms (NHWC) for a tap loop
        # broadcasting over M on 32 -> 64 channels at 56x56.
        dw_layout = self.attrs.get("weight_layout") == "1HWC"
        if dw_layout and cout != C:
            if cout % C:
                self.fail(f"depthwise output channels {cout} are not a multiple of {C}")
            w = w.reshape(self.kh, self.kw, cout).transpose(2, 0, 1)[..., None]
            dw_layout = False
        self.depthwise = dw_layout or (g == C and g > 1 and cout == C)
        if self.depthwise:
            lender = self._setup_depthwise(w, C)
        elif (self.kh == self.kw == 1 and self.sh == self.sw == 1 and not self.padded
              and (g == 1 or not self.nhwc)):
            # grouped NCHW too: group g reads channels [g*C/G, (g+1)*C/G), a
            # contiguous block, so one batched matmul over x as it is (no
            # im2col copy: ShuffleNet's 4-group 1x1 layers)
            self.mode = "1x1"
            lender = self._lender("1x1")
            self.wm = lender.wm if lender is not None else self.keep(np.ascontiguousarray(
                self._fold(w).reshape((g, cout // g, C // g) if g > 1 else (cout, C))))
        else:
            lender = self._setup_im2col(w, g, cout)
        self.bias = None
        if lender is not None:
            self.bias = lender.bias
        elif self.has(2):
            b = self.const(2, "bias").astype(self.dtype, copy=False)
            self.bias = self.keep(b if self.nhwc else b.reshape(-1, 1, 1))
        self._setup_epilogue(lender)

    def _weights(self):
        """Input 1 as this op reads it, without copying: OIHW, or for NHWC
        OHWI / 1HWC (``weight_layout``) -- a converted ONNX Conv's constant
        is still OIHW (``notes.weights_oihw``, pyarena/runtime/layout.py) and is
        re-laid out here, not in the graph."""
        w = self.const(1, "weight").astype(self.dtype, copy=False)
        if not (self.nhwc and self.op.notes.weights_oihw) or w.ndim != 4:
            return w
        if self.attrs.get("weight_layout") == "1HWC":     # (C, 1, kh, kw) -> 1HWC
            return w.reshape(w.shape[0], w.shape[2], w.shape[3]).transpose(1, 2, 0)[None]
        return w.transpose(0, 2, 3, 1)                    # OIHW -> OHWI

    def _fold(self, w, axis=0):
        """The weights ``w`` (output channels on ``axis``) with the scales
        fusion folded into them (``notes.weight_scales``,
        :func:`.weight_scales.fold_scales`), where setup lays them
        out: the graph keeps its constant as the file has it, and this op's
        layout of them is the only folded copy.  Not when only the scratch
        size is asked (the values do not matter there)."""
        scales = self.op.notes.weight_scales
        if not scales or self.sizing:
            return w
        return fold_scales(w, scales, axis)

    def _lender(self, mode):
        """The prior kernel (:attr:`Kernel.prior`, the same op at other
        shapes) when its weights as laid out for ``mode`` are this one's: the
        same mode, attributes, weight and bias arrays, dtype, native setting,
        channels, groups and window.  Those layouts (every NumPy mode's, and
        the native depthwise kernel's packing) depend on nothing else -- not
        on the spatial size, which the geometry, bands and scratch follow
        here as for a new kernel; so does the NHWC pointwise packing (the C
        core always tiles NHWC by pixels).  The other native packings do not
        (the C core picks their tiling by the output size: NCHW pointwise,
        the few-input-channel kernel), so they are packed again."""
        p = self.prior
        if p is None or type(p) is not type(self) or getattr(p, "mode", None) != mode or \
                mode == "native" or (mode == "native-gemm" and not self.nhwc) or self.sizing:
            return None
        if (p.dtype, p.use_native, p.nhwc, p.c_in, p.cout, p.G, p.kh, p.kw) != \
                (self.dtype, self.use_native, self.nhwc, self.c_in, self.cout, self.G,
                 self.kh, self.kw):
            return None
        for i in (1, 2):
            a, b = (p.ins[i] if p.has(i) else None), (self.ins[i] if self.has(i) else None)
            if (a is None) != (b is None) or a is not None and a.data is not b.data:
                return None
        try:    # (the scratch budget the slack planner sets changes no weights)
            same = len(p.attrs) == len(self.attrs) and \
                all(k in p.attrs and (p.attrs[k] is v or p.attrs[k] == v)
                    for k, v in self.attrs.items()) and \
                replace(p.op.notes, scratch_budget=None) == \
                replace(self.op.notes, scratch_budget=None)
        except (TypeError, ValueError):     # array-valued attributes: not compared
            same = False
        return p if same else None

    def _setup_depthwise(self, w, C):
        """Weights as (kh, kw, C) taps; scratch: padded rows + one product
        band.  Returns the kernel it took the taps from (:meth:`_lender`)."""
        lender = self._lender("dw")
        if lender is not None:
            self.wt = lender.wt
        else:
            if self.nhwc:
                wt = w.reshape(self.kh, self.kw, C)          # 1HWC
            else:
                wt = w.reshape(C, self.kh, self.kw).transpose(1, 2, 0)
            wt = np.ascontiguousarray(self._fold(wt, -1))
            if not self.nhwc:
                wt = wt.reshape(self.kh, self.kw, C, 1, 1)
            self.wt = self.keep(wt)
        self.mode = "dw"
        nr = self.plan_bands(extra_per_row=C * self.Wo * self.dtype.itemsize)
        tshape = (nr, self.Wo, C) if self.nhwc else (C, nr, self.Wo)
        self.scratch = self.pad_spec() + [(tshape, self.dtype)]
        return lender

    def _setup_im2col(self, w, g, cout):
        """Weights as per-group matrices; scratch: padded rows + columns.
        Returns the kernel it took the matrices from (:meth:`_lender`)."""
        C, K = self.c_in, self.K
        self.mode = "im2col"
        nr = self.plan_bands(extra_per_row=C * self.kh * self.kw * self.Wo *
                             self.dtype.itemsize)
        self.scratch = self.pad_spec() + [((C * self.kh * self.kw * nr * self.Wo,),
                                           self.dtype)]
        # NHWC with few channels per group: columns (G, K, rows*W_out),
        # filled with W_out innermost -- a copy with a 1- or 2-wide
        # channel axis innermost is slow (32 groups of 2 channels at
        # 28x28: copy + matmul 1.2 ms vs 0.3 ms with this layout)
        self.kmajor = self.nhwc and g > 1 and C // g <= 8
        lender = self._lender("im2col")
        if lender is not None:
            self.wm = lender.wm
        elif self.nhwc:
            # OHWI -> per group (K, Cout/G) matching the (kh, kw, C/G) column
            # order, or (Cout/G, K) for the K-major layout
            cog = cout // g
            wm = self._fold(w).reshape(g, cog, K)
            if not self.kmajor:
                wm = wm.transpose(0, 2, 1)
            self.wm = self.keep(np.ascontiguousarray(wm if g > 1 else wm[0]))
        else:
            self.wm = self.keep(np.ascontiguousarray(self._fold(w).reshape(g, cout // g, K)))
        return lender

    def _setup_epilogue(self, lender=None):
        """float32: bias and activation in one native pass after the product
        (``lender``'s, of the same bias and activation, when given)."""
        self.epilogue = None
        if lender is not None:
            if lender.epilogue is not None:
                self.act_fused = True
                self.ptrs = Pointers(self)
                self.epilogue = lender.epilogue
            return
        act = native_act(self.attrs) if self.dtype == NATIVE_DTYPE and self.use_native \
            else None
        if act is not None and (self.bias is not None or act.kind != 0):
            self.act_fused = True
            self.ptrs = Pointers(self)
            self.epilogue = (nk.layout("NHWC" if self.nhwc else "NCHW"),
                             nk.NULL if self.bias is None else nk.fptr(self.bias), act)

    @property
    def path(self):
        """native / native-dw / native-gemm (C kernels) or 1x1 / dw / im2col
        (NumPy + BLAS)."""
        return self.mode

    # -- the native path ------------------------------------------------------
    def _native_rule(self, g):
        """True when this op runs natively: float32, a supported activation,
        and a depthwise convolution (groups = input channels, any depth
        multiplier), few output channels (:meth:`_few_outputs`), few input
        channels (:meth:`_few_inputs`: first layers over RGB) or a
        pointwise one where the packed SGEMM beats BLAS
        (:meth:`_gemm_wins`).  Full NHWC convolutions of groups 1 then run
        the packed SGEMM band by band (:meth:`_setup_bands`).  Every other
        convolution keeps im2col + BLAS (with the native bias + activation
        epilogue), which the C direct kernel does not beat on the models
        measured: full 3x3 convolutions 1.5x slower (SqueezeNet: 6.9 vs 4.7
        ms), grouped 1x1 1.7x (ShuffleNet: 5.1 vs 3.0 ms) -- whole models
        13.2 -> 11.1 ms (SqueezeNet), 9.0 -> 7.1 ms (ShuffleNet), the same
        arena (the bounded im2col scratch fits the slack there).  The op attribute
        ``notes.kernel_path`` ("native" / "numpy") overrides the rule (benchmarks and
        tests compare both paths)."""
        if (not self.use_native or self.dtype != NATIVE_DTYPE
                or fused_activation(self.attrs) is None):
            return False
        forced = self.op.notes.kernel_path
        if forced in ("native", "numpy"):
            return forced == "native"
        return ((g == self.c_in and g > 1) or self._few_outputs(g) or self._few_inputs(g) or
                (self._pointwise(g) and (self.residual or self._gemm_wins())) or
                self._patch(g))

    def _few_outputs(self, g):
        """NHWC, groups 1, at most FEW_COUT output channels, no column
        dilation, window rows of at least 8 floats: the C core's dot-product kernel (a heatmap head of 8 -> 1
        channel at 256x256: 0.5 vs 3.1 ms on im2col + BLAS, whose 72-row
        column matrix is written and read for one output channel)."""
        return (self.nhwc and g == 1 and self.cout <= FEW_COUT and self.dw == 1
                and self.kw * self.c_in >= 8 and not self._pointwise(g))

    def _few_inputs(self, g):
        """Groups 1, at most FEW_CIN input channels (first layers over RGB),
        column stride 1 or 2, no column dilation, the c_in * kh input rows
        of an output row (split by stride, columns rounded up to 8) within
        FEW_CIN_TILE floats: the C core's stack-tile kernel (MobileNetV2's
        3 -> 32 stem at 224x224 in 0.4-0.5x the time of im2col + BLAS,
        docs/native-kernels.md)."""
        if (g != 1 or self.c_in > FEW_CIN or self.dw != 1 or self.sw > 2
                or self._pointwise(g)):
            return False
        half = -(-self.Wo // 8) * 8 + (self.kw - 1) // self.sw
        return self.c_in * self.kh * self.sw * half <= FEW_CIN_TILE

    def _pointwise(self, g):
        """1x1, stride 1, unpadded, groups 1: the C core's packed SGEMM."""
        return (g == 1 and self.kh == self.kw == 1 and self.sh == self.sw == 1
                and not self.padded and (self.Ho, self.Wo) == (self.H, self.W))

    def _patch(self, g):
        """NHWC, groups 1, no dilation, unpadded, windows that do not
        overlap (kernel <= stride: 2x2 stride-2 patch convolutions) or one
        output pixel: the C core's packed SGEMM reading each window in
        place (``_pa_conv2d_is_patch``; MediaPipe iris landmark's 2x2
        stride-2 layers: im2col + BLAS copied every input value once more
        for a product of a few microseconds).  Overlapping unpadded
        windows (a VALID 3x3) keep im2col + BLAS: not measured."""
        return (self.nhwc and g == 1 and self.dh == self.dw == 1 and not self.padded
                and not self._pointwise(g) and not self.residual
                and ((self.kh <= self.sh and self.kw <= self.sw) or self.Ho * self.Wo == 1))

    def _gemm_wins(self):
        """Where the packed SGEMM beat OpenBLAS + the epilogue pass
        (benchmarks/bench_conv_paths.py, MobileNetV2's 1x1 layers; the
        NHWC layers of BlazeFace and the MediaPipe landmark models): every
        NHWC one, since its tile's epilogue runs in registers (0.6-0.9x
        BLAS's time on 16-192 input channels, docs/native-kernels.md).
        NCHW stays on BLAS.  With a fused residual it always runs (it
        saves the Add's pass)."""
        return self.nhwc

    def _ohwi(self, w, g, cout):
        """The weights as [c_out][kh][kw][c_in / groups] and the groups."""
        if self.attrs.get("weight_layout") == "1HWC":           # TFLite depthwise
            return w.reshape(self.kh, self.kw, cout).transpose(2, 0, 1)[..., None], self.c_in
        if self.nhwc:                                            # TFLite OHWI
            return w.reshape(cout, self.kh, self.kw, -1), g
        return w.reshape(cout, -1, self.kh, self.kw).transpose(0, 2, 3, 1), g   # ONNX OIHW

    def _setup_native(self, w, g, cout):
        if not self._native_rule(g):
            return False
        ohwi, groups = self._ohwi(w, g, cout)
        if ohwi.shape[-1] * groups != self.c_in:
            return False
        # geometry the C kernel cannot take (e.g. a pad beyond its range):
        # the NumPy path instead
        if self.pt < 0 or self.pl < 0:
            return False
        gemm = self._pointwise(groups) or (self._patch(groups) and cout > FEW_COUT
                                           and not self._few_inputs(groups))
        mode = ("native-dw" if groups == self.c_in == cout and groups > 1 else
                "native-gemm" if gemm else "native")
        self.act_fused = True
        self.desc = nk.conv2d(
            nhwc=self.nhwc, n=self.N, c_in=self.c_in, h=self.H, w=self.W, c_out=cout,
            h_out=self.Ho, w_out=self.Wo, kh=self.kh, kw=self.kw, sh=self.sh, sw=self.sw,
            dh=self.dh, dw=self.dw, pad_top=self.pt, pad_left=self.pl, groups=groups,
            act=native_act(self.attrs))
        self._pack(self.desc, mode, ohwi)
        self.ptrs = Pointers(self)
        self.mode = mode
        self.scratch = []
        self.bias = None
        return True

    def _setup_bands(self, w, g, cout):
        """NHWC, groups 1, no dilation, more than a few input and output
        channels (3x3 and other full convolutions the rule above leaves to
        im2col): the packed SGEMM of ``_pa_conv2d_is_patch`` over each band
        of padded input rows -- the padded band is the only scratch, no
        im2col columns (a YOLO-style detector's 3x3 layers: see
        docs/native-kernels.md).  One geometry per band height."""
        forced = self.op.notes.kernel_path
        if not (self.use_native and self.dtype == NATIVE_DTYPE and self.nhwc and g == 1
                and self.dh == self.dw == 1 and self.c_in > FEW_CIN and cout > FEW_COUT
                and forced not in ("native", "numpy") and not self.residual
                and fused_activation(self.attrs) is not None and self.pt >= 0
                and self.pl >= 0 and self.attrs.get("weight_layout") != "1HWC"):
            return False
        nr = self.plan_bands()
        self.scratch = self.pad_spec()
        act = native_act(self.attrs)
        self.descs = {r: nk.conv2d(
            nhwc=True, n=1, c_in=self.c_in, h=self.rows_in(r), w=self.Wp, c_out=cout,
            h_out=r, w_out=self.Wo, kh=self.kh, kw=self.kw, sh=self.sh, sw=self.sw, dh=1,
            dw=1, pad_top=0, pad_left=0, groups=1, act=act) for r in {nr, self.bands[-1][1] -
                                                                      self.bands[-1][0]}}
        self._pack(self.descs[nr], "native-band", self._ohwi(w, 1, cout)[0])
        self.mode, self.act_fused, self.bias = "native-band", True, None
        return True

    def _pack(self, desc, mode, ohwi):
        """``self.packed`` / ``packed_ptr`` for ``desc``: the prior kernel's
        (:meth:`_lender`) when it packed the same for ``mode``, else the
        OHWI weights ``ohwi`` (folded, with the bias) packed into the
        weights arena; nothing when only the scratch is asked (the
        geometry checked)."""
        lender = self._lender(mode)
        if self.sizing:     # only the scratch is asked: the geometry checked, nothing packed
            nk.conv2d_packed_floats(desc)
            self.packed = self.packed_ptr = None
        elif lender is not None and nk.conv2d_packed_floats(desc) == lender.packed.size:
            self.packed, self.packed_ptr = lender.packed, lender.packed_ptr
        else:
            bias = self.const(2, "bias").astype(self.dtype).reshape(-1) if self.has(2) else None
            self.packed = self.keep(nk.pack_conv2d(desc, self._fold(ohwi), bias,
                                                   self.kept_empty))
            self.packed_ptr = nk.fptr(self.packed)

    def _run_bands(self, xs, ys, sc):
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf = sc[0] if self.padded else None
        for n in range(self.N):
            for r0, r1 in self.bands:
                src = self.band_src(x[n], pbuf, r0, r1)
                st = lib.pa_conv2d_run(self.descs[r1 - r0], self.packed_ptr, nk.fptr(src),
                                       nk.fptr(y[n, r0:r1]), self.workers)
                if st:
                    check(st, f"conv {self.op.name!r}")

    def _run_native(self, xs, ys):
        if self.residual:
            x, r, y = self.ptrs(xs[0], xs[3], ys[0])
            st = lib.pa_conv2d_run_residual(self.desc, self.packed_ptr, x, r, self.res_c, y,
                                            self.workers)
        else:
            x, y = self.ptrs(xs[0], ys[0])
            st = lib.pa_conv2d_run(self.desc, self.packed_ptr, x, y, self.workers)
        if st:
            check(st, f"conv {self.op.name!r}")

    def native_step(self, xs, ys):
        if self.mode not in ("native", "native-dw", "native-gemm") or self._act is not None:
            return None
        if self.residual:
            return ("conv2d_residual", self.desc, self.packed_ptr, nk.fptr(xs[0]),
                    nk.fptr(xs[3]), nk.fptr(ys[0]), (self.res_c,))
        return ("conv2d", self.desc, self.packed_ptr, nk.fptr(xs[0]), None, nk.fptr(ys[0]), ())

    def run(self, xs, ys, sc):
        if self.mode == "native-band":
            self._run_bands(xs, ys, sc)
            return
        if self.mode[0] == "n":
            self._run_native(xs, ys)
            return
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf = sc[0] if self.padded else None
        Wo, cout = self.Wo, self.cout
        for n in range(self.N):
            yn = y[n]
            if self.mode == "1x1":
                if self.nhwc:
                    np.matmul(x[n].reshape(-1, self.c_in), self.wm.T,
                              out=yn.reshape(-1, cout))
                elif self.G > 1:
                    np.matmul(self.wm, x[n].reshape(self.G, self.c_in // self.G, -1),
                              out=yn.reshape(self.G, cout // self.G, -1))
                else:
                    np.matmul(self.wm, x[n].reshape(self.c_in, -1),
                              out=yn.reshape(cout, -1))
            else:
                for r0, r1 in self.bands:
                    nr = r1 - r0
                    src = self.band_src(x[n], pbuf, r0, r1)
                    yb = self.out_rows(yn, r0, r1)
                    if self.mode == "dw":
                        tmp = sc[-1][:nr] if self.nhwc else sc[-1][:, :nr]
                        first = True
                        for i in range(self.kh):
                            for j in range(self.kw):
                                win = self.tap(src, i, j, nr)
                                if first:
                                    np.multiply(win, self.wt[i, j], out=yb)
                                    first = False
                                else:
                                    np.multiply(win, self.wt[i, j], out=tmp)
                                    np.add(yb, tmp, out=yb)
                    else:
                        cols = sc[-1][:self.K * self.G * nr * Wo]
                        if self.kmajor:
                            G, cg = self.G, self.c_in // self.G
                            np.copyto(cols.reshape(G, self.kh, self.kw, cg, nr, Wo),
                                      self.windows(src, nr, G, kmajor=True))
                            np.matmul(self.wm, cols.reshape(G, self.K, nr * Wo),
                                      out=yb.reshape(nr * Wo, G, cout // G).transpose(1, 2, 0))
                        elif self.nhwc and self.G > 1:
                            G, cg = self.G, self.c_in // self.G
                            np.copyto(cols.reshape(G, nr, Wo, self.kh, self.kw, cg),
                                      self.windows(src, nr, G))
                            np.matmul(cols.reshape(G, nr * Wo, self.K), self.wm,
                                      out=yb.reshape(nr * Wo, G, cout // G).transpose(1, 0, 2))
                        elif self.nhwc:
                            np.copyto(cols.reshape(nr, Wo, self.kh, self.kw, self.c_in),
                                      self.windows(src, nr))
                            np.matmul(cols.reshape(nr * Wo, self.K), self.wm,
                                      out=yb.reshape(nr * Wo, cout))
                        else:
                            np.copyto(cols.reshape(self.c_in, self.kh, self.kw, nr, Wo),
                                      self.windows(src, nr))
                            out = yn.reshape(self.G, cout // self.G, self.Ho * Wo)
                            np.matmul(self.wm, cols.reshape(self.G, self.K, nr * Wo),
                                      out=out[:, :, r0 * Wo:r1 * Wo])
            if self.residual:
                yr = yn[..., :self.res_c] if self.nhwc else yn[:self.res_c]
                np.add(yr, xs[3][n], out=yr)
            if self.bias is not None and self.epilogue is None:
                np.add(yn, self.bias, out=yn)
        if self.epilogue is not None:
            y, = self.ptrs(ys[0])
            st = lib.pa_bias_act(self.epilogue[0], self.N, self.cout, self.Ho * self.Wo, y,
                                 self.epilogue[1], y, self.epilogue[2], self.workers)
            if st:
                check(st, f"conv {self.op.name!r}")


def _transpose_pads(at, hw, out_hw, k, s, d):
    """(top, left) crop of a transposed convolution: explicit pads, or what
    auto_pad / output_shape / output_padding imply."""
    auto = at.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    pads = at.get("pads")
    if auto == "VALID":
        return 0, 0
    if pads is not None and auto not in ("SAME_UPPER", "SAME_LOWER") and \
            "output_shape" not in at:
        return int(pads[0]), int(pads[1])
    opad = [int(v) for v in at.get("output_padding", [0, 0])]
    tot = [max(0, (n - 1) * st + (kk - 1) * dl + 1 + op - o)
           for n, o, kk, st, dl, op in zip(hw, out_hw, k, s, d, opad)]
    if auto == "SAME_UPPER":
        return tot[0] // 2, tot[1] // 2
    return tot[0] - tot[0] // 2, tot[1] - tot[1] // 2


def _tap_slices(n_out, k, st, dl, p, lo, hi):
    """Per kernel tap along one axis: (input slice, output slice) of the
    input positions [lo, hi) whose contributions land inside the cropped
    output of n_out, or None when none does."""
    out = []
    for i in range(k):
        a = max(lo, -(-(p - i * dl) // st))
        b = min(hi - 1, (n_out - 1 + p - i * dl) // st)
        if a > b:
            out.append(None)
            continue
        o0 = a * st + i * dl - p
        out.append((slice(a - lo, b - lo + 1), slice(o0, o0 + (b - a) * st + 1, st)))
    return out


@register
class ConvTranspose(Kernel):
    """Transposed convolution, 2-D, NCHW (ONNX, groups) or NHWC (TFLite
    TRANSPOSE_CONV, weights ``OHWI``).  Per image and per band of input rows:
    columns = W^T x for the band by one (batched) matmul into scratch, then
    each kernel tap's columns are added straight into the output rows and
    columns they land on (cropping by the pads is a choice of slices, so no
    full-size uncropped buffer).  The output starts as the bias (or zero).
    Scratch: the band's columns, ``C_out * kh * kw * rows * W_in`` elements,
    with ``rows`` the most input rows that fit SCRATCH_BUDGET (at least 1)."""

    op_types = ('ConvTranspose',)
    family = 'conv'
    inplace = 'none'
    shape_rule = rules.conv_transpose
    fold = 'expanding'
    tflite = {
        'TRANSPOSE_CONV': ('ConvTranspose', {}, tfl.transpose_conv),
        'CUSTOM:Convolution2DTransposeBias': ('ConvTranspose', {}, tfl.transpose_conv_bias)}

    def setup(self):
        self.runtime = (0,)
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        xs, ys, w, at = self._as_2d(self.shape(0), self.oshape(),
                                    self.const(1, "weight").astype(self.dtype), self.attrs)
        g = int(at.get("group", 1))
        if self.nhwc:
            N, H, W, C = xs
            cout, kh, kw, cin = w.shape                 # OHWI
            Ho, Wo = ys[1], ys[2]
            if g != 1 or cin != C:
                self.fail(f"NHWC filter {list(w.shape)} does not match {C} input channels")
            cog = cout
        else:
            N, C, H, W = xs
            _, cog, kh, kw = w.shape
            Ho, Wo = ys[2], ys[3]
            cout = cog * g
        if C % g:
            self.fail(f"group={g} does not divide {C} input channels")
        s = [int(v) for v in at.get("strides", [1, 1])]
        d = [int(v) for v in at.get("dilations", [1, 1])]
        pt, pl = _transpose_pads(at, (H, W), (Ho, Wo), (kh, kw), s, d)
        self.N, self.C, self.H, self.W, self.G = N, C, H, W, g
        self.kh, self.kw, self.cog, self.cout = kh, kw, cog, cout
        self.Ho, self.Wo = Ho, Wo
        if self.nhwc:
            # (C, kh*kw*C_out): column order (kh, kw, C_out)
            self.wm = self.keep(np.ascontiguousarray(
                w.transpose(3, 1, 2, 0).reshape(C, kh * kw * cout)))
        else:
            # (G, cog*kh*kw, C/G): W^T per group
            self.wm = self.keep(np.ascontiguousarray(
                w.reshape(g, C // g, cog * kh * kw).transpose(0, 2, 1)))
        per_row = cout * kh * kw * W * self.dtype.itemsize
        nh = int(max(1, min(H, self.scratch_budget // max(per_row, 1))))
        self.band_rows = nh
        self.scratch = [((cout * kh * kw * nh * W,), self.dtype)]
        cw = _tap_slices(Wo, kw, s[1], d[1], pl, 0, W)
        self.bands = []
        for h0 in range(0, H, nh):
            h1 = min(h0 + nh, H)
            steps = []
            for i, rh in enumerate(_tap_slices(Ho, kh, s[0], d[0], pt, h0, h1)):
                if rh is None:
                    continue
                for j, rw in enumerate(cw):
                    if rw is not None:
                        steps.append((i, j, rh[0], rw[0], rh[1], rw[1]))
            self.bands.append((h0, h1, steps))
        self.bias = None
        if self.has(2):
            b = self.const(2, "bias").astype(self.dtype, copy=False)
            self.bias = self.keep(b if self.nhwc else b.reshape(-1, 1, 1))
        self.zero = const(0, self.dtype)

    def _as_2d(self, xs, ys, w, at):
        """1-D as 2-D with H = 1: a unit axis prepended to the shapes, the
        weights and the spatial attributes.  4-D passes through."""
        self.one_d = len(xs) == 3
        if self.one_d:
            sp = 1 if self.nhwc else 2
            xs, ys = xs[:sp] + (1,) + xs[sp:], ys[:sp] + (1,) + ys[sp:]
            w = w.reshape(w.shape[:1] + (1,) + w.shape[1:]) if self.nhwc else \
                w.reshape(w.shape[:2] + (1,) + w.shape[2:])
            at = dict(at)
            for k in ("strides", "dilations"):
                if k in at:
                    at[k] = [1] + list(at[k])
            for k, v in (("output_padding", 0), ("output_shape", 1)):
                if k in at:
                    at[k] = [v] + list(at[k])[-1:]
            if at.get("pads") is not None:
                at["pads"] = [0, int(at["pads"][0]), 0, int(at["pads"][1])]
            self.x4 = xs
            self.y4 = ys
        if len(xs) != 4:
            self.fail(f"only 1-D and 2-D ConvTranspose are supported (input {list(xs)})")
        return xs, ys, w, at

    def run(self, xs, ys, sc):
        buf = sc[0]
        x, y = xs[0], ys[0]
        if self.one_d:
            x, y = x.reshape(self.x4), y.reshape(self.y4)
        g, C, W, kh, kw, cout = self.G, self.C, self.W, self.kh, self.kw, self.cout
        for n in range(self.N):
            yn = y[n]
            if self.bias is not None:
                np.copyto(yn, self.bias)
            else:
                yn.fill(self.zero)
            xn = x[n] if self.nhwc else x[n].reshape(g, C // g, self.H * W)
            for h0, h1, steps in self.bands:
                nb = h1 - h0
                cols = buf[:cout * kh * kw * nb * W]
                if self.nhwc:
                    cm = cols.reshape(nb * W, kh * kw * cout)
                    np.matmul(xn[h0:h1].reshape(nb * W, C), self.wm, out=cm)
                    c6 = cols.reshape(nb, W, kh, kw, cout)
                    for i, j, sh, sw, dh, dw in steps:
                        dst = yn[dh, dw]
                        np.add(dst, c6[sh, sw, i, j], out=dst)
                else:
                    cm = cols.reshape(g, self.cog * kh * kw, nb * W)
                    np.matmul(self.wm, xn[:, :, h0 * W:h1 * W], out=cm)
                    c6 = cols.reshape(cout, kh, kw, nb, W)
                    for i, j, sh, sw, dh, dw in steps:
                        dst = yn[:, dh, dw]
                        np.add(dst, c6[:, i, j, sh, sw], out=dst)
