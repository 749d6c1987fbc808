"""Convolution kernels: Conv and ConvTranspose (columns per band of input
rows, taps added into the cropped output).

Conv takes one path per op, chosen at setup in one place
(:meth:`Conv._choose`: the rule of docs/native-kernels.md, "Which path a
convolution takes"), each a class of its own: the C core's convolution in
one call or band by band (``conv_native.py``: :class:`NativeConv`,
:class:`NativeBands`), or NumPy / BLAS (``conv_numpy.py``:
:class:`Pointwise`, :class:`DepthwiseTaps`, :class:`Im2col`).  What they
share is Conv's base :class:`ConvWeights` (``conv_weights.py``): the
weights as the op's layout reads them, the scales fusion folded into them
and the layouts of the prior kernel.

Scratch rules, in elements of the op's dtype: Conv, im2col --
``C_in * kh * kw * rows * W_out`` plus the zero-padded input rows of a
band when there is padding; 1x1 / stride 1 / unpadded -- none; depthwise
-- the padded rows + one band-sized product buffer; the native paths --
none, or the padded rows of a band when run band by band; ConvTranspose --
``C_out * kh * kw * rows * W_in`` columns.  ``rows`` is the most rows that
fit the scratch budget (at least one, and enough rows for MIN_STEP_ELEMENTS
elements: no loop per short row).
"""
import numpy as np

from ...planning.inplace import same_layout

from .conv_transpose_nd import run_transpose_nd, setup_transpose_nd, tap_slices, transpose_pads
from .conv_transpose_native import NativeTranspose, disjoint_taps
from .conv_native import NativeBands, NativeConv, NativeResidual, ohwi
from .conv_numpy import DepthwiseTaps, Im2col, Pointwise
from .conv_weights import ConvWeights
from .weight_scales import fold_scales
from .native import NATIVE_DTYPE, fused_activation
from . import shape_rules as rules
from . import tflite_attrs as tfl
from .registry import Kernel, const, items_per_step, register
from .spatial import Spatial

#: NHWC convolutions with at most this many output channels run the native
#: dot-product kernel (pa_conv2d_run picks it by the same rule: PA_CONV_DOT_MAX)
FEW_COUT = 4
#: convolutions (groups 1) over at most this many input channels run the
#: native stack-tile kernel when their input rows fit FEW_CIN_TILE floats
#: (pa_conv2d_run picks it by the same rule: PA_FEWIN_MAX_CIN,
#: PA_FEWIN_TILE_FLOATS)
FEW_CIN = 4
FEW_CIN_TILE = 8192         # (a 7x7 stride-2 stem at 224: 0.7-0.9x im2col's time)
#: convolutions (groups 1) of at most FEW_PIXELS output pixels and
#: FEW_PIXELS_MACS multiply-adds over at least FEW_PIXELS_CIN input channels
#: run the native direct kernel (Conv._few_pixels)
FEW_PIXELS = 16
FEW_PIXELS_MACS = 1 << 20
FEW_PIXELS_CIN = 8
#: full NHWC convolutions over at most this many input channels run the
#: packed SGEMM on the whole tensor, padding read as zeros
#: (pa_conv2d_run picks it by the same rule: PA_GEMM_PAD_MAX_CIN)
PAD_WINDOW_MAX_CIN = 1024


def residual_in_place(op, graph):
    """Conv's in-place rule: the output may take the memory of the fused
    residual (input 3, :mod:`runtime.fusion`) where the NHWC packed SGEMM
    runs it -- each tile reads a residual value and then writes the
    output value at the same place, so y may be r itself (as onnxruntime's
    NCHWc convolution accumulates into its Sum input): the output's lines
    are then read once, not the residual's and then the output's
    (ResNet-50's expanding 1x1 layers 0.90-0.97x the time, one thread).
    Only where nothing else can run it: a native graph, NHWC, groups 1,
    not forced to NumPy, a native activation, a residual of all the output
    channels in float32.  NCHW keeps its own buffer: the strip path keeps
    partial sums in y between passes over the input channels."""
    ins, outs = op.inputs, op.outputs
    if len(ins) < 4 or not ins[3] or len(outs) != 1 or not outs[0] or \
            not getattr(graph, "native", False):
        return []
    a = op.attrs
    if a.get("layout", "NCHW") != "NHWC" or int(a.get("group", 1)) != 1 or \
            op.notes.kernel_path == "numpy" or fused_activation(a) is None:
        return []
    r, y = graph.tensors[ins[3]], graph.tensors[outs[0]]
    if np.dtype(y.dtype) != np.dtype(NATIVE_DTYPE) or not same_layout(r, y):
        return []
    return [(3, "inplace")]


