"""Tanh and Sigmoid in float32 as onnxruntime computes them.

onnxruntime's Tanh and Sigmoid are MLAS's rational approximations
(``MlasComputeTanh``, ``MlasComputeLogistic``), not the correctly rounded
functions; they differ by up to about 3e-7.  A model that quantizes their
output dynamically (DynamicQuantizeLinear, as onnxruntime's dynamic
quantizer writes them: text2tashkeel's attention, ddddocr's CRNN, whose
float islands are exact products and sums otherwise) then moves a value
by a whole 8-bit step where the bits differ, and the outputs drift apart.
Float32 runs the C core's ``pa_ort_tanh`` / ``pa_ort_logistic`` (those
bits): the Tanh kernel here, and :func:`ort_logistic` for the Sigmoid
kernel (:mod:`.elementwise`) when it stands alone.  A Sigmoid fused into
a convolution's epilogue or a SiLU keeps the C core's own (exp-based)
logistic; other element types NumPy's; folded at import, NumPy's.
"""
import numpy as np

from ..._native import ort_approx
from . import evaluators as ev
from . import shape_rules as rules
from .registry import Kernel, register

__all__ = ["Tanh", "ort_logistic"]


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


def ort_logistic(kernel):
    """A standalone float32 Sigmoid's run ``f(xs, ys)`` on onnxruntime's
    logistic (NumPy's formula for views that are not one block)."""
    one = np.float32(1)

    def run(xs, ys):
        x, y = xs[0], ys[0]
        if x.flags.c_contiguous and y.flags.c_contiguous:
            ort_approx.logistic(x, y)
            return
        np.negative(x, out=y)
        np.exp(y, out=y)
        np.add(y, one, out=y)
        np.reciprocal(y, out=y)
    return run
