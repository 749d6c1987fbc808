"""Quantize and dequantize: ``QuantizeLinear``, ``DequantizeLinear`` (per
tensor or per axis, 8, 16 or 32-bit integers) and ``DynamicQuantizeLinear``
(uint8 with the scale and zero point computed from the data), with ONNX's
semantics (see :mod:`.quantization`).  Per-tensor float32 <-> 8-bit
quantization runs natively (``pa_quantize_linear``, ``pa_dequantize_linear``:
NumPy's float32 steps, the same bits)."""
import math

import numpy as np

from ..._native import qelementwise as qnative
from ..._native.kernels import fptr
from ..._native.qdynamic import dynamic_quantize
from . import shape_rules as rules
from .quantization import QuantKernel, axis_vector, dequantize, requantize
from .registry import register


def _dequantize_value(n):
    """A constant's dequantization, folded at import (blocked: left to the
    ONNX reference evaluator)."""
    if n.a.get("block_size"):
        return NotImplemented
    x = [n.v(i) for i in range(len(n.ins))]
    return [dequantize(x[0], x[1], x[2] if len(x) > 2 else None,
                       n.a.get("axis", 1)).astype(np.asarray(x[1]).dtype)]


def _native_8bit(k, q_dtype, f_dtype):
    """Whether Quantize / DequantizeLinear ``k`` runs natively: per tensor,
    float32 on one side and an 8-bit type on the other."""
    return k.use_native and k.scale.ndim == 0 and k.zp.ndim == 0 and \
        np.dtype(q_dtype) in qnative.QTYPES and np.dtype(f_dtype) == np.float32


def _scale_zero_point(k, name, dtype):
    """Quantize / DequantizeLinear's common setup: ``k.scale`` and ``k.zp``
    (inputs 1 and 2, ``name_scale`` / ``name_zero_point``) shaped along
    ``axis``; returns the axis.  Blocked quantization is refused."""
    k.shrink_budget()
    k.runtime = (0,)
    if int(k.attrs.get("block_size", 0) or 0):
        k.fail("blocked quantization (block_size) is not supported")
    nd = max(1, len(k.shape(0)))
    axis = int(k.attrs.get("axis", 1))
    axis = axis + nd if axis < 0 else axis
    k.scale = k.keep(axis_vector(k.qparam(1, f"{name}_scale").astype(dtype), nd, axis))
    k.zp = k.keep(axis_vector(k.qparam(2, f"{name}_zero_point").astype(dtype), nd, axis))
    return axis


@register
class QuantizeLinear(QuantKernel):
    """``y = saturate(round(x / y_scale) + y_zero_point)``, per tensor or
    per ``axis``; y's type is the zero point's (uint8 when omitted)."""

    op_types = ("QuantizeLinear",)
    family = "quantized"
    shape_rule = rules.quantize
    tflite_int8 = {"QUANTIZE": "quantize"}     # (int8 -> int8: a QLinearLookup table)

    def setup(self):
        self.integer_types(self.outs[0])
        axis = _scale_zero_point(self, "y", np.float32)
        xs = self.shape(0)
        self.lo, self.hi = self.out_range()
        self.per_axis_rows = axis == 0 and self.scale.ndim > 0
        shape = xs if xs else (1,)
        self.native = _native_8bit(self, self.outs[0].dtype, self.ins[0].dtype) or None
        if self.native:
            self.n = math.prod(xs)
            self.scratch = []
            self.params = qnative.qaffine(self.outs[0].dtype, self.scale, self.zp, self.lo,
                                          self.hi)
            return
        self.rows = self.rows_per_chunk(shape, 4)
        self.scratch = [((self.rows,) + tuple(shape[1:]), np.float32)]

    def native_call(self, xs, ys):
        """The native run as one call record, or None."""
        if not self.native or self._act is not None:
            return None
        return ("quantize", self.params, None, xs[0], None, ys[0], (self.n,))

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if self.native:
            qnative.quantize_linear(y.dtype, fptr(x), qnative.bptr(y), self.n, float(self.scale),
                                    int(self.zp), self.lo, self.hi)
            return
        if x.ndim == 0:
            x, y = x.reshape(1), y.reshape(1)
        for r0 in range(0, x.shape[0], self.rows):
            r1 = min(r0 + self.rows, x.shape[0])
            acc = sc[0][:r1 - r0]
            scale = self.scale[r0:r1] if self.per_axis_rows else self.scale
            zp = self.zp[r0:r1] if self.per_axis_rows and self.zp.ndim else self.zp
            np.divide(x[r0:r1], scale, out=acc)
            requantize(acc, y[r0:r1], zp, self.lo, self.hi)


@register
class DequantizeLinear(QuantKernel):
    """``y = (x - x_zero_point) * x_scale``, per tensor or per ``axis``."""

    op_types = ("DequantizeLinear",)
    family = "quantized"
    shape_rule = rules.dequantize
    tflite_int8 = {"DEQUANTIZE": "dequantize"}
    evaluate = _dequantize_value

    def setup(self):
        self.integer_types(self.ins[0])
        _scale_zero_point(self, "x", self.dtype)
        self.native = _native_8bit(self, self.ins[0].dtype, self.dtype) or None
        self.n = math.prod(self.shape(0))
        if self.native:
            self.params = qnative.qaffine(self.ins[0].dtype, self.scale, self.zp)

    def native_call(self, xs, ys):
        """The native run as one call record, or None."""
        if not self.native or self._act is not None:
            return None
        return ("dequantize", self.params, None, xs[0], None, ys[0], (self.n,))

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if self.native:
            qnative.dequantize_linear(x.dtype, qnative.bptr(x), fptr(y), self.n,
                                      float(self.scale), int(self.zp))
            return
        np.subtract(x, self.zp, out=y)
        np.multiply(y, self.scale, out=y)


@register
class DynamicQuantizeLinear(QuantKernel):
    """uint8 quantization with the scale and zero point computed from the
    data: the range [min(0, min x), max(0, max x)] onto 0..255."""

    op_types = ("DynamicQuantizeLinear",)
    family = "quantized"
    shape_rule = rules.dynamic_quantize

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        shape = self.shape(0) or (1,)
        # the C core's two passes (no scratch) for float32 data
        self.native = True if self.use_native and \
            np.dtype(self.ins[0].dtype) == np.float32 else None
        if self.native:
            self.params = (np.empty(1, np.float32), np.empty(1, np.uint8))
            return
        self.rows = self.rows_per_chunk(shape, 4)
        self.scratch = [((self.rows,) + tuple(shape[1:]), np.float32)]

    def run(self, xs, ys, sc):
        if self.native:
            s, z = self.params
            dynamic_quantize(xs[0], ys[0], s, z)
            if len(ys) > 1:
                ys[1][...] = s[0]
            if len(ys) > 2:
                ys[2][...] = z[0]
            return
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
            requantize(acc, y[r0:r1], zp, 0, 255)
        if len(ys) > 1:
            ys[1][...] = scale
        if len(ys) > 2:
            ys[2][...] = zp
