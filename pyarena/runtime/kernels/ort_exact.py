"""Tanh and Sigmoid in float32 as onnxruntime computes them.

onnxruntime's Tanh and Sigmoid are MLAS's rational approximations
(``MlasComputeTanh``, ``MlasComputeLogistic``), not the correctly rounded
functions; they differ by up to about 3e-7.  A model that quantizes their
output dynamically (DynamicQuantizeLinear, as onnxruntime's dynamic
quantizer writes them: text2tashkeel's attention, ddddocr's CRNN, whose
float islands are exact products and sums otherwise) then moves a value
by a whole 8-bit step where the bits differ, and the outputs drift apart.
Float32 runs the C core's ``pa_ort_tanh`` / ``pa_ort_logistic`` (those
bits): the Tanh and Sigmoid kernels here (Sigmoid standing alone; with
it Swish, on NumPy).  A Sigmoid fused into
a convolution's epilogue or a SiLU keeps the C core's own (exp-based)
logistic; other element types NumPy's; folded at import, NumPy's.
"""
import numpy as np

from ..._native import ort_approx
from . import evaluators as ev
from . import shape_rules as rules
from .native import unary
from .registry import Kernel, const, register

__all__ = ["Sigmoid", "Tanh", "ort_logistic"]


@register
class Tanh(Kernel):
    """y = tanh(x), in place safe."""

    op_types = ("Tanh",)
    family = "unary"
    inplace = "unary"
    shape_rule = rules.same
    evaluate = ev.ufunc(np.tanh)
    qdq = "lookup"          # 8-bit in QDQ models: a lookup table
    tflite = {"TANH": ("Tanh", {})}

    def setup(self):
        self.native = True if self.use_native and self.dtype == np.float32 else None

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if self.native and x.flags.c_contiguous and y.flags.c_contiguous:
            ort_approx.tanh(x, y)
            return
        np.tanh(x, out=y)


_ONE = np.float32(1)


def ort_logistic(xs, ys):
    """A standalone float32 Sigmoid's native run: onnxruntime's logistic
    (NumPy's formula for views that are not one block)."""
    x, y = xs[0], ys[0]
    if x.flags.c_contiguous and y.flags.c_contiguous:
        ort_approx.logistic(x, y)
        return
    np.negative(x, out=y)
    np.exp(y, out=y)
    np.add(y, _ONE, out=y)
    np.reciprocal(y, out=y)


@register
class Sigmoid(Kernel):
    """1 / (1 + exp(-x)); Swish (opset 24): x / (1 + exp(-alpha x)) (scratch)."""

    op_types = ('Sigmoid', 'Logistic', 'Swish')
    family = 'unary'
    inplace = 'unary'
    shape_rule = {'Sigmoid': rules.same, 'Swish': rules.same}
    conv_act = {'Sigmoid': 'SIGMOID'}
    tflite = {'LOGISTIC': ('Sigmoid', {})}

    def setup(self):
        self.one = const(1, self.dtype)
        self.swish = self.op.op_type == "Swish"
        self.native = None if self.swish else unary(self, "SIGMOID")
        if self.native is not None:     # onnxruntime's bits (its MLAS logistic)
            self.native = ort_logistic
        if self.swish:
            self.malpha = const(-float(self.attrs.get("alpha", 1.0)), self.dtype)
            self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        if self.native:
            self.native(xs, ys)
            return
        y = ys[0]
        if self.swish:
            d = np.multiply(xs[0], self.malpha, out=sc[0])
            with np.errstate(over="ignore"):
                np.exp(d, out=d)
            np.add(d, self.one, out=d)
            np.divide(xs[0], d, out=y)
            return
        np.negative(xs[0], out=y)
        np.exp(y, out=y)
        np.add(y, self.one, out=y)
        np.reciprocal(y, out=y)
