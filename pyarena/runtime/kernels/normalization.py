"""Normalisation and reduction kernels: BatchNormalization (folded into
a per-channel scale and shift), InstanceNormalization, LRN, the Reduce*
family and Softmax / LogSoftmax.

Scratch rules: InstanceNorm -- the two statistics and one centred copy;
LRN -- the channel-padded squares and the denominator; Softmax -- one
value per row (LogSoftmax: + one full-size buffer).
"""
import math

import numpy as np

from .registry import Kernel, const, register


@register
class BatchNorm(Kernel):
    """Inference BatchNorm folded at build time into y = x * scale + shift
    (per channel, axis 1); two in-place-safe ufunc passes."""

    op_types = ('BatchNormalization',)
    inplace = 'unary'

    def setup(self):
        self.runtime = (0,)
        if len([o for o in self.op.outputs if o]) > 1:
            self.fail("training-mode outputs (running mean/var) are not supported")
        g = self.const(1, "scale").astype(np.float64)
        b = self.const(2, "bias").astype(np.float64)
        m = self.const(3, "mean").astype(np.float64)
        v = self.const(4, "var").astype(np.float64)
        eps = float(self.attrs.get("epsilon", 1e-5))
        scale = g / np.sqrt(v + eps)
        shift = b - m * scale
        nd = len(self.shape(0))
        bshape = (-1,) + (1,) * (nd - 2)
        self.scale = self.keep(scale.astype(self.dtype).reshape(bshape))
        self.shift = self.keep(shift.astype(self.dtype).reshape(bshape))

    def run(self, xs, ys, sc):
        y = ys[0]
        np.multiply(xs[0], self.scale, out=y)
        np.add(y, self.shift, out=y)

@register
class InstanceNorm(Kernel):
    """Per (image, channel) mean/variance over the spatial axes; scratch:
    the two statistics and one centred copy."""

    op_types = ('InstanceNormalization',)
    inplace = 'none'

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        n, c = xs[:2]
        self.view = (n, c, math.prod(xs[2:]))
        self.eps = const(float(self.attrs.get("epsilon", 1e-5)), self.dtype)
        self.inv = const(1.0 / max(self.view[2], 1), self.dtype)
        self.g = self.keep(self.const(1, "scale").astype(self.dtype).reshape(1, c, 1))
        self.b = self.keep(self.const(2, "bias").astype(self.dtype).reshape(1, c, 1))
        self.scratch = [((n, c, 1), self.dtype), ((n, c, 1), self.dtype),
                        (self.view, self.dtype)]

    def run(self, xs, ys, sc):
        m, v, d = sc
        x = xs[0].reshape(self.view)
        y = ys[0].reshape(self.view)
        np.add.reduce(x, axis=2, out=m, keepdims=True)
        np.multiply(m, self.inv, out=m)
        np.subtract(x, m, out=d)
        np.multiply(d, d, out=y)
        np.add.reduce(y, axis=2, out=v, keepdims=True)
        np.multiply(v, self.inv, out=v)
        np.add(v, self.eps, out=v)
        np.sqrt(v, out=v)
        np.divide(d, v, out=y)
        np.multiply(y, self.g, out=y)
        np.add(y, self.b, out=y)

@register
class Reduce(Kernel):
    op_types = ('ReduceMean', 'ReduceSum', 'ReduceMax', 'ReduceMin')
    inplace = 'none'
    tflite = {
        'MEAN': ('ReduceMean', {}),
        'SUM': ('ReduceSum', {}),
        'REDUCE_MAX': ('ReduceMax', {})}

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        axes = self.attrs.get("axes")
        if self.has(1):
            axes = self.const(1, "axes")
        if axes is None or len(np.atleast_1d(axes)) == 0:
            if int(self.attrs.get("noop_with_empty_axes", 0)):
                axes = []
            else:
                axes = range(len(xs))
        axes = tuple(sorted(int(a) + len(xs) if int(a) < 0 else int(a)
                            for a in np.atleast_1d(axes)))
        self.axes = axes
        self.kshape = tuple(1 if i in axes else d for i, d in enumerate(xs))
        t = self.op.op_type
        self.f = {"ReduceMax": np.maximum, "ReduceMin": np.minimum}.get(t, np.add)
        cnt = math.prod(xs[a] for a in axes) if axes else 1
        self.inv = const(1.0 / max(cnt, 1), self.dtype) if t == "ReduceMean" \
            else None

    def run(self, xs, ys, sc):
        y = ys[0].reshape(self.kshape)
        if not self.axes:
            np.copyto(y, xs[0])
        else:
            self.f.reduce(xs[0], axis=self.axes, out=y, keepdims=True)
        if self.inv is not None:
            np.multiply(y, self.inv, out=y)


