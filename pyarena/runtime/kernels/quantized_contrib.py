"""onnxruntime's ``com.microsoft`` QOperator ops (``QLinearAdd``, ``Mul``,
``Sigmoid``, ``LeakyRelu``, ``GlobalAveragePool``, ``Concat``; ``Softmax``
and ``AveragePool``: quantized_pool.py) and pyarena's own ``QLinearLookup`` (an
element-wise function of an 8-bit tensor as a 256-entry table): float
arithmetic on chunks of the dequantized operands, requantized.  Functions
of one 8-bit value (Sigmoid, LeakyRelu, a Concat input's requantization)
run as 256-entry tables worked out with those float steps, looked up
natively (``pa_qlookup``) or with NumPy; the global average pool runs
natively with NumPy's steps (``pa_qglobal_avgpool``)."""
import math

import numpy as np

from ..._native import qelementwise as qnative
from . import shape_rules_quantized as qrules
from .quantization import QuantKernel, requantize
from .registry import register


# -- com.microsoft: the QOperator ops onnxruntime's quantizer emits ------------
# (QLinearAdd / QLinearMul: quantized_binary.py)
def table_lookup(kernel, table, x, y, blocks=None):
    """y = table[x's byte] for 8-bit x and y (C-contiguous, one size), or
    ``blocks`` = (count, length, x stride, y stride) in bytes: natively
    (``pa_qlookup``) unless ``kernel.use_native`` is off, else with NumPy
    through the kernel's intp scratch ``kernel.idx``."""
    if blocks is None:
        blocks = (1, x.size, 0, 0)
    if kernel.use_native:
        qnative.lookup(qnative.bptr(table), qnative.bptr(x), qnative.bptr(y), *blocks)
        return
    xf, yf = x.reshape(-1).view(np.uint8), y.reshape(-1)
    count, length, xs, ys = blocks
    for k in range(count):
        xr, yr = xf[k * xs:k * xs + length], yf[k * ys:k * ys + length]
        for c0 in range(0, length, kernel.chunk):
            c1 = min(c0 + kernel.chunk, length)
            idx = kernel.idx[:c1 - c0]
            np.copyto(idx, xr[c0:c1])
            np.take(table, idx, out=yr[c0:c1])


def lookup_scratch(kernel, total):
    """The NumPy lookup's intp scratch (none on the native path):
    ``kernel.chunk`` indices at a time."""
    kernel.native = kernel.use_native or None
    if kernel.native:
        return []
    kernel.chunk = kernel.step_items(8, total)
    return [((kernel.chunk,), np.intp)]


def requant_table(kernel, x_dtype, fn, x_scale, x_zp, y_scale, y_zp, out_dtype):
    """The 256 results of an element-wise op of one 8-bit input, with the
    float steps of the per-element path: ``(x - x_zp) * x_scale``, ``fn``
    (in place, float32), ``* (1 / y_scale)``, requantized; indexed by the
    input's byte."""
    q = np.arange(256, dtype=np.uint8).view(x_dtype)
    a = (q.astype(np.float32) - np.float32(x_zp)) * np.float32(x_scale)
    with np.errstate(over="ignore"):        # exp(-x) of a large x: inf, sigmoid 0
        fn(a, np.empty_like(a))
    np.multiply(a, np.float32(1.0 / float(y_scale)), out=a)
    table = np.empty(256, out_dtype)
    lo, hi = kernel.out_range()
    requantize(a, table, float(y_zp), lo, hi)
    return table


class _QTable(QuantKernel):
    """An element-wise function of one 8-bit input (QLinearSigmoid,
    QLinearLeakyRelu) run as a 256-entry table: the table is worked out at
    build with the float steps of :meth:`compute` on the 256 possible
    inputs, so it gives the per-element path's results by construction."""

    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_unary

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        xt, yt = np.dtype(self.ins[0].dtype), np.dtype(self.outs[0].dtype)
        if xt not in (np.dtype(np.uint8), np.dtype(np.int8)) or yt.itemsize != 1:
            self.fail(f"needs 8-bit input and output, not {xt.name} -> {yt.name}")
        table = requant_table(self, xt, self.compute, self.qparam(1, "x_scale").reshape(-1)[0],
                              self.qparam(2, "x_zero_point").reshape(-1)[0],
                              self.qparam(3, "y_scale").reshape(-1)[0],
                              self.qparam(4, "y_zero_point").reshape(-1)[0], yt)
        self.table = self.keep(table.view(np.uint8))
        self.scratch = lookup_scratch(self, math.prod(self.shape(0)))

    def native_call(self, xs, ys):
        """The native lookup as one call record, or None."""
        if not self.native or self._act is not None:
            return None
        return ("qlookup", None, self.table, xs[0], None, ys[0], (1, xs[0].size, 0, 0))

    def run(self, xs, ys, sc):
        self.idx = sc[0] if sc else None
        table_lookup(self, self.table, xs[0], ys[0].view(np.uint8))


