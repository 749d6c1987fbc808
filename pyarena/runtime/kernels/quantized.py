"""Quantized operators: int8 / uint8 tensors stay int8 / uint8.

``QuantizeLinear``, ``DequantizeLinear`` (per tensor or per axis),
``DynamicQuantizeLinear``, ``MatMulInteger``, ``QLinearMatMul``,
``ConvInteger`` and ``QLinearConv`` with their ONNX semantics (round half
to even, saturation to the output type's range).

Memory: the quantized tensors are planned at their own element size, and
integer weights stay in the weights arena in their file dtype.  The
arithmetic runs in floating point on bounded pieces: a band of input rows
converted (and padded with the input zero point), an im2col matrix, a
chunk of weights with their zero point subtracted, and a block of
accumulators -- all in the op's scratch, within its scratch budget like
the float kernels' workspaces.  Products of 8-bit integers summed in
float64 are exact (``ConvInteger`` / ``MatMulInteger`` return the same
int32 accumulators as an integer GEMM); the ``QLinear`` ops accumulate in
float32, whose rounding is far below one output quantum, then requantize
with the per-channel multiplier ``x_scale * w_scale / y_scale``.
"""
import math
from types import SimpleNamespace

import numpy as np

from .registry import KERNELS, Kernel, const, register
from .spatial import Spatial

_RANGES = {np.dtype(np.int8): (-128, 127), np.dtype(np.uint8): (0, 255),
           np.dtype(np.int16): (-32768, 32767), np.dtype(np.uint16): (0, 65535),
           np.dtype(np.int32): (-2**31, 2**31 - 1)}


def _axis_vector(v, ndim, axis):
    """A per-axis vector shaped to broadcast along ``axis`` of an
    ``ndim``-D array (a scalar stays a scalar)."""
    v = np.asarray(v)
    if v.size == 1:
        return v.reshape(())
    shape = [1] * ndim
    shape[axis] = v.size
    return v.reshape(shape)


def _requantize(acc, out, zero_point, lo, hi):
    """``out = saturate(round_half_even(acc) + zero_point)``; ``acc`` (a
    float scratch view shaped like ``out``) is overwritten."""
    np.rint(acc, out=acc)
    np.add(acc, zero_point, out=acc)
    np.clip(acc, lo, hi, out=acc)
    np.copyto(out, acc, casting="unsafe")


#: the least workspace a quantized op is given (see _Quant.shrink_budget)
MIN_SCRATCH = 16 << 10
#: bytes of float weights a quantized conv converts at a time (its zero
#: point subtracted), on top of its band buffers
WEIGHT_CHUNK = 256 << 10


_INTEGER = tuple(_RANGES)


