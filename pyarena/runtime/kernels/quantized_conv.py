"""Integer convolutions: ``ConvInteger`` (exact int32 accumulators) and
``QLinearConv`` (requantized with a per-channel multiplier), NCHW or NHWC
(TFLite's OHWI and depthwise 1HWC weights), 1-D or 2-D, groups.  Per band
of output rows the input rows are converted to float and padded with the
input zero point; depthwise convolutions accumulate kernel taps, the others
go through im2col and chunks of output channels of the weights."""
import numpy as np

from .quantization import QuantKernel, requantize
from .requant_fixed import requant_fixed, tflite_multipliers
from .quantized_conv_native import try_native
from . import shape_rules as rules
from .registry import _carve, register
from .spatial import Spatial

#: bytes of float weights a quantized conv converts at a time (its zero
#: point subtracted), on top of its band buffers
WEIGHT_CHUNK = 256 << 10


class _QConv(Spatial, QuantKernel):
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
        exact = self.integer or self.fixed_requant() is not None   # (TFLite's reads exact sums)
        self.ct = np.dtype(np.float64 if exact else np.float32)
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
        wzp = np.broadcast_to(self.qparam(iwz, "w_zero_point").reshape(-1), (cout,))
        bias = self.qparam(ib, "bias").reshape(-1) if ib is not None and self.has(ib) else 0.0
        bias = np.broadcast_to(bias, (cout,)).astype(np.float64)
        self.native = try_native(self, w, wzp, bias,
                                 None if self.xzp_input is not None else xzp[0])
        if self.native is not None:
            self.scratch = self.native.scratch
            self.runtime = (ix,) if self.xzp_input is None else (ix, ixz)
            return
        self.w = self.keep(np.ascontiguousarray(w.reshape(g, cout // g, self.K)))
        # one value (symmetric weights: 0) when every channel has the same
        self.wzp_uniform = not np.ptp(wzp)
        self.wzp = self.keep(np.full((1, 1, 1), wzp[0], self.ct) if self.wzp_uniform else
                             wzp.astype(self.ct).reshape(g, cout // g, 1))
        wsum = (w.reshape(cout, -1).astype(np.float64) - wzp[:, None]).sum(axis=1)
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

    def requant_params(self):
        """(multiplier per output channel as float32, y zero point, lo, hi)
        of an 8-bit output; None for int32 accumulators."""
        return None

    def fixed_requant(self):
        """(multipliers, shifts) of TFLite's fixed-point requantization
        (:mod:`.requant_fixed`), or None: onnxruntime's float32 one."""
        return None

    def run(self, xs, ys, sc):
        if self.native is not None:
            z = None if self.xzp_input is None else xs[self.xzp_input].reshape(-1)[0]
            return self.native.run(self.x4(xs[0]), self.y4(ys[0]), sc, z)
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

    def native_calls_scratch(self, xs, ys, sc):
        """The native run as call records (a constant input zero point:
        the descriptor holds it), or None."""
        if self.native is None or self.xzp_input is not None or self._act is not None:
            return None
        parts = None if sc is None else _carve(sc, self.scratch)
        return self.native.calls(self.x4(xs[0]), self.y4(ys[0]), parts)

    def native_calls(self, xs, ys):
        if self.native is None or self.native.scratch:
            return None
        return self.native_calls_scratch(xs, ys, None)

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
    family = "quantized"
    shape_rule = rules.conv_integer
    fold = "expanding"
    layout = (0, 1, 2, 3, None)


@register
class QLinearConv(_QConv):
    """Quantized convolution: int32 bias added to the accumulators, then
    ``y = saturate(round(acc * x_scale * w_scale / y_scale) + y_zp)`` (the
    weight scale and zero point per tensor or per output channel)."""

    op_types = ("QLinearConv",)
    family = "quantized"
    shape_rule = rules.qlinear_conv
    qdq_form = "Conv"
    tflite_int8 = {"CONV_2D": "conv", "DEPTHWISE_CONV_2D": "conv"}
    layout = (0, 3, 2, 5, 8)
    integer = False

    def requant_params(self):
        xs = self.qparam(1, "x_scale").reshape(-1)
        ws = np.broadcast_to(self.qparam(4, "w_scale").reshape(-1), (self.cout,))
        ys = self.qparam(6, "y_scale").reshape(-1)
        if xs.size != 1 or ys.size != 1:
            self.fail("per-channel x or y scales are not supported")
        lo, hi = self.out_range()
        # in float32, in onnxruntime's order (qlinearconv.cc:
        # X_scale * W_scale[i] / Y_scale)
        f = np.float32
        return (f(xs[0]) * ws.astype(f) / f(ys[0]),
                float(self.qparam(7, "y_zero_point").reshape(-1)[0]), lo, hi)

    def fixed_requant(self):
        """TFLite files (the importer sets ``requant="tflite"``): their own
        fixed-point multipliers and shifts, per output channel."""
        if self.attrs.get("requant") != "tflite":
            return None
        got = self.__dict__.get("_fixed")
        if got is None:
            if self.attrs.get("layout") != "NHWC":
                self.fail("TFLite's requantization needs the NHWC layout")
            ws = self.qparam(4, "w_scale").reshape(-1)
            try:
                got = self._fixed = tflite_multipliers(
                    self.qparam(1, "x_scale").reshape(-1)[0], ws, self.qparam(6, "y_scale")
                    .reshape(-1)[0])
            except ValueError as exc:
                self.fail(str(exc))
        return got

    def finish_setup(self):
        mult, self.yzp, self.lo, self.hi = self.requant_params()
        self.mult = self.keep(mult.reshape(self.G, self.cout // self.G, 1))
        fixed = self.fixed_requant()
        if fixed is not None:       # (one per output channel, or one for all)
            self.fixed = [self.keep(np.broadcast_to(v, (self.cout,)).reshape(
                self.G, self.cout // self.G, 1).copy()) for v in fixed]

    def store(self, acc, y, c0, c1):
        if self.fixed_requant() is not None:
            m, s = (v[:, c0:c1] for v in self.fixed)
            requant_fixed(acc, m, s, self.yzp, self.lo, self.hi, y)
            return
        np.multiply(acc, self.mult[:, c0:c1], out=acc)
        requantize(acc, y, self.yzp, self.lo, self.hi)
