"""onnxruntime's ``com.microsoft`` QOperator ops (``QLinearAdd``, ``Mul``,
``Sigmoid``, ``LeakyRelu``, ``GlobalAveragePool``, ``AveragePool``,
``Concat``, ``Softmax``) and pyarena's own ``QLinearLookup`` (an
element-wise function of an 8-bit tensor as a 256-entry table): float
arithmetic on chunks of the dequantized operands, requantized."""
import math
from types import SimpleNamespace

import numpy as np

from ...graph import Op
from . import shape_rules_quantized as qrules
from .quantization import QuantKernel, requantize
from .registry import KERNELS, register


# -- com.microsoft: the QOperator ops onnxruntime's quantizer emits ------------
class _QElementwise(QuantKernel):
    """Element-wise quantized ops on float scratch: each operand
    dequantized, the float op, the result requantized into y.  When every
    operand has the output's shape the work goes in flat chunks (scratch
    within the budget); a broadcast operand makes it one piece of the
    output's size.  Constant operands are dequantized once, at build."""

    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_unary
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
        self.chunk = self.step_items(8, self.total) if flat else \
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
            requantize(a, y[c0:c1], self.y_zp, self.lo, self.hi)


@register
class QLinearAdd(_QElementwise):
    """com.microsoft QLinearAdd: ``C = quantize(dequant(A) + dequant(B))``."""

    op_types = ("QLinearAdd",)
    shape_rule = qrules.qlinear_binary
    qdq_form = "Add"
    tflite_int8 = {"ADD": "add_mul"}
    operands = ((0, 1, 2), (3, 4, 5))
    output = (6, 7)

    def compute(self, a, b):
        np.add(a, b, out=a)


@register
class QLinearMul(_QElementwise):
    """com.microsoft QLinearMul: ``C = quantize(dequant(A) * dequant(B))``."""

    op_types = ("QLinearMul",)
    shape_rule = qrules.qlinear_binary
    qdq_form = "Mul"
    tflite_int8 = {"MUL": "add_mul"}
    operands = ((0, 1, 2), (3, 4, 5))
    output = (6, 7)

    def compute(self, a, b):
        np.multiply(a, b, out=a)


@register
class QLinearSigmoid(_QElementwise):
    """com.microsoft QLinearSigmoid."""

    op_types = ("QLinearSigmoid",)
    qdq_form = "Sigmoid"
    tflite_int8 = {"LOGISTIC": "activation"}
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
    qdq_form = "LeakyRelu"
    operands = ((0, 1, 2),)
    output = (3, 4)

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
    # also TFLite's int8 RELU / RELU6 / RELU_N1_TO_1: a clamped requantization
    tflite_int8 = {"CONCATENATION": "concat", "RELU": "clamp", "RELU6": "clamp",
                   "RELU_N1_TO_1": "clamp"}

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
            requantize(f, y[tuple(index)], self.y_zp, self.lo, self.hi)


@register
class QLinearSoftmax(QuantKernel):
    """com.microsoft QLinearSoftmax: the softmax of the dequantized input,
    requantized; ``opset`` < 13 semantics flatten from ``axis`` on (2-D
    coercion), 13 and later take the one ``axis``.  Rows of the softmax
    go through float scratch a chunk at a time."""

    op_types = ("QLinearSoftmax",)
    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_unary
    qdq_form = "Softmax"
    tflite_int8 = {"SOFTMAX": "softmax"}

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
        self.rows = self.step_items(4 * self.inner, self.outer, self.inner)
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
            requantize(f, y[r0:r1], self.y_zp, self.lo, self.hi)


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

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        table = self.const(1, "table").reshape(-1)
        if table.size != 256 or np.dtype(self.ins[0].dtype).itemsize != 1:
            self.fail("needs an 8-bit input and a table of 256 entries")
        self.table = self.keep(np.ascontiguousarray(table.astype(self.outs[0].dtype)))
        total = math.prod(self.shape(0))
        self.chunk = self.step_items(8, total)
        self.scratch = [((self.chunk,), np.intp)]

    def run(self, xs, ys, sc):
        x, y = xs[0].reshape(-1).view(np.uint8), ys[0].reshape(-1)
        for c0 in range(0, x.size, self.chunk):
            c1 = min(c0 + self.chunk, x.size)
            idx = sc[0][:c1 - c0]
            np.copyto(idx, x[c0:c1])
            np.take(self.table, idx, out=y[c0:c1])


@register
class QLinearAveragePool(QuantKernel):
    """com.microsoft QLinearAveragePool: the float AveragePool kernel on the
    dequantized input, requantized (``channels_last`` for NHWC).  Its
    float copies of the input and output are scratch: 4x the int8 tensors
    while it runs."""

    op_types = ("QLinearAveragePool",)
    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_average_pool
    tflite_int8 = {"AVERAGE_POOL_2D": "average_pool"}

    def setup(self):
        self.runtime = (0,)
        attrs = {k: v for k, v in self.attrs.items() if k != "channels_last"}
        if int(self.attrs.get("channels_last", 0)):
            attrs["layout"] = "NHWC"
        fx = SimpleNamespace(name=self.ins[0].name, shape=self.shape(0), dtype=np.float32,
                             data=None)
        fy = SimpleNamespace(name=self.outs[0].name, shape=self.oshape(), dtype=np.float32,
                             data=None)
        op = Op(self.op.name, "AveragePool", [fx.name], [fy.name], attrs=attrs,
                notes=self.op.notes.copy())
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
        requantize(fy, ys[0], self.y_zp, self.lo, self.hi)
