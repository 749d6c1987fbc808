"""com.microsoft ``QLinearAdd`` and ``QLinearMul`` with onnxruntime's
arithmetic, so the results are its bits (not only within a quantum).

onnxruntime does not dequantize, add and requantize as ONNX describes it;
its MLAS kernels fold the scales into ratios (csrc/kernels/qelementwise.c
gives the formulas and the onnxruntime sources they come from):

* Add: ``rA = sa / sy``, ``rB = sb / sy``; per element two fused
  multiply-adds, ``y = cvt(fma(v, rV, fma(s, rS, F)))`` with
  ``F = zy - fma(rV, zV, rS * zS)``.  ``v`` is a, ``s`` is b, except where
  a is onnxruntime's "scalar" operand (one value along the innermost run
  of the broadcast: :func:`loops`), then v is b and s is a.
* Mul: ``y = cvt(float((a - za) * (b - zb)) * ((sa * sb) / sy) + zy)``.

``cvt`` rounds half to even and turns what an int32 cannot hold (>= 2^31)
into the type's lowest value, then saturates.  The NumPy path emulates each
float32 fused multiply-add in float64: the product of an 8-bit integer
and a float32 is exact there, and so is its sum with a float32 while the
two lie within 2^29 of each other's last bits -- true of any scale ratio in
[2^-20, 2^8] with 8-bit zero points -- so rounding that sum to float32 is
the fused result.  The native path (``pa_qbinary``) calls ``fmaf``.
TFLite's MUL (``requant="tflite"``) is integer arithmetic only: the exact
product requantized by a Q31 multiplier and a shift (TFLITE_MUL, NumPy:
:func:`requant_fixed`).  Native where the broadcast is at most three loops
(outer x middle x inner), both operands and y one 8-bit type and the
scales finite and positive; NumPy otherwise, in chunks along the first
axis of more than one element.
"""
import math

import numpy as np

from ..._native import qelementwise as qnative
from . import shape_rules_quantized as qrules
from .quantization import QuantKernel
from .registry import register
from .requant_fixed import requant_fixed, tflite_multipliers

__all__ = ["loops", "QLinearAdd", "QLinearMul", "QDQAdd", "QDQMul"]

F32, F64 = np.float32, np.float64
#: cvt's limit: a float32 at or above it is not an int32
INT32_END = F32(2.0 ** 31)


def loops(a_shape, b_shape, out):
    """The broadcast of operands a and b over ``out`` as runs of axes
    (ones dropped) where each operand is either present or broadcast:
    ``[((a_present, b_present), extent), ...]``, outermost first."""
    nd = len(out)
    pa = (1,) * (nd - len(a_shape)) + tuple(a_shape)
    pb = (1,) * (nd - len(b_shape)) + tuple(b_shape)
    runs = []
    for d, x, y in zip(out, pa, pb):
        if d == 1:
            continue
        kind = (x == d, y == d)
        if runs and runs[-1][0] == kind:
            runs[-1][1] *= d
        else:
            runs.append([kind, d])
    return [(tuple(k), e) for k, e in runs]


def _strides(runs, which):
    """Operand ``which``'s element strides over ``runs`` (0 where it is
    broadcast)."""
    out, step = [], 1
    for kind, extent in reversed(runs):
        out.append(step if kind[which] else 0)
        step *= extent if kind[which] else 1
    return out[::-1]