@register
class Conv(ConvWeights, Spatial):
    """Convolution on the path :meth:`_choose` takes for it (``impl``; its
    name is ``mode`` / :attr:`path`), whose ``run`` is bound as this
    kernel's own.  The NumPy paths work per image and per band of output
    rows, so their scratch -- the padded input rows of a band and its
    im2col columns, or for depthwise one band-sized product buffer --
    stays within SCRATCH_BUDGET (at least one output row); a 1x1 stride-1
    unpadded conv needs no scratch at all."""

    op_types = ('Conv',)
    family = 'conv'
    inplace = staticmethod(residual_in_place)
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
        # a fused channel shuffle (runtime/fusion.py): grouped NCHW 1x1 only
        self.shuffle = int(self.attrs.get("shuffle_groups", 0) or 0)
        if self.shuffle and (self.shuffle != g or g < 2 or self.nhwc or self.residual or
                             not self._pointwise(1)):
            self.malformed(f"shuffle_groups={self.shuffle} needs a pointwise NCHW "
                           f"convolution of as many groups (groups {g})")
        if self.residual:
            self._check_residual()
            if not self._pointwise(1) or g > 1 and g == C:
                self.fail("a residual input needs a pointwise (1x1, stride 1) convolution")
        self.impl = impl = self._choose(w, g)
        self.mode, self.scratch, self.act_fused = impl.mode, impl.scratch, impl.act_fused
        self.run = impl.run     # bound once: no dispatch per call

    def _check_residual(self):
        """``res_c``, the channels of the fused residual (input 3), whose
        shape must be the output's but for fewer channels (the rest add
        nothing): every path reads it as a tensor of the output's rows and
        pixels, so anything else -- a residual of batch 1 under an output
        of batch 3 -- would be read past its end.  GraphError otherwise."""
        rs, ys = self.shape(3), self.oshape()
        axis = len(ys) - 1 if self.nhwc else 1
        self.res_c = c = int(rs[axis]) if len(rs) == len(ys) else 0
        if len(rs) != len(ys) or not 1 <= c <= ys[axis] or \
                any(r != y for a, (r, y) in enumerate(zip(rs, ys)) if a != axis):
            self.malformed(f"residual input {self.op.inputs[3]!r} of shape {list(rs)} "
                           f"does not match the output's {list(ys)} (channels may be fewer)")
        if np.dtype(self.ins[3].dtype) != np.dtype(self.outs[0].dtype):
            self.malformed(f"residual input {self.op.inputs[3]!r} is {self.ins[3].dtype}, "
                           f"the output {self.outs[0].dtype}")

    def _choose(self, w, g):
        """The path this op takes, set up -- the one place that decides:
        the native rule (:meth:`_native_rule`) where the C kernel takes the
        geometry, else the packed SGEMM band by band (:meth:`_banded`), else
        NumPy / BLAS: the depthwise tap loop, the 1x1 matmul or im2col."""
        if self.shuffle or self.residual and g > 1:     # (NHWC grouped: im2col's matmul)
            return (Im2col if self.nhwc else Pointwise)(self, w)
        if self._native_rule(g):
            weights, groups = ohwi(self, w, g)
            # geometry the C kernel cannot take (e.g. a pad beyond its range):
            # the NumPy path instead
            if weights.shape[-1] * groups == self.c_in and self.pt >= 0 and self.pl >= 0:
                gemm = self._pointwise(groups) or (
                    (self._disjoint(groups) or self._padded_window(groups))
                    and self.cout > FEW_COUT and not self._few_inputs(groups))
                mode = ("native-dw" if groups == self.c_in == self.cout and groups > 1 else
                        "native-gemm" if gemm else "native")
                cls = NativeResidual if self.residual else NativeConv
                return cls(self, weights, groups, mode)
        if self._banded(g):
            return NativeBands(self, ohwi(self, w, 1)[0])
        C, cout = self.c_in, self.cout
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
        if dw_layout or (g == C and g > 1 and cout == C):
            cls = DepthwiseTaps
        elif (self.kh == self.kw == 1 and self.sh == self.sw == 1 and not self.padded
              and (g == 1 or not self.nhwc)):
            cls = Pointwise
        else:
            cls = Im2col
        return cls(self, w)

    @property
    def path(self):
        """native / native-dw / native-gemm / native-band (C kernels) or
        1x1 / dw / im2col (NumPy + BLAS)."""
        return self.mode

    # what the path laid out (tests and tools read them)
    packed = property(lambda self: self.impl.packed, doc="packed weights (native paths)")
    wm = property(lambda self: self.impl.wm, doc="weight matrices (1x1, im2col)")
    descs = property(lambda self: self.impl.descs, doc="band height -> geometry (native-band)")

    def native_call(self, xs, ys):
        call = self.impl.native_call
        return None if call is None or self._act is not None else call(xs, ys)

    # -- the rule ---------------------------------------------------------------
    def _native_rule(self, g):
        """True when this op runs natively: float32, a supported activation,
        and a depthwise convolution (groups = input channels, any depth
        multiplier), few output channels (:meth:`_few_outputs`), few input
        channels (:meth:`_few_inputs`: first layers over RGB) or a
        pointwise one where the packed SGEMM beats BLAS
        (:meth:`_gemm_wins`).  Full NHWC convolutions of groups 1 then run
        the packed SGEMM band by band (:meth:`_banded`).  Every other
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
                self._disjoint(g) or self._padded_window(g) or self._few_pixels(g))

    def _padded_window(self, g):
        """NHWC, groups 1, no dilation, not pointwise, more than FEW_CIN
        input and FEW_COUT output channels, at most PAD_WINDOW_MAX_CIN input
        channels, no fused residual, not a TFLite depthwise layout: the C
        core's packed SGEMM reading every window in place, the taps in the
        padding from a zero row (``_pa_conv2d_is_padded_window``): one call
        on the whole tensor, no padded copy, no bands (a YOLO-style
        detector's 3x3 layers; native-band copied each band padded first,
        in NumPy, on one thread)."""
        return (self.nhwc and g == 1 and self.dh == self.dw == 1 and not self._pointwise(g)
                and FEW_CIN < self.c_in <= PAD_WINDOW_MAX_CIN and self.cout > FEW_COUT
                and not self.residual and self.attrs.get("weight_layout") != "1HWC")

    def _few_pixels(self, g):
        """Groups 1, at most FEW_PIXELS output pixels per image and at most
        FEW_PIXELS_MACS multiply-adds: the C core's direct kernel.  For
        such an op (the 1-D convolutions of a streaming model's step: a
        Silero VAD step's five of 4 output samples) im2col's column copy and
        BLAS's call cost more than the products themselves (a VAD step 267
        -> 205 us, docs/native-kernels.md).  At least FEW_PIXELS_CIN input
        channels: the kernel's inner loop runs over them, once per tap (a
        1-channel STFT of 256 taps took 62 us there, 31 on im2col)."""
        return (g == 1 and self.Ho * self.Wo <= FEW_PIXELS and self.c_in >= FEW_PIXELS_CIN
                and self.cout * self.c_in * self.kh * self.kw * self.Ho * self.Wo
                <= FEW_PIXELS_MACS)

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

    def _disjoint(self, g):
        """NHWC, groups 1, no dilation, unpadded, windows that do not
        overlap (kernel <= stride: 2x2 stride-2 disjoint-window convolutions) or one
        output pixel: the C core's packed SGEMM reading each window in
        place (``_pa_conv2d_is_disjoint``; MediaPipe iris landmark's 2x2
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

    def _banded(self, g):
        """NHWC, groups 1, no dilation, more than a few input and output
        channels (3x3 and other full convolutions the rule above leaves to
        im2col): the packed SGEMM band by band (:class:`NativeBands`),
        unless a path is forced."""
        forced = self.op.notes.kernel_path
        return (self.use_native and self.dtype == NATIVE_DTYPE and self.nhwc and g == 1
                and self.dh == self.dw == 1 and self.c_in > FEW_CIN and self.cout > FEW_COUT
                and forced not in ("native", "numpy") and not self.residual
                and fused_activation(self.attrs) is not None and self.pt >= 0
                and self.pl >= 0 and self.attrs.get("weight_layout") != "1HWC")


@register
class ConvTranspose(Kernel):
    """Transposed convolution, 1-D or 2-D (3-D and more: conv_transpose_nd.py),
    NCHW (ONNX, groups) or NHWC (TFLite TRANSPOSE_CONV, weights ``OHWI``).  Per image and per band of input rows:
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
        self.nd = self.native = None
        w = self.const(1, "weight").astype(self.dtype)
        if self.op.notes.weight_scales and not self.sizing:     # fusion's folds (groups 1)
            w = fold_scales(w, self.op.notes.weight_scales, 1).astype(self.dtype, copy=False)
        if len(self.shape(0)) > 4:      # 3-D and more: conv_transpose_nd.py
            setup_transpose_nd(self, w, self.attrs)
            return
        xs, ys, w, at = self._as_2d(self.shape(0), self.oshape(), w, self.attrs)
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
        pt, pl = transpose_pads(at, (H, W), (Ho, Wo), (kh, kw), s, d)
        self.N, self.C, self.H, self.W, self.G = N, C, H, W, g
        self.kh, self.kw, self.cog, self.cout = kh, kw, cog, cout
        self.Ho, self.Wo = Ho, Wo
        if disjoint_taps(self, at, s, d):       # the C core's kernel: no scratch
            self.native = NativeTranspose(self, w)
            self.act_fused = True
            return
        if self.nhwc:
            # (C, kh*kw*C_out): column order (kh, kw, C_out)
            self.wm = self.keep(np.ascontiguousarray(
                w.transpose(3, 1, 2, 0).reshape(C, kh * kw * cout)))
        else:
            # (G, cog*kh*kw, C/G): W^T per group
            self.wm = self.keep(np.ascontiguousarray(
                w.reshape(g, C // g, cog * kh * kw).transpose(0, 2, 1)))
        per_row = cout * kh * kw * W * self.dtype.itemsize
        nh = items_per_step(self.scratch_budget, per_row, H, per_row // self.dtype.itemsize)
        self.band_rows = nh
        self.scratch = [((cout * kh * kw * nh * W,), self.dtype)]
        cw = tap_slices(Wo, kw, s[1], d[1], pl, 0, W)
        self.bands = []
        for h0 in range(0, H, nh):
            h1 = min(h0 + nh, H)
            steps = []
            for i, rh in enumerate(tap_slices(Ho, kh, s[0], d[0], pt, h0, h1)):
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
            self.malformed(f"ConvTranspose input {list(xs)} has no spatial axis")
        return xs, ys, w, at

    def run(self, xs, ys, sc):
        if self.nd is not None:
            run_transpose_nd(self, xs, ys, sc)
            return
        if self.native is not None:
            self.native.run(xs, ys, sc)
            return
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


@register
class CausalConvWithState(Kernel):
    """A depthwise causal 1-D convolution carrying its state: the past
    state (N, C, k - 1; zeros when omitted) and the input side by side in
    the scratch, one multiply-add per tap of the (C, 1, k) weight, the
    bias, then SiLU (``activation`` silu / swish); a float16 input is
    summed and activated in float32 temporaries, as the reference does.
    present_state is the last k - 1 steps of the buffer."""

    op_types = ("CausalConvWithState",)
    family = "conv"
    inplace = "none"
    shape_rule = rules.causal_conv_with_state
    outputs_by_position = True

    def setup(self):
        xs, ws = self.shape(0), self.shape(1)
        if len(xs) != 3 or len(ws) != 3 or ws[0] != xs[1] or ws[1] != 1 or ws[2] < 1:
            self.malformed(f"input {list(xs)} and weight {list(ws)} must be (N, C, L) and "
                           f"(C, 1, k)")
        act = self.attrs.get("activation", "none")
        act = act.decode() if isinstance(act, bytes) else str(act)
        if act not in ("none", "silu", "swish"):
            self.fail(f"activation {act!r} is not none, silu or swish")
        self.silu = act != "none"
        self.act_fused = True           # (the activation is applied here)
        n, c, length = xs
        self.k = ws[2]
        self.length = length
        self.slots = [i for i, o in enumerate(self.op.outputs) if o]
        self.scratch = [((n, c, length + self.k - 1), self.dtype), (xs, self.dtype)]
        self.one = const(1, np.float32 if self.dtype.itemsize < 4 else self.dtype)

    def run(self, xs, ys, sc):
        padded, t = sc
        x, w = xs[0], xs[1]
        k, length = self.k, self.length
        if self.has(3):
            np.copyto(padded[:, :, :k - 1], xs[3])
        else:
            padded[:, :, :k - 1].fill(0)
        np.copyto(padded[:, :, k - 1:], x)
        if self.slots[-1] == 1:
            np.copyto(ys[-1], padded[:, :, length:])
        if self.slots[0] != 0:
            return                      # only the state is read
        y = ys[0]
        if self.dtype.itemsize < 4:     # float16: summed and activated in float32
            padded, w = padded.astype(np.float32), w.astype(np.float32)
            y, t = np.empty(y.shape, np.float32), np.empty(y.shape, np.float32)
        np.multiply(padded[:, :, :length], w[None, :, 0, :1], out=y)
        for j in range(1, k):
            np.multiply(padded[:, :, j:j + length], w[None, :, 0, j:j + 1], out=t)
            np.add(y, t, out=y)
        if self.has(2):
            np.add(y, xs[2][None, :, None], out=y)
        if self.silu:
            np.negative(y, out=t)
            with np.errstate(over="ignore"):
                np.exp(t, out=t)
            np.add(t, self.one, out=t)
            np.divide(y, t, out=y)
        if y is not ys[0]:
            np.copyto(ys[0], y, casting="unsafe")