@register
class QLinearSigmoid(_QTable):
    """com.microsoft QLinearSigmoid."""

    op_types = ("QLinearSigmoid",)
    qdq_form = "Sigmoid"
    tflite_int8 = {"LOGISTIC": "activation"}

    def compute(self, a, b):
        np.negative(a, out=a)
        np.exp(a, out=a)
        np.add(a, np.float32(1), out=a)
        np.reciprocal(a, out=a)


@register
class QLinearLeakyRelu(_QTable):
    """com.microsoft QLinearLeakyRelu (``alpha``, default 0.01)."""

    op_types = ("QLinearLeakyRelu",)
    qdq_form = "LeakyRelu"

    def compute(self, a, b):
        alpha = np.float32(self.attrs.get("alpha", 0.01))
        np.multiply(a, alpha, out=b)
        (np.maximum if alpha <= 1 else np.minimum)(a, b, out=a)


@register
class QLinearGlobalAveragePool(QuantKernel):
    """com.microsoft QLinearGlobalAveragePool: the mean over the spatial
    axes, requantized (``channels_last`` for NHWC)."""

    op_types = ("QLinearGlobalAveragePool",)
    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_global_average_pool
    qdq_form = "GlobalAveragePool"
    tflite_int8 = {"MEAN": "mean"}

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
        self.spatial = math.prod(xs) // max(1, self.N * self.C)
        dt = np.dtype(self.ins[0].dtype)
        # native where NumPy's float32 sums are exact (pa_qglobal_avgpool)
        self.native = self.use_native and dt in qnative.QTYPES and \
            np.dtype(self.outs[0].dtype) == dt and 1 <= self.spatial < (1 << 16) or None
        self.scratch = [] if self.native else [((self.C,), np.float32)]

    def run(self, xs, ys, sc):
        if self.native:
            qnative.global_avgpool(
                self.ins[0].dtype, self.last, self.N, self.C, self.spatial,
                qnative.bptr(xs[0]), qnative.bptr(ys[0]), np.float32(self.x_zp),
                np.float32(self.x_scale / self.y_scale), np.float32(self.y_zp), self.lo, self.hi)
            return
        acc = sc[0]
        for n in range(self.N):
            x = xs[0][n]
            if self.last:
                np.mean(x.reshape(-1, self.C), axis=0, dtype=np.float32, out=acc)
            else:
                np.mean(x.reshape(self.C, -1), axis=1, dtype=np.float32, out=acc)
            np.subtract(acc, np.float32(self.x_zp), out=acc)
            np.multiply(acc, np.float32(self.x_scale / self.y_scale), out=acc)
            requantize(acc, ys[0][n].reshape(-1), self.y_zp, self.lo, self.hi)


@register
class QLinearConcat(QuantKernel):
    """com.microsoft QLinearConcat(Y_scale, Y_zero_point, (X, X_scale,
    X_zero_point)...): each input requantized into its slice of y."""

    op_types = ("QLinearConcat",)
    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_concat
    qdq_form = "Concat"
    tflite_int8 = {"CONCATENATION": "concat"}

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
        self.native = self.native_tables(out) or None
        biggest = max(math.prod(self.shape(p[0])) for p in self.parts)
        self.scratch = [] if self.native else [((biggest,), np.float32)]

    def native_tables(self, out):
        """Each 8-bit input's requantization as a 256-entry table with the
        float steps of :meth:`run` and its (blocks, length, x stride, y
        stride) in y, for ``pa_qlookup``; None when the op stays on NumPy."""
        yt = np.dtype(self.outs[0].dtype)
        if not self.use_native or yt not in qnative.QTYPES or \
                any(np.dtype(self.ins[p[0]].dtype) not in qnative.QTYPES for p in self.parts):
            return None
        inner = math.prod(out[self.axis + 1:])
        blocks = math.prod(out[:self.axis])
        tables = []
        for i, z, m, off, width in self.parts:
            q = np.arange(256, dtype=np.uint8).view(self.ins[i].dtype)
            f = np.subtract(q, z, dtype=np.float32)
            np.multiply(f, m, out=f)
            table = np.empty(256, yt)
            requantize(f, table, self.y_zp, self.lo, self.hi)
            tables.append((i, self.keep(table.view(np.uint8)), off * inner,
                           (blocks, width * inner, width * inner, out[self.axis] * inner)))
        return tables

    def native_calls(self, xs, ys):
        """Each input's table lookup into its slice as a call record (the
        calls :meth:`run` makes), or None off the native path."""
        if not self.native or self._act is not None or any(
                not isinstance(a, np.ndarray) for a in [ys[0]] + [xs[p[0]] for p in self.native]):
            return None
        yb = ys[0].reshape(-1).view(np.uint8)
        return [("qlookup", None, table, xs[i], None, yb[start:], blocks)
                for i, table, start, blocks in self.native]

    def run(self, xs, ys, sc):
        y = ys[0]
        if self.native:
            yb = y.reshape(-1).view(np.uint8)
            for i, table, start, blocks in self.native:
                qnative.lookup(qnative.bptr(table), qnative.bptr(xs[i]),
                               qnative.bptr(yb[start:]), *blocks)
            return
        for i, z, m, off, width in self.parts:
            x = xs[i]
            f = sc[0][:x.size].reshape(x.shape)
            np.subtract(x, z, out=f)
            np.multiply(f, m, out=f)
            index = [slice(None)] * y.ndim
            index[self.axis] = slice(off, off + width)
            requantize(f, y[tuple(index)], self.y_zp, self.lo, self.hi)