class _QBinary(QuantKernel):
    """QLinearAdd / QLinearMul(A, A_scale, A_zp, B, B_scale, B_zp, C_scale,
    C_zp)."""

    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_binary
    #: qnative.ADD / MUL
    qop = None

    def setup(self):
        self.shrink_budget()
        out = self.oshape()
        self.total = math.prod(out)
        self.lo, self.hi = self.out_range()
        p = [self.qparam(i, n).reshape(-1)[0] for i, n in
             ((1, "A_scale"), (4, "B_scale"), (6, "C_scale"))]
        z = [self.qparam(i, n).reshape(-1)[0] for i, n in
             ((2, "A_zero_point"), (5, "B_zero_point"), (7, "C_zero_point"))]
        self.scales = tuple(F32(s) for s in p)
        self.zps = tuple(int(v) for v in z)
        self.consts = [None if self.ins[i].data is None else
                       self.keep(np.ascontiguousarray(self.ins[i].data)) for i in (0, 3)]
        self.runtime = tuple(i for i, c in zip((0, 3), self.consts) if c is None)
        self.runs = loops(self.shape(0), self.shape(3), out)
        # onnxruntime's roles: a is the scalar one when it is broadcast along the
        # innermost run (or everything is one element)
        self.swap = not self.runs or not self.runs[-1][0][0]
        self.constants()
        self.native = self.native_run()
        if self.native is None:
            self.axis = next((k for k, d in enumerate(out) if d > 1), 0)
            rows = out[self.axis] if out else 1
            row = math.prod(out[self.axis + 1:]) if out else 1
            self.rows = self.step_items(12 * row, rows, row)
            self.scratch = [((self.rows * row,), F64), ((self.rows * row,), F32)]

    def constants(self):
        """The ratios and fixed part of the formula, in float32."""
        (sa, sb, sy), (za, zb, zy) = self.scales, self.zps
        ra, rb = F32(sa / sy), F32(sb / sy)
        rv, zv, rs, zs = (rb, zb, ra, za) if self.swap else (ra, za, rb, zb)
        prod = F32(rs * F32(zs))
        self.rv, self.rs = rv, rs
        self.fixed = F32(F32(zy) - F32(F64(rv) * F64(zv) + F64(prod)))
        self.ratio = F32(F32(sa * sb) / sy)
        self.zy = F32(zy)

    def operand(self, xs, k):
        c = self.consts[k]
        return c if c is not None else xs[(0, 3)[k]]

    # -- native -------------------------------------------------------------
    def native_run(self):
        """``run(xs, ys)`` with ``pa_qbinary``, or None (NumPy path)."""
        dt = np.dtype(self.outs[0].dtype)
        if not self.use_native or dt not in qnative.QTYPES or len(self.runs) > 3 or \
                any(np.dtype(self.ins[i].dtype) != dt for i in (0, 3)) or \
                not all(math.isfinite(s) and s > 0 for s in self.scales):
            return None
        runs = [((True, True), 1)] * (3 - len(self.runs)) + list(self.runs)
        op, fixed = self.native_op()
        desc = qnative.qbinary(op=op, dtype=dt, scales=self.scales,
                               zero_points=self.zps, clamp=(self.lo, self.hi),
                               loops=[e for _, e in runs], a_strides=_strides(runs, 0),
                               b_strides=_strides(runs, 1), fixed=fixed)
        consts = [None if c is None else qnative.bptr(c) for c in self.consts]
        if not self.total:
            return lambda xs, ys: None
        self.desc, self.const_ptrs = desc, consts

        def run(xs, ys):
            a = consts[0] if consts[0] is not None else qnative.bptr(xs[0])
            b = consts[1] if consts[1] is not None else qnative.bptr(xs[3])
            qnative.run_qbinary(desc, a, b, qnative.bptr(ys[0]))
        return run

    def native_op(self):
        """(the ``pa_qbinary_op_t``, its (multiplier, shift))."""
        return self.qop, (0, 0)

    def native_call(self, xs, ys):
        """The native run as one call record, or None."""
        if self.native is None or not self.total or self._act is not None:
            return None
        c = self.const_ptrs
        a = c[0] if c[0] is not None else xs[0]
        b = c[1] if c[1] is not None else xs[3]
        return ("qbinary", self.desc, None, a, b, ys[0], ())

    def run(self, xs, ys, sc):
        if self.native is not None:
            self.native(xs, ys)
            return
        out = self.oshape()
        a = np.broadcast_to(self.operand(xs, 0), out)
        b = np.broadcast_to(self.operand(xs, 1), out)
        n = out[self.axis] if out else 1
        for r0 in range(0, n, self.rows):
            r1 = min(r0 + self.rows, n)
            index = (slice(None),) * self.axis + (slice(r0, r1),)
            y = ys[0][index] if out else ys[0]
            m = y.size
            t64 = sc[0][:m].reshape(y.shape)
            t32 = sc[1][:m].reshape(y.shape)
            self.compute(a[index] if out else a, b[index] if out else b, t64, t32)
            self.finish(t32, t64, y)

    def finish(self, t, spare, y):
        """y = cvt(t) saturated and clamped (``spare``: a free scratch)."""
        np.rint(t, out=t)
        big = spare.reshape(-1).view(np.bool_)[:t.size].reshape(t.shape)
        np.less(t, INT32_END, out=big)
        np.logical_not(big, out=big)            # >= 2^31 or NaN: the lowest value
        np.copyto(t, F32(self.lo), where=big)
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(y, t, casting="unsafe")


@register
class QLinearAdd(_QBinary):
    """com.microsoft QLinearAdd: ``C = quantize(dequant(A) + dequant(B))``,
    onnxruntime's arithmetic."""

    op_types = ("QLinearAdd",)
    qdq_form = "Add"
    tflite_int8 = {"ADD": "add_mul"}
    qop = qnative.ADD

    def compute(self, a, b, t64, t32):
        v, s = (b, a) if self.swap else (a, b)
        np.multiply(s, F64(self.rs), out=t64)       # fma(s, rS, F)
        np.add(t64, F64(self.fixed), out=t64)
        np.copyto(t32, t64, casting="same_kind")
        np.multiply(v, F64(self.rv), out=t64)       # fma(v, rV, that)
        np.add(t64, t32, out=t64)
        np.copyto(t32, t64, casting="same_kind")