@register
class Softmax(Kernel):
    """Softmax over one axis (ONNX opset >= 13, TFLite) or over the
    flattened trailing axes (ONNX opset < 13: attribute ``coerce_2d``).
    Scratch: one reduced row statistic per row."""

    op_types = ('Softmax', 'LogSoftmax')
    inplace = 'none'
    tflite = {'SOFTMAX': ('Softmax', {})}

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        nd = len(xs)
        ax = int(self.attrs.get("axis", -1))
        ax = ax + nd if ax < 0 else ax
        if int(self.attrs.get("coerce_2d", 0)):
            self.view = (math.prod(xs[:ax]), math.prod(xs[ax:]))
            self.axis = 1
        else:
            self.view = xs
            self.axis = ax
        red = tuple(1 if i == self.axis else d for i, d in enumerate(self.view))
        self.scratch = [(red, self.dtype)]
        beta = float(self.attrs.get("beta", 1.0))
        self.beta = None if beta == 1.0 else const(beta, self.dtype)
        self.log = self.op.op_type == "LogSoftmax"
        if self.log:
            self.scratch.append((self.view, self.dtype))

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.view)
        y = ys[0].reshape(self.view)
        m = sc[0]
        np.maximum.reduce(x, axis=self.axis, out=m, keepdims=True)
        np.subtract(x, m, out=y)
        if self.beta is not None:
            np.multiply(y, self.beta, out=y)
        if self.log:
            e = sc[1]
            np.exp(y, out=e)
            np.add.reduce(e, axis=self.axis, out=m, keepdims=True)
            np.log(m, out=m)
            np.subtract(y, m, out=y)
        else:
            np.exp(y, out=y)
            np.add.reduce(y, axis=self.axis, out=m, keepdims=True)
            np.divide(y, m, out=y)

@register
class LRN(Kernel):
    """Local response normalisation across channels (NCHW).  Scratch: the
    channel-padded squares and the denominator."""

    op_types = ('LRN',)
    inplace = 'none'

    def setup(self):
        xs = self.shape(0)
        self.size = int(self.attrs["size"])
        self.alpha = float(self.attrs.get("alpha", 1e-4))
        self.beta = const(float(self.attrs.get("beta", 0.75)), self.dtype)
        self.bias = const(float(self.attrs.get("bias", 1.0)), self.dtype)
        self.scale = const(self.alpha / self.size, self.dtype)
        self.lo = (self.size - 1) // 2
        self.hi = self.size - 1 - self.lo
        N, C = xs[:2]
        rest = xs[2:]
        self.C = C
        self.scratch = [((N, C + self.size - 1) + rest, self.dtype), (xs, self.dtype)]

    def run(self, xs, ys, sc):
        p, s = sc
        x = xs[0]
        lo, C = self.lo, self.C
        if lo:
            p[:, :lo].fill(0)
        if self.hi:
            p[:, lo + C:].fill(0)
        np.square(x, out=p[:, lo:lo + C])
        np.copyto(s, p[:, 0:C])
        for i in range(1, self.size):
            np.add(s, p[:, i:i + C], out=s)
        np.multiply(s, self.scale, out=s)
        np.add(s, self.bias, out=s)
        np.power(s, self.beta, out=s)
        np.divide(x, s, out=ys[0])
