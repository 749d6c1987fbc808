"""The normalisations over the last axis that run natively in float32
(kernels/rows.c): Softmax / LogSoftmax here, and the row call
LayerNormalization (normalization.py) and SkipLayerNormalization
(contrib_norms.py) share, :func:`layer_norm_rows`.  Other dtypes, axes
and options take NumPy."""
import math

import numpy as np

from ..._native import check, lib
from ..._native.kernels import NULL, fptr
from .native import NATIVE_DTYPE
from . import shape_rules as rules
from . import tflite_attrs as tfl
from .registry import Kernel, const, register

__all__ = ["Softmax", "layer_norm_rows"]


def layer_norm_rows(x, g, b, y, eps, workers, what):
    """y = LayerNorm(x) * g + b over the last axis of contiguous float32
    2-D ``x`` and ``y`` (``b`` may be None): ``pa_layer_norm_rows``."""
    check(lib.pa_layer_norm_rows(fptr(x), fptr(g), NULL if b is None else fptr(b), fptr(y),
                                 x.shape[0], x.shape[1], float(eps), workers), what)


def _softmax_numpy(x):
    e = np.exp(x - np.max(x, axis=-1, keepdims=True))
    return e / np.sum(e, axis=-1, keepdims=True)


@register
class Softmax(Kernel):
    """Softmax over one axis (ONNX opset >= 13, TFLite) or over the
    flattened trailing axes (ONNX opset < 13: attribute ``coerce_2d``).
    Float32 Softmax over the last axis (beta 1) runs ``pa_softmax_rows``
    without scratch; otherwise NumPy, scratch: one reduced row statistic
    per row (LogSoftmax: + one full-size buffer)."""

    op_types = ('Softmax', 'LogSoftmax')
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same
    tflite = {'SOFTMAX': ('Softmax', {}, tfl.softmax)}

    on_rows = False       # the native kernel runs (setup decides)

    @property
    def path(self):
        return "native" if self.on_rows else "numpy"

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
        if self.use_native and self.dtype == NATIVE_DTYPE and not self.log and \
                self.beta is None and self.axis == len(self.view) - 1 and self.view[-1] > 0:
            self.on_rows, self.scratch = True, []
            self.rows = math.prod(self.view[:-1])

    def run(self, xs, ys, sc):
        if self.on_rows and xs[0].flags.c_contiguous and ys[0].flags.c_contiguous:
            check(lib.pa_softmax_rows(fptr(xs[0]), fptr(ys[0]), self.rows, self.view[-1],
                                      self.workers), f"Softmax {self.op.name!r}")
            return
        if self.on_rows:    # (a view the planner did not lay out: NumPy, no scratch)
            ys[0][...] = _softmax_numpy(xs[0].reshape(self.view))
            return
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