class _Quant(Kernel):
    """Helpers shared by the quantized kernels."""

    def integer_types(self, *tensors):
        """Refuse, by name, a tensor whose type is not an 8/16/32-bit
        integer (float8, int4, ...)."""
        for t in tensors:
            if t is not None and np.dtype(t.dtype) not in _INTEGER:
                self.fail(f"tensor {t.name!r} of type {np.dtype(t.dtype).name} is not "
                          f"supported (8, 16 or 32-bit integers)")

    def shrink_budget(self):
        """Float workspace at most a quarter of the bytes of the op's
        tensors (its 8-bit activations are 4x smaller than the float ones
        its scratch holds), so the scratch does not set the arena of an
        int8 model; at least MIN_SCRATCH, at most the op's budget."""
        def nbytes(t):
            return math.prod(int(d) for d in t.shape) * np.dtype(t.dtype).itemsize
        own = sum(nbytes(t) for t in list(self.ins) + list(self.outs)
                  if t is not None and t.data is None)
        self.scratch_budget = int(min(self.scratch_budget, max(MIN_SCRATCH, own // 4)))

    def qparam(self, i, what, default=0.0):
        """A scale or zero point: the constant of input ``i`` (``default``
        when omitted), as a float array."""
        v = self.const(i, what) if self.has(i) else None
        return np.asarray(default if v is None else v, dtype=np.float64)

    def runtime_param(self, i):
        """Whether input ``i`` is a scale / zero point computed at run time
        (DynamicQuantizeLinear's outputs): then it is read per call."""
        return self.has(i) and self.ins[i].data is None

    def out_range(self, i=0):
        """The output type's range, narrowed to ``qmin`` / ``qmax`` (a fused
        activation applied as a clamp of the quantized output)."""
        dt = np.dtype(self.outs[i].dtype)
        if dt not in _RANGES:
            self.fail(f"output type {dt} is not an integer type this kernel writes")
        lo, hi = _RANGES[dt]
        return max(lo, int(self.attrs.get("qmin", lo))), min(hi, int(self.attrs.get("qmax", hi)))

    def rows_per_chunk(self, shape, per_elem_bytes):
        """Outer-axis rows per chunk so a chunk's float scratch fits the
        budget (at least one row)."""
        row = math.prod(shape[1:]) if len(shape) > 1 else 1
        rows = self.scratch_budget // max(1, row * per_elem_bytes)
        return int(max(1, min(shape[0] if shape else 1, rows)))


@register
class QuantizeLinear(_Quant):
    """``y = saturate(round(x / y_scale) + y_zero_point)``, per tensor or
    per ``axis``; y's type is the zero point's (uint8 when omitted)."""

    op_types = ("QuantizeLinear",)

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        if int(self.attrs.get("block_size", 0) or 0):
            self.fail("blocked quantization (block_size) is not supported")
        self.integer_types(self.outs[0])
        xs = self.shape(0)
        nd = max(1, len(xs))
        axis = int(self.attrs.get("axis", 1))
        axis = axis + nd if axis < 0 else axis
        self.scale = self.keep(_axis_vector(self.qparam(1, "y_scale").astype(np.float32),
                                            nd, axis))
        self.zp = self.keep(_axis_vector(self.qparam(2, "y_zero_point").astype(np.float32),
                                         nd, axis))
        self.lo, self.hi = self.out_range()
        self.per_axis_rows = axis == 0 and self.scale.ndim > 0
        shape = xs if xs else (1,)
        self.rows = self.rows_per_chunk(shape, 4)
        self.scratch = [((self.rows,) + tuple(shape[1:]), np.float32)]

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if x.ndim == 0:
            x, y = x.reshape(1), y.reshape(1)
        for r0 in range(0, x.shape[0], self.rows):
            r1 = min(r0 + self.rows, x.shape[0])
            acc = sc[0][:r1 - r0]
            scale = self.scale[r0:r1] if self.per_axis_rows else self.scale
            zp = self.zp[r0:r1] if self.per_axis_rows and self.zp.ndim else self.zp
            np.divide(x[r0:r1], scale, out=acc)
            _requantize(acc, y[r0:r1], zp, self.lo, self.hi)


@register
class DequantizeLinear(_Quant):
    """``y = (x - x_zero_point) * x_scale``, per tensor or per ``axis``."""

    op_types = ("DequantizeLinear",)

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        if int(self.attrs.get("block_size", 0) or 0):
            self.fail("blocked quantization (block_size) is not supported")
        self.integer_types(self.ins[0])
        nd = max(1, len(self.shape(0)))
        axis = int(self.attrs.get("axis", 1))
        axis = axis + nd if axis < 0 else axis
        self.scale = self.keep(_axis_vector(self.qparam(1, "x_scale").astype(self.dtype),
                                            nd, axis))
        self.zp = self.keep(_axis_vector(self.qparam(2, "x_zero_point").astype(self.dtype),
                                         nd, axis))

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        np.subtract(x, self.zp, out=y)
        np.multiply(y, self.scale, out=y)


@register
class DynamicQuantizeLinear(_Quant):
    """uint8 quantization with the scale and zero point computed from the
    data: the range [min(0, min x), max(0, max x)] onto 0..255."""

    op_types = ("DynamicQuantizeLinear",)

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        shape = self.shape(0) or (1,)
        self.rows = self.rows_per_chunk(shape, 4)
        self.scratch = [((self.rows,) + tuple(shape[1:]), np.float32)]

    def run(self, xs, ys, sc):
        x = xs[0] if xs[0].ndim else xs[0].reshape(1)
        y = ys[0] if ys[0].ndim else ys[0].reshape(1)
        f = np.float32
        lo = min(f(0), f(x.min())) if x.size else f(0)
        hi = max(f(0), f(x.max())) if x.size else f(0)
        scale = (hi - lo) / f(255) if hi != lo else f(1)
        zp = f(np.clip(np.rint((f(0) - lo) / scale), 0, 255))
        for r0 in range(0, x.shape[0], self.rows):
            r1 = min(r0 + self.rows, x.shape[0])
            acc = sc[0][:r1 - r0]
            np.divide(x[r0:r1], scale, out=acc)
            _requantize(acc, y[r0:r1], zp, 0, 255)
        if len(ys) > 1:
            ys[1][...] = scale
        if len(ys) > 2:
            ys[2][...] = zp


class _QMatMul(_Quant):
    """A (..., M, K) @ B (K, N) on integers with zero points, B constant;
    N in column chunks so the converted weights stay within the budget."""

    integer = True   # int32 accumulators out (MatMulInteger) or requantized

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        ia, ib, iaz, ibz = self.layout
        b = self.b_matrix(self.const(ib, "B"))
        if b.ndim != 2:
            self.fail(f"B of shape {list(b.shape)} is not supported (a 2-D constant)")
        a_shape = self.shape(ia)
        if not a_shape or a_shape[-1] != b.shape[0]:
            self.fail(f"A {list(a_shape)} and B {list(b.shape)} do not chain")
        self.K, self.N = b.shape
        self.M = math.prod(a_shape[:-1]) if len(a_shape) > 1 else 1
        self.b = self.keep(np.ascontiguousarray(b))        # the file's integer dtype
        self.ct = np.dtype(np.float64 if self.integer else np.float32)
        self.azp_input = iaz if self.runtime_param(iaz) else None
        azp = np.zeros(1) if self.azp_input is not None else self.qparam(iaz, "a_zero_point")
        if azp.size != 1:
            self.fail("a per-row zero point of A is not supported")
        self.azp = float(azp.reshape(()))
        if self.azp_input is not None:
            self.runtime = (ia, iaz)
        bzp = self.qparam(ibz, "b_zero_point").reshape(-1)
        self.bzp = self.keep(np.broadcast_to(bzp, (self.N,)).astype(self.ct))
        isz = self.ct.itemsize
        room = max(self.scratch_budget - self.M * self.K * isz, 0)
        self.nc = int(max(1, min(self.N, room // max(1, (self.K + self.M) * isz))))
        self.scratch = [((self.M, self.K), self.ct), ((self.K * self.nc,), self.ct),
                        ((self.M * self.nc,), self.ct)]
        self.finish_setup()

    def finish_setup(self):
        pass

    def b_matrix(self, b):
        return b

    def run(self, xs, ys, sc):
        a = xs[self.layout[0]].reshape(self.M, self.K)
        y = ys[0].reshape(self.M, self.N)
        af, wf, acc = sc
        azp = self.azp if self.azp_input is None else float(xs[self.azp_input].reshape(-1)[0])
        np.subtract(a, azp, out=af)
        for c0 in range(0, self.N, self.nc):
            c1 = min(c0 + self.nc, self.N)
            w = wf[:self.K * (c1 - c0)].reshape(self.K, c1 - c0)
            np.subtract(self.b[:, c0:c1], self.bzp[c0:c1], out=w)
            out = acc[:self.M * (c1 - c0)].reshape(self.M, c1 - c0)
            np.matmul(af, w, out=out)
            self.store(out, y[:, c0:c1], c0, c1)

    def store(self, acc, y, c0, c1):
        np.copyto(y, acc, casting="unsafe")


@register
class MatMulInteger(_QMatMul):
    """int32 ``(A - a_zero_point) @ (B - b_zero_point)`` (B constant; its
    zero point per tensor or per column)."""

    op_types = ("MatMulInteger",)
    layout = (0, 1, 2, 3)


@register
class QLinearMatMul(_QMatMul):
    """``y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale /
    y_scale) + y_zp)`` (b constant; its scale and zero point per tensor or
    per column)."""

    op_types = ("QLinearMatMul",)
    layout = (0, 3, 2, 5)
    integer = False

    def finish_setup(self):
        a_s = self.qparam(1, "a_scale").reshape(-1)
        b_s = self.qparam(4, "b_scale").reshape(-1)
        y_s = self.qparam(6, "y_scale").reshape(-1)
        if a_s.size != 1 or y_s.size != 1:
            self.fail("per-row scales of a or y are not supported")
        mult = np.broadcast_to(a_s[0] * b_s / y_s[0], (self.N,))
        self.mult = self.keep(mult.astype(np.float32))
        self.yzp = float(self.qparam(7, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()

    def store(self, acc, y, c0, c1):
        np.multiply(acc, self.mult[c0:c1], out=acc)
        _requantize(acc, y, self.yzp, self.lo, self.hi)


@register
class QGemm(QLinearMatMul):
    """com.microsoft QGemm: ``alpha * (A - a_zp) @ (B - b_zp)`` (B constant,
    ``transB`` allowed) plus the int32 bias C at scale ``a_scale *
    b_scale``; requantized with y_scale / y_zero_point, or float32 out
    when y_scale is omitted."""

    op_types = ("QGemm",)
    onnx_domain = "com.microsoft"
    layout = (0, 3, 2, 5)

    def b_matrix(self, b):
        if int(self.attrs.get("transA", 0)):
            self.fail("transA=1 is not supported")
        return b.T if int(self.attrs.get("transB", 0)) else b

    def finish_setup(self):
        a_s = self.qparam(1, "a_scale").reshape(-1)
        b_s = self.qparam(4, "b_scale").reshape(-1)
        if a_s.size != 1:
            self.fail("a per-row scale of A is not supported")
        alpha = float(self.attrs.get("alpha", 1.0))
        scale = np.broadcast_to(alpha * a_s[0] * b_s, (self.N,))
        self.float_out = not self.has(7)
        if not self.float_out:
            scale = scale / float(self.qparam(7, "y_scale").reshape(-1)[0])
            self.yzp = float(self.qparam(8, "y_zero_point").reshape(-1)[0])
            self.lo, self.hi = self.out_range()
        self.mult = self.keep(scale.astype(np.float32))
        c = self.qparam(6, "C").reshape(-1) if self.has(6) else np.zeros(1)
        self.c = self.keep(np.broadcast_to(c, (self.N,)).astype(self.ct))

    def store(self, acc, y, c0, c1):
        np.add(acc, self.c[c0:c1], out=acc)
        np.multiply(acc, self.mult[c0:c1], out=acc)
        if self.float_out:
            np.copyto(y, acc)
        else:
            _requantize(acc, y, self.yzp, self.lo, self.hi)


class _QConv(Spatial, _Quant):
    """Convolution on integers (NCHW, 1-D or 2-D, groups): per band of
    output rows the input rows are converted to float and padded with the
    input zero point, unfolded (im2col) and multiplied by chunks of output
    channels of the weights (zero point subtracted), then stored.  With
    ``acc = sum (x_padded) * (w - w_zp)``, the input zero point comes out
    through ``- x_zp * sum(w - w_zp)`` per output channel, folded into the
    bias."""

    integer = True
    op_types = ()

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        ix, iw, ixz, iwz, ib = self.layout
        self.ct = np.dtype(np.float64 if self.integer else np.float32)
        self.dtype = self.ct            # the band buffers' element type
        w = self.const(iw, "weight")
        if w.ndim not in (3, 4):
            self.fail(f"weight of shape {list(w.shape)} is not supported")
        nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        if nhwc and self.attrs.get("weight_layout") == "1HWC":
            # TFLite depthwise (1, kh, kw, C*M): output channel c*M + m reads
            # input channel c -> OHWI of a grouped conv with group = C
            w = w.reshape(w.shape[1:]).transpose(2, 0, 1)[..., None]
        if nhwc:                        # OHWI -> O, I, H, W order of the checks below
            k_sp, w_in = w.shape[1:-1], w.shape[-1]
        else:
            k_sp, w_in = w.shape[2:], w.shape[1]
        self.xzp_input = ixz if self.runtime_param(ixz) else None
        xzp = np.zeros(1) if self.xzp_input is not None else \
            self.qparam(ixz, "x_zero_point").reshape(-1)
        if xzp.size != 1:
            self.fail("a per-channel input zero point is not supported")
        self.geometry(k_sp, pad_value=float(xzp[0]))
        self.padded = True              # the band buffer also converts the input
        g = int(self.attrs.get("group", 1))
        C, cout = self.c_in, w.shape[0]
        if C % g or cout % g or w_in != C // g:
            self.fail(f"group={g} does not fit channels {C} -> {cout} and weight "
                      f"{list(w.shape)}")
        self.G, self.cout, self.K = g, cout, (C // g) * self.kh * self.kw
        self.w = self.keep(np.ascontiguousarray(w.reshape(g, cout // g, self.K)))
        wzp = np.broadcast_to(self.qparam(iwz, "w_zero_point").reshape(-1), (cout,))
        # one value (symmetric weights: 0) when every channel has the same
        self.wzp_uniform = not np.ptp(wzp)
        self.wzp = self.keep(np.full((1, 1, 1), wzp[0], self.ct) if self.wzp_uniform else
                             wzp.astype(self.ct).reshape(g, cout // g, 1))
        wsum = (w.reshape(cout, -1).astype(np.float64) - wzp[:, None]).sum(axis=1)
        bias = self.qparam(ib, "bias").reshape(-1) if ib is not None and self.has(ib) else 0.0
        bias = np.broadcast_to(bias, (cout,)).astype(np.float64)
        shape3 = (g, cout // g, 1)
        if self.xzp_input is None:
            self.bias = self.keep((bias - float(xzp[0]) * wsum).astype(self.ct).reshape(shape3))
        else:       # x_zp known per call: bias - x_zp * sum(w - w_zp) then
            self.bias_b = self.keep(bias.astype(self.ct).reshape(shape3))
            self.wsum = self.keep(wsum.astype(self.ct).reshape(shape3))
            self.runtime = (ix, ixz)
        isz = self.ct.itemsize
        cog = cout // g
        # output channels per chunk (every group converts the same chunk of
        # its channels): the converted weights get WEIGHT_CHUNK bytes of
        # their own -- a few matmuls per band instead of one per channel
        self.co = int(max(1, min(cog, WEIGHT_CHUNK // max(1, g * self.K * isz))))
        # depthwise (one output channel per input channel): kernel taps
        # accumulated over the band -- im2col would hold kh*kw copies of it
        self.depthwise = g == C and cog == 1 and g > 1
        if self.depthwise:
            self.co = 1
            nr = self.plan_bands(extra_per_row=2 * C * self.Wo * isz)
            self.scratch = self.pad_spec() + [
                ((C * nr * self.Wo,), self.ct),         # one tap's products
                ((C * self.kh * self.kw,), self.ct),   # the weights, zero point off
                ((C * nr * self.Wo,), self.ct)]        # accumulators
        else:
            nr = self.plan_bands(
                extra_per_row=(C * self.kh * self.kw + g * self.co) * self.Wo * isz)
            self.scratch = self.pad_spec() + [
                ((C * self.kh * self.kw * nr * self.Wo,), self.ct),
                ((g * self.co * self.K,), self.ct),
                ((g * self.co * nr * self.Wo,), self.ct)]
        if self.xzp_input is not None:
            self.scratch.append((shape3, self.ct))
        self.finish_setup()

    def finish_setup(self):
        pass

    def run(self, xs, ys, sc):
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf, cols, wf, acc = sc[:4]
        G, K, Wo, cog = self.G, self.K, self.Wo, self.cout // self.G
        bias = self.bias if self.xzp_input is None else sc[4]
        if self.xzp_input is not None:
            z = xs[self.xzp_input].reshape(-1)[0]
            self.pad_value.fill(z)                      # padding reads as x_zp
            np.multiply(self.wsum, -float(z), out=bias)
            np.add(bias, self.bias_b, out=bias)
        if self.depthwise:
            return self.run_depthwise(x, y, pbuf, cols, wf, acc, bias)
        for n in range(self.N):
            for r0, r1 in self.bands:
                nr = r1 - r0
                P = nr * Wo
                src = self.band_src(x[n], pbuf, r0, r1)
                c = cols[:self.c_in * self.kh * self.kw * P]
                if self.nhwc:           # columns (G, P, K), K in (kh, kw, C/G) order
                    win = self.windows(src, nr, G) if G > 1 else self.windows(src, nr)
                    np.copyto(c.reshape(win.shape), win)
                    cg = c.reshape(G, P, K).transpose(0, 2, 1)
                    yg = y[n][r0:r1].reshape(P, G, cog).transpose(1, 2, 0)
                else:
                    np.copyto(c.reshape(self.c_in, self.kh, self.kw, nr, Wo),
                              self.windows(src, nr))
                    cg = c.reshape(G, K, P)
                    yg = y[n][:, r0:r1].reshape(G, cog, P)
                for c0 in range(0, cog, self.co):
                    c1 = min(c0 + self.co, cog)
                    nc = c1 - c0
                    w = wf[:G * nc * K].reshape(G, nc, K)
                    wz = self.wzp if self.wzp_uniform else self.wzp[:, c0:c1]
                    np.subtract(self.w[:, c0:c1], wz, out=w)
                    out = acc[:G * nc * P].reshape(G, nc, P)
                    np.matmul(w, cg, out=out)
                    np.add(out, bias[:, c0:c1], out=out)
                    self.store(out, yg[:, c0:c1], c0, c1)

    def run_depthwise(self, x, y, pbuf, tmp, wf, acc, bias):
        C, Wo, kk = self.c_in, self.Wo, self.kh * self.kw
        w = wf.reshape(C, kk)
        np.subtract(self.w.reshape(C, kk), self.wzp.reshape(-1, 1), out=w)
        wt = w.T.reshape(self.kh, self.kw, C)
        if not self.nhwc:
            wt = wt[..., None, None]                      # (kh, kw, C, 1, 1)
        for n in range(self.N):
            for r0, r1 in self.bands:
                nr = r1 - r0
                P = nr * Wo
                src = self.band_src(x[n], pbuf, r0, r1)
                shape = (nr, Wo, C) if self.nhwc else (C, nr, Wo)
                a, t = acc[:C * P].reshape(shape), tmp[:C * P].reshape(shape)
                for i in range(self.kh):
                    for j in range(self.kw):
                        win = self.tap(src, i, j, nr)
                        if i == 0 and j == 0:
                            np.multiply(win, wt[i, j], out=a)
                        else:
                            np.multiply(win, wt[i, j], out=t)
                            np.add(a, t, out=a)
                # as (G=C, 1, P) like the grouped path, then bias and store
                ag = a.reshape(P, C).T[:, None, :] if self.nhwc else a.reshape(C, 1, P)
                yg = (y[n][r0:r1].reshape(P, C).T[:, None, :] if self.nhwc else
                      y[n][:, r0:r1].reshape(C, 1, P))
                np.add(ag, bias, out=ag)
                self.store(ag, yg, 0, 1)

    def store(self, acc, y, c0, c1):
        np.copyto(y, acc, casting="unsafe")


@register
class ConvInteger(_QConv):
    """int32 convolution of ``x - x_zero_point`` by ``w - w_zero_point``
    (the weight zero point per tensor or per output channel)."""

    op_types = ("ConvInteger",)
    layout = (0, 1, 2, 3, None)


@register
class QLinearConv(_QConv):
    """Quantized convolution: int32 bias added to the accumulators, then
    ``y = saturate(round(acc * x_scale * w_scale / y_scale) + y_zp)`` (the
    weight scale and zero point per tensor or per output channel)."""

    op_types = ("QLinearConv",)
    layout = (0, 3, 2, 5, 8)
    integer = False

    def finish_setup(self):
        xs = self.qparam(1, "x_scale").reshape(-1)
        ws = np.broadcast_to(self.qparam(4, "w_scale").reshape(-1), (self.cout,))
        ys = self.qparam(6, "y_scale").reshape(-1)
        if xs.size != 1 or ys.size != 1:
            self.fail("per-channel x or y scales are not supported")
        cog = self.cout // self.G
        self.mult = self.keep((xs[0] * ws / ys[0]).astype(np.float32).reshape(self.G, cog, 1))
        self.yzp = float(self.qparam(7, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()

    def store(self, acc, y, c0, c1):
        np.multiply(acc, self.mult[:, c0:c1], out=acc)
        _requantize(acc, y, self.yzp, self.lo, self.hi)


# -- com.microsoft: the QOperator ops onnxruntime's quantizer emits ------------
class _QElementwise(_Quant):
    """Element-wise quantized ops on float scratch: each operand
    dequantized, the float op, the result requantized into y.  When every
    operand has the output's shape the work goes in flat chunks (scratch
    within the budget); a broadcast operand makes it one piece of the
    output's size.  Constant operands are dequantized once, at build."""

    onnx_domain = "com.microsoft"
    #: (input index, scale index, zero point index) of each operand
    operands = ()
    #: (scale index, zero point index) of the output
    output = ()

    def setup(self):
        self.shrink_budget()
        out = self.oshape()
        self.total = math.prod(out)
        self.lo, self.hi = self.out_range()
        ys, yzp = self.output
        self.inv_y_scale = np.float32(1.0 / float(self.qparam(ys, "y_scale").reshape(-1)[0]))
        self.y_zp = float(self.qparam(yzp, "y_zero_point").reshape(-1)[0])
        self.ops, runtime, whole, flat = [], [], 0, True
        for i, si, zi in self.operands:
            s = np.float32(self.qparam(si, "scale").reshape(-1)[0])
            z = np.float32(self.qparam(zi, "zero_point").reshape(-1)[0])
            shape = self.shape(i)
            flat = flat and shape == out
            if self.ins[i].data is not None:
                v = (np.asarray(self.ins[i].data, np.float32) - z) * s
                self.ops.append(("const", self.keep(v.astype(np.float32)), None, None, None))
            elif shape == out:
                runtime.append(i)
                self.ops.append(("chunk", i, s, z, None))
            else:
                runtime.append(i)
                self.ops.append(("whole", i, s, z, whole))
                whole += math.prod(shape)
        self.runtime = tuple(runtime)
        self.flat = flat
        self.chunk = int(max(1, min(self.total, self.scratch_budget // 8))) if flat else \
            self.total
        self.scratch = [((self.chunk,), np.float32), ((self.chunk,), np.float32)]
        if whole:
            self.scratch.append(((whole,), np.float32))

    def operand(self, xs, sc, k, c0, c1, buf):
        """Operand ``k`` as float over output elements [c0, c1), in ``buf``."""
        kind, i, s, z, at = self.ops[k]
        if kind == "chunk":
            np.subtract(xs[i].reshape(-1)[c0:c1], z, out=buf)
            np.multiply(buf, s, out=buf)
            return buf
        if kind == "const":
            full = i
        else:
            x = xs[i]
            full = sc[2][at:at + x.size].reshape(x.shape)
            np.subtract(x, z, out=full)
            np.multiply(full, s, out=full)
        if self.flat:
            np.copyto(buf, full.reshape(-1)[c0:c1])
        else:                                   # one piece: broadcast into it
            np.copyto(buf.reshape(self.oshape()), full)
        return buf

    def run(self, xs, ys, sc):
        y = ys[0].reshape(-1)
        for c0 in range(0, self.total, self.chunk):
            c1 = min(c0 + self.chunk, self.total)
            a = self.operand(xs, sc, 0, c0, c1, sc[0][:c1 - c0])
            b = sc[1][:c1 - c0]
            if len(self.ops) > 1:
                self.operand(xs, sc, 1, c0, c1, b)
            self.compute(a, b)
            np.multiply(a, self.inv_y_scale, out=a)
            _requantize(a, y[c0:c1], self.y_zp, self.lo, self.hi)


@register
class QLinearAdd(_QElementwise):
    """com.microsoft QLinearAdd: ``C = quantize(dequant(A) + dequant(B))``."""

    op_types = ("QLinearAdd",)
    operands = ((0, 1, 2), (3, 4, 5))
    output = (6, 7)

    def compute(self, a, b):
        np.add(a, b, out=a)


@register
class QLinearMul(_QElementwise):
    """com.microsoft QLinearMul: ``C = quantize(dequant(A) * dequant(B))``."""

    op_types = ("QLinearMul",)
    operands = ((0, 1, 2), (3, 4, 5))
    output = (6, 7)

    def compute(self, a, b):
        np.multiply(a, b, out=a)


@register
class QLinearSigmoid(_QElementwise):
    """com.microsoft QLinearSigmoid."""

    op_types = ("QLinearSigmoid",)
    operands = ((0, 1, 2),)
    output = (3, 4)

    def compute(self, a, b):
        np.negative(a, out=a)
        np.exp(a, out=a)
        np.add(a, np.float32(1), out=a)
        np.reciprocal(a, out=a)


@register
class QLinearLeakyRelu(_QElementwise):
    """com.microsoft QLinearLeakyRelu (``alpha``, default 0.01)."""

    op_types = ("QLinearLeakyRelu",)
    operands = ((0, 1, 2),)
    output = (3, 4)

    def compute(self, a, b):
        alpha = np.float32(self.attrs.get("alpha", 0.01))
        np.multiply(a, alpha, out=b)
        (np.maximum if alpha <= 1 else np.minimum)(a, b, out=a)


@register
class QLinearGlobalAveragePool(_Quant):
    """com.microsoft QLinearGlobalAveragePool: the mean over the spatial
    axes, requantized (``channels_last`` for NHWC)."""

    op_types = ("QLinearGlobalAveragePool",)
    onnx_domain = "com.microsoft"

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        xs = self.shape(0)
        self.last = bool(int(self.attrs.get("channels_last", 0)))
        self.C = xs[-1] if self.last else xs[1]
        self.N = xs[0]
        self.x_scale = float(self.qparam(1, "x_scale").reshape(-1)[0])
        self.x_zp = float(self.qparam(2, "x_zero_point").reshape(-1)[0])
        self.y_scale = float(self.qparam(3, "y_scale").reshape(-1)[0])
        self.y_zp = float(self.qparam(4, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        self.scratch = [((self.C,), np.float32)]

    def run(self, xs, ys, sc):
        acc = sc[0]
        for n in range(self.N):
            x = xs[0][n]
            if self.last:
                np.mean(x.reshape(-1, self.C), axis=0, dtype=np.float32, out=acc)
            else:
                np.mean(x.reshape(self.C, -1), axis=1, dtype=np.float32, out=acc)
            np.subtract(acc, np.float32(self.x_zp), out=acc)
            np.multiply(acc, np.float32(self.x_scale / self.y_scale), out=acc)
            _requantize(acc, ys[0][n].reshape(-1), self.y_zp, self.lo, self.hi)


@register
class QLinearConcat(_Quant):
    """com.microsoft QLinearConcat(Y_scale, Y_zero_point, (X, X_scale,
    X_zero_point)...): each input requantized into its slice of y."""

    op_types = ("QLinearConcat",)
    onnx_domain = "com.microsoft"

    def setup(self):
        self.shrink_budget()
        n_in = (len(self.ins) - 2) // 3
        if n_in < 1 or len(self.ins) != 2 + 3 * n_in:
            self.fail("expects Y_scale, Y_zero_point and (X, scale, zero point) triples")
        out = self.oshape()
        axis = int(self.attrs.get("axis", 1))
        self.axis = axis + len(out) if axis < 0 else axis
        y_scale = float(self.qparam(0, "Y_scale").reshape(-1)[0])
        self.y_zp = float(self.qparam(1, "Y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        self.parts = []
        off = 0
        for k in range(n_in):
            i = 2 + 3 * k
            s = float(self.qparam(i + 1, "scale").reshape(-1)[0])
            z = float(self.qparam(i + 2, "zero_point").reshape(-1)[0])
            width = self.shape(i)[self.axis]
            self.parts.append((i, np.float32(z), np.float32(s / y_scale), off, width))
            off += width
        self.runtime = tuple(p[0] for p in self.parts)
        biggest = max(math.prod(self.shape(p[0])) for p in self.parts)
        self.scratch = [((biggest,), np.float32)]

    def run(self, xs, ys, sc):
        y = ys[0]
        for i, z, m, off, width in self.parts:
            x = xs[i]
            f = sc[0][:x.size].reshape(x.shape)
            np.subtract(x, z, out=f)
            np.multiply(f, m, out=f)
            index = [slice(None)] * y.ndim
            index[self.axis] = slice(off, off + width)
            _requantize(f, y[tuple(index)], self.y_zp, self.lo, self.hi)


@register
class QLinearSoftmax(_Quant):
    """com.microsoft QLinearSoftmax: the softmax of the dequantized input,
    requantized; ``opset`` < 13 semantics flatten from ``axis`` on (2-D
    coercion), 13 and later take the one ``axis``.  Rows of the softmax
    go through float scratch a chunk at a time."""

    op_types = ("QLinearSoftmax",)
    onnx_domain = "com.microsoft"

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        shape = self.shape(0)
        nd = len(shape)
        axis = int(self.attrs.get("axis", -1))
        axis = axis + nd if axis < 0 else axis
        if int(self.attrs.get("opset", 13)) < 13:
            self.inner = math.prod(shape[axis:])
        elif axis == nd - 1:
            self.inner = shape[-1] if shape else 1
        else:
            self.fail(f"softmax over axis {axis} of {nd} (not the last) is not supported")
        self.outer = math.prod(shape) // max(1, self.inner)
        self.x_scale = np.float32(self.qparam(1, "x_scale").reshape(-1)[0])
        self.x_zp = np.float32(self.qparam(2, "x_zero_point").reshape(-1)[0])
        self.inv_y = np.float32(1.0 / float(self.qparam(3, "y_scale").reshape(-1)[0]))
        self.y_zp = float(self.qparam(4, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        self.rows = int(max(1, min(self.outer, self.scratch_budget // max(1, 4 * self.inner))))
        self.scratch = [((self.rows, self.inner), np.float32), ((self.rows, 1), np.float32)]

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.outer, self.inner)
        y = ys[0].reshape(self.outer, self.inner)
        for r0 in range(0, self.outer, self.rows):
            r1 = min(r0 + self.rows, self.outer)
            f, m = sc[0][:r1 - r0], sc[1][:r1 - r0]
            np.subtract(x[r0:r1], self.x_zp, out=f)
            np.multiply(f, self.x_scale, out=f)
            np.max(f, axis=1, keepdims=True, out=m)
            np.subtract(f, m, out=f)
            np.exp(f, out=f)
            np.sum(f, axis=1, keepdims=True, out=m)
            np.divide(f, m, out=f)
            np.multiply(f, self.inv_y, out=f)
            _requantize(f, y[r0:r1], self.y_zp, self.lo, self.hi)


@register
class QLinearLookup(_Quant):
    """ai.pyarena QLinearLookup(x, table): ``y = table[x's byte]`` -- an
    element-wise function of an 8-bit tensor, its 256 quantized results
    worked out at import (:mod:`pyarena.importers.onnx_qdq`).  Indices go
    through a bounded intp scratch chunk (NumPy's take would allocate it)."""

    op_types = ("QLinearLookup",)
    onnx_domain = "ai.pyarena"

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        table = self.const(1, "table").reshape(-1)
        if table.size != 256 or np.dtype(self.ins[0].dtype).itemsize != 1:
            self.fail("needs an 8-bit input and a table of 256 entries")
        self.table = self.keep(np.ascontiguousarray(table.astype(self.outs[0].dtype)))
        total = math.prod(self.shape(0))
        self.chunk = int(max(1, min(total, self.scratch_budget // 8)))
        self.scratch = [((self.chunk,), np.intp)]

    def run(self, xs, ys, sc):
        x, y = xs[0].reshape(-1).view(np.uint8), ys[0].reshape(-1)
        for c0 in range(0, x.size, self.chunk):
            c1 = min(c0 + self.chunk, x.size)
            idx = sc[0][:c1 - c0]
            np.copyto(idx, x[c0:c1])
            np.take(self.table, idx, out=y[c0:c1])


@register
class QLinearAveragePool(_Quant):
    """com.microsoft QLinearAveragePool: the float AveragePool kernel on the
    dequantized input, requantized (``channels_last`` for NHWC).  Its
    float copies of the input and output are scratch: 4x the int8 tensors
    while it runs."""

    op_types = ("QLinearAveragePool",)
    onnx_domain = "com.microsoft"

    def setup(self):
        self.runtime = (0,)
        attrs = {k: v for k, v in self.attrs.items() if k != "channels_last"}
        if int(self.attrs.get("channels_last", 0)):
            attrs["layout"] = "NHWC"
        fx = SimpleNamespace(name=self.ins[0].name, shape=self.shape(0), dtype=np.float32,
                             data=None)
        fy = SimpleNamespace(name=self.outs[0].name, shape=self.oshape(), dtype=np.float32,
                             data=None)
        op = SimpleNamespace(name=self.op.name, op_type="AveragePool", attrs=attrs,
                             outputs=[fy.name], inputs=[fx.name])
        self.inner = KERNELS["AveragePool"](op, [fx], [fy], self.keep, self.scratch_budget)
        self.x_scale = np.float32(self.qparam(1, "x_scale").reshape(-1)[0])
        self.x_zp = np.float32(self.qparam(2, "x_zero_point").reshape(-1)[0])
        self.inv_y = np.float32(1.0 / float(self.qparam(3, "y_scale").reshape(-1)[0]))
        self.y_zp = float(self.qparam(4, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        self.scratch = [(self.shape(0), np.float32), (self.oshape(), np.float32),
                        ((max(1, self.inner.scratch_bytes),), np.uint8)]

    def run(self, xs, ys, sc):
        fx, fy, inner = sc
        np.subtract(xs[0], self.x_zp, out=fx)
        np.multiply(fx, self.x_scale, out=fx)
        self.inner([fx], [fy], inner)
        np.multiply(fy, self.inv_y, out=fy)
        _requantize(fy, ys[0], self.y_zp, self.lo, self.hi)


__all__ = ["QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear", "MatMulInteger",
           "QLinearMatMul", "ConvInteger", "QLinearConv", "QLinearAdd", "QLinearMul",
           "QLinearSigmoid", "QLinearLeakyRelu", "QLinearGlobalAveragePool", "QLinearConcat",
           "QLinearSoftmax", "QLinearAveragePool", "QGemm", "QLinearLookup", "const"]
