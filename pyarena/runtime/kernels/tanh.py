"""Tanh (ONNX; TFLite TANH): float32 as onnxruntime computes it.

onnxruntime's Tanh is MLAS's rational approximation (``MlasComputeTanh``),
not the correctly rounded tanh; the two differ by up to about 3e-7.  A
model that quantizes a Tanh's output dynamically (DynamicQuantizeLinear,
as onnxruntime's dynamic quantizer writes them: text2tashkeel's attention)
then moves a value by a whole 8-bit step where the bits differ.  Float32
runs the C core's ``pa_ort_tanh`` (those bits); other element types
NumPy's tanh.  Folded at import (a constant input) it is NumPy's.
"""
import numpy as np

from ..._native import ort_approx
from . import evaluators as ev
from . import shape_rules as rules
from .registry import Kernel, register

__all__ = ["Tanh"]


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