@register
class QLinearLookup(QuantKernel):
    """ai.pyarena QLinearLookup(x, table): ``y = table[x's byte]`` -- an
    element-wise function of an 8-bit tensor, its 256 quantized results
    worked out at import (:mod:`pyarena.importers.onnx_qdq`).  Indices go
    through a bounded intp scratch chunk (NumPy's take would allocate it)."""

    op_types = ("QLinearLookup",)
    onnx_domain = "ai.pyarena"
    family = "quantized"
    shape_rule = qrules.qlinear_lookup
    # also TFLite's int8 RELU / RELU6 / RELU_N1_TO_1: a clamped requantization
    # in TFLite's fixed-point arithmetic, tabled (importers/tflite_quant.py)
    tflite_int8 = {"RELU": "clamp", "RELU6": "clamp", "RELU_N1_TO_1": "clamp"}

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        table = self.const(1, "table")
        shape = self.shape(0)
        # one table, or one per channel (axis 1): a per-channel function
        self.channels = table.shape[0] if table.ndim == 2 else 0
        if table.size != 256 * max(self.channels, 1) or table.shape[-1] != 256 or \
                np.dtype(self.ins[0].dtype).itemsize != 1 or \
                self.channels and (len(shape) < 2 or shape[1] != self.channels):
            self.fail("needs an 8-bit input and a table of 256 entries (per channel: "
                      "(C, 256) for an input of C channels on axis 1)")
        self.table = self.keep(np.ascontiguousarray(table.astype(self.outs[0].dtype)))
        total = math.prod(shape)
        self.native = self.use_native and np.dtype(self.outs[0].dtype).itemsize == 1 or None
        self.chunk = self.step_items(8, total)
        self.scratch = [] if self.native else [((self.chunk,), np.intp)]

    def native_call(self, xs, ys):
        """The native run as one call record, or None."""
        if not self.native or self._act is not None or self.channels:
            return None
        return ("qlookup", None, self.table, xs[0], None, ys[0], (1, xs[0].size, 0, 0))

    def run(self, xs, ys, sc):
        if self.channels:
            self.run_channels(xs[0], ys[0], sc)
            return
        if self.native:
            qnative.lookup(qnative.bptr(self.table), qnative.bptr(xs[0]),
                           qnative.bptr(ys[0]), 1, xs[0].size, 0, 0)
            return
        x, y = xs[0].reshape(-1).view(np.uint8), ys[0].reshape(-1)
        for c0 in range(0, x.size, self.chunk):
            c1 = min(c0 + self.chunk, x.size)
            idx = sc[0][:c1 - c0]
            np.copyto(idx, x[c0:c1])
            np.take(self.table, idx, out=y[c0:c1])

    def run_channels(self, x, y, sc):
        """Block (n, c) of the NCHW input through channel c's table."""
        c, plane = self.channels, math.prod(self.shape(0)[2:])
        blocks = x.size // max(plane, 1)
        if self.native:
            qnative.lookup_channels(qnative.bptr(self.table), c, qnative.bptr(x),
                                    qnative.bptr(y), blocks, plane)
            return
        xb, yb = x.reshape(blocks, plane).view(np.uint8), y.reshape(blocks, plane)
        for k in range(blocks):
            for c0 in range(0, plane, self.chunk):
                c1 = min(c0 + self.chunk, plane)
                idx = sc[0][:c1 - c0]
                np.copyto(idx, xb[k, c0:c1])
                np.take(self.table[k % c], idx, out=yb[k, c0:c1])