@register
class QLinearMul(_QBinary):
    """com.microsoft QLinearMul: ``C = quantize(dequant(A) * dequant(B))``,
    onnxruntime's arithmetic."""

    op_types = ("QLinearMul",)
    qdq_form = "Mul"
    tflite_int8 = {"MUL": "add_mul"}
    qop = qnative.MUL

    def tflite_fixed(self):
        """TFLite's MUL (the importer sets ``requant="tflite"``): the Q31
        multiplier and shift of ``sa * sb / sy`` in double (mul.cc), the
        product requantized with two roundings as its conv's
        (reference_integer_ops/mul.h, MultiplyByQuantizedMultiplier); None:
        onnxruntime's float32 formula."""
        if self.attrs.get("requant") != "tflite":
            return None
        got = self.__dict__.get("_fixed")
        if got is None:
            (sa, sb, sy), _ = self.scales, self.zps
            try:
                got = self._fixed = tflite_multipliers(sa, [sb], sy)
            except ValueError as exc:
                self.fail(str(exc))
        return got

    def native_op(self):
        """TFLite's MUL: ``pa_qbinary``'s TFLITE_MUL with the multiplier and
        shift (the NumPy path's :func:`requant_fixed`, in C)."""
        fixed = self.tflite_fixed()
        if fixed is None:
            return self.qop, (0, 0)
        return qnative.TFLITE_MUL, (int(fixed[0][0]), int(fixed[1][0]))

    def compute(self, a, b, t64, t32):
        (_, _, _), (za, zb, zy) = self.scales, self.zps
        pair = t64.reshape(-1).view(np.int32)
        pa, pb = pair[:t32.size].reshape(t32.shape), pair[t32.size:].reshape(t32.shape)
        np.subtract(a, np.int32(za), out=pa)
        np.subtract(b, np.int32(zb), out=pb)
        np.multiply(pa, pb, out=pa)                 # exact: |product| <= 65536
        fixed = self.tflite_fixed()
        if fixed is not None:       # the quantized values themselves (finish keeps them)
            requant_fixed(pa, fixed[0], fixed[1], zy, self.lo, self.hi, t32)
            return
        np.copyto(t32, pa, casting="unsafe")
        np.multiply(t32, self.ratio, out=t32)
        np.add(t32, self.zy, out=t32)


class _QDQBinary(_QBinary):
    """ai.pyarena QDQAdd / QDQMul (QLinearAdd's inputs): a
    ``DequantizeLinear -> Add / Mul -> QuantizeLinear`` group that
    onnxruntime's optimiser leaves unfused (its QDQ selectors refuse it:
    :mod:`pyarena.importers.onnx_qdq`), computed as onnxruntime runs it,
    op by op in float32: ``t = ((a - za) * sa) op ((b - zb) * sb)``, then
    QuantizeLinear ``rint(t / sy) + zy`` saturated (a NaN to 0) -- in one
    pass over the 8-bit operands (``pa_qbinary``'s DQ_ADD / DQ_MUL)."""

    onnx_domain = "ai.pyarena"

    def compute(self, a, b, t64, t32):
        (sa, sb, sy), (za, zb, zy) = self.scales, self.zps
        halves = t64.reshape(-1).view(F32)
        fa = halves[:t32.size].reshape(t32.shape)
        fb = halves[t32.size:2 * t32.size].reshape(t32.shape)
        np.subtract(a, F32(za), out=fa, casting="unsafe")   # exact: 8-bit values
        np.multiply(fa, sa, out=fa)
        np.subtract(b, F32(zb), out=fb, casting="unsafe")
        np.multiply(fb, sb, out=fb)
        self.float_op(fa, fb, out=t32)
        np.divide(t32, sy, out=t32)

    def finish(self, t, spare, y):
        """QuantizeLinear's rounding: rint, + zero point, saturation; NaN 0."""
        nan = spare.reshape(-1).view(np.bool_)[:t.size].reshape(t.shape)
        np.isnan(t, out=nan)
        np.rint(t, out=t)
        np.add(t, F32(self.zps[2]), out=t)
        np.clip(t, self.lo, self.hi, out=t)
        np.copyto(t, F32(0), where=nan)
        np.copyto(y, t, casting="unsafe")


@register
class QDQAdd(_QDQBinary):
    """ai.pyarena QDQAdd: onnxruntime's unfused DQ -> Add -> Q, in float32."""

    op_types = ("QDQAdd",)
    qop = qnative.DQ_ADD
    float_op = staticmethod(np.add)


@register
class QDQMul(_QDQBinary):
    """ai.pyarena QDQMul: onnxruntime's unfused DQ -> Mul -> Q, in float32."""

    op_types = ("QDQMul",)
    qop = qnative.DQ_MUL
    float_op = staticmethod(np.multiply)
