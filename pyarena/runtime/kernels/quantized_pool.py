"""onnxruntime's ``com.microsoft`` QLinearSoftmax and QLinearAveragePool
with its own arithmetic, so its bytes: natively (``pa_qsoftmax``,
``pa_qavgpool``: csrc/kernels/qsoftmax.c and qavgpool.c give the formulas
and the onnxruntime files they follow) or with NumPy in the same float32
steps, the reference the tests compare the native kernels with.

QLinearSoftmax never dequantizes: a table of 256 exponentials indexed by
how far an element is below its row's maximum, a float32 sum in row order,
``rint((e / sum) * floor(1 / y_scale)) + y_zero_point``.  QLinearAveragePool
sums each window's dequantized values in float32 in window order (padding
adds nothing), divides by the count, then ``rint(avg / y_scale +
y_zero_point)``; a window that is the whole image with no pads takes
onnxruntime's global-pool arithmetic (an integer sum times one scale).
TFLite's AVERAGE_POOL_2D (``requant="tflite"``) averages the raw bytes in
integers (``pa_qavgpool``'s integer_average, csrc/kernels/qavgpool_int.c;
NumPy: :meth:`QLinearAveragePool.finish_tflite`)."""
import math

import numpy as np

from ..._native import qelementwise as qnative
from . import shape_rules_quantized as qrules
from .quantization import QuantKernel, requantize
from .registry import register
from .spatial import pads_for

__all__ = ["QLinearSoftmax", "QLinearAveragePool", "softmax_table"]

_FLT_MAX = float(np.finfo(np.float32).max)


def softmax_table(x_scale, reduce_len):
    """onnxruntime's 256 exponentials for rows of ``reduce_len`` values,
    indexed by ``max - x`` (qlinear_softmax.cc's BuildLookupTable, in
    Python's doubles: the same libm ``log`` / ``exp``)."""
    xs = float(np.float32(x_scale))
    shift = math.log(float(np.float32(_FLT_MAX) / np.float32(reduce_len)))
    shift = max(0.0, shift - 5.0) / xs
    return np.array([math.exp(((255 - d) - 255.0 + shift) * xs) for d in range(256)],
                    np.float32)


@register
class QLinearSoftmax(QuantKernel):
    """com.microsoft QLinearSoftmax: ``opset`` < 13 flattens from ``axis``
    on (2-D coercion), 13 and later take the one ``axis`` (any axis: the
    tensor as (outer, n, inner), reduced over n -- YOLOv8's DFL head
    softmaxes axis 1 of (1, 16, 4, 8400))."""

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
        if nd and not -nd <= axis < nd:
            self.malformed(f"axis {axis} is out of range for a {nd}-D input")
        axis = axis + nd if axis < 0 else axis
        if int(self.attrs.get("opset", 13)) < 13:
            self.n, self.inner = math.prod(shape[axis:]), 1
        else:
            self.n = shape[axis] if shape else 1
            self.inner = math.prod(shape[axis + 1:])
        self.outer = math.prod(shape) // max(1, self.n * self.inner)
        dt = np.dtype(self.ins[0].dtype)
        if dt not in qnative.QTYPES or np.dtype(self.outs[0].dtype) != dt:
            self.fail(f"needs an 8-bit input and output of one type, not {dt.name}")
        self.y_scale = np.float32(self.qparam(3, "y_scale").reshape(-1)[0])
        self.y_zp = int(self.qparam(4, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        table = softmax_table(self.qparam(1, "x_scale").reshape(-1)[0], max(1, self.n))
        self.table = self.keep(table)
        self.native = self.use_native or None
        row = max(1, self.n * self.inner)
        self.rows = self.step_items(16 * row, self.outer, row)
        self.scratch = [] if self.native else [
            ((self.rows, self.n, self.inner), np.float32),
            ((self.rows, self.n, self.inner), np.intp),
            ((self.rows, 1, self.inner), np.float32)]

    def run(self, xs, ys, sc):
        if self.native:
            qnative.softmax(self.ins[0].dtype, qnative.ffi.from_buffer("float[]", self.table),
                            qnative.bptr(xs[0]), qnative.bptr(ys[0]), self.outer, self.n,
                            self.inner, self.y_scale, self.y_zp)
            return
        x = xs[0].reshape(self.outer, self.n, self.inner)
        y = ys[0].reshape(self.outer, self.n, self.inner)
        big = np.float32(math.floor(np.float32(1.0) / self.y_scale))
        for r0 in range(0, self.outer, self.rows):
            r1 = min(r0 + self.rows, self.outer)
            e, d, s = sc[0][:r1 - r0], sc[1][:r1 - r0], sc[2][:r1 - r0]
            np.max(x[r0:r1], axis=1, keepdims=True, out=d[:, :1])
            np.subtract(d[:, :1], x[r0:r1], out=d)
            np.take(self.table, d, out=e)
            s.fill(0.0)
            for k in range(self.n):                 # one accumulator, in row order
                np.add(s, e[:, k:k + 1], out=s)
            np.divide(e, s, out=e)
            np.multiply(e, big, out=e)
            requantize(e, y[r0:r1], self.y_zp, self.lo, self.hi)


@register
class QLinearAveragePool(QuantKernel):
    """com.microsoft QLinearAveragePool over 1-D or 2-D windows
    (``channels_last`` for NHWC; pads, auto_pad, ceil_mode,
    count_include_pad).  The NumPy path's float copies of the padded input
    and of the output are scratch: 4x the int8 tensors while it runs."""

    op_types = ("QLinearAveragePool",)
    onnx_domain = "com.microsoft"
    family = "quantized"
    shape_rule = qrules.qlinear_average_pool
    tflite_int8 = {"AVERAGE_POOL_2D": "average_pool"}

    def setup(self):
        self.runtime = (0,)
        self.last = bool(int(self.attrs.get("channels_last", 0)))
        xs, ys = self.shape(0), self.oshape()
        k = [int(v) for v in self.attrs.get("kernel_shape", [])]
        nd = len(xs) - 2
        if nd not in (1, 2) or len(k) != nd:
            self.fail(f"pools over 1 or 2 spatial axes, not {nd}")
        dt = np.dtype(self.ins[0].dtype)
        if dt not in qnative.QTYPES or np.dtype(self.outs[0].dtype) != dt:
            self.fail(f"needs an 8-bit input and output of one type, not {dt.name}")
        sp, osp = (xs[1:-1], ys[1:-1]) if self.last else (xs[2:], ys[2:])
        st = [int(v) for v in self.attrs.get("strides", [1] * nd)]
        pads = pads_for(self.attrs, sp, k, st, [1] * nd)
        if nd == 1:     # a 1-D pool: one row of a 2-D one
            sp, osp, k, st, pads = (1, *sp), (1, *osp), [1] + k, [1] + st, \
                [0, pads[0], 0, pads[1]]
        self.geom = (tuple(sp), tuple(osp), tuple(k), tuple(st), tuple(pads))
        self.dims = (xs[0], xs[-1] if self.last else xs[1])
        self.cip = bool(int(self.attrs.get("count_include_pad", 0)))
        self.x_scale = np.float32(self.qparam(1, "x_scale").reshape(-1)[0])
        self.x_zp = int(self.qparam(2, "x_zero_point").reshape(-1)[0])
        self.y_scale = np.float32(self.qparam(3, "y_scale").reshape(-1)[0])
        self.y_zp = int(self.qparam(4, "y_zero_point").reshape(-1)[0])
        self.lo, self.hi = self.out_range()
        # TFLite's AVERAGE_POOL_2D (the importer sets requant="tflite"): the
        # raw bytes summed, divided by the window's count rounding half away
        # from zero, the scales not read (reference_integer_ops/pooling.h)
        self.tflite = self.attrs.get("requant") == "tflite"
        self.native = self.native_desc(dt) or None
        self.scratch = [] if self.native else self.numpy_scratch()

    def native_desc(self, dt):
        """The ``pa_qavgpool_t`` of this op, or None (the C kernel refuses
        a window that misses the input, which onnxruntime divides by 0)."""
        if not self.use_native:
            return None
        (h, w), (oh, ow), k, st, pads = self.geom
        desc = qnative.qavgpool(dtype=dt, nhwc=self.last, dims=(*self.dims, h, w), out=(oh, ow),
                                kernel=k, strides=st, pads=(pads[0], pads[1], pads[2], pads[3]),
                                count_include_pad=self.cip, scales=(self.x_scale, self.y_scale),
                                zero_points=(self.x_zp, self.y_zp),
                                integer_clamp=(self.lo, self.hi) if self.tflite else None)
        byte = np.zeros(1, np.uint8)
        images, desc.n = desc.n, 0          # checks the geometry without running
        try:
            qnative.run_qavgpool(desc, qnative.bptr(byte), qnative.bptr(byte))
        except Exception:                   # noqa: BLE001 -- refused: NumPy path
            return None
        desc.n = images
        return desc

    def native_call(self, xs, ys):
        """The native run as one call record (``pa_qavgpool``), or None."""
        if self.native is None or self._act is not None:
            return None
        return ("qavgpool", self.native, None, xs[0], None, ys[0], ())

    def is_global(self):
        (h, w), _, k, _, pads = self.geom
        return k == (h, w) and not any(pads)

    def numpy_scratch(self):
        n, c = self.dims
        (h, w), (oh, ow), k, st, pads = self.geom
        hp = max(h + pads[0] + pads[2], (oh - 1) * st[0] + k[0])
        wp = max(w + pads[1] + pads[3], (ow - 1) * st[1] + k[1])
        self.padded = (hp, wp)
        pshape = (n, hp, wp, c) if self.last else (n, c, hp, wp)
        oshape = (n, oh, ow, c) if self.last else (n, c, oh, ow)
        self.counts = self.keep(self.window_counts())
        return [(pshape, np.float32), (oshape, np.float32)]

    def finish_tflite(self, acc, y):
        """TFLite's ``acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n`` (C's
        integer division) over the window sums, clamped."""
        n = np.broadcast_to(self.counts, acc.shape).astype(np.float64)
        a = acc.astype(np.float64)
        r = np.floor((np.abs(a) + np.floor(n / 2)) / n) * np.sign(a)
        np.clip(r, self.lo, self.hi, out=r)
        np.copyto(y, r, casting="unsafe")

    def window_counts(self):
        """Each output's divisor (float32, broadcast to the output)."""
        (h, w), (oh, ow), k, st, pads = self.geom
        if self.cip:
            cnt = np.full((oh, ow), k[0] * k[1], np.float32)
        else:
            def span(o, s, p, kk, size):
                a = np.arange(o) * s - p
                return np.minimum(a + kk, size) - np.maximum(a, 0)
            cnt = np.outer(span(oh, st[0], pads[0], k[0], h),
                           span(ow, st[1], pads[1], k[1], w)).astype(np.float32)
        return cnt[:, :, None] if self.last else cnt

    def run(self, xs, ys, sc):
        if self.native:
            qnative.run_qavgpool(self.native, qnative.bptr(xs[0]), qnative.bptr(ys[0]))
            return
        n, c = self.dims
        (h, w), (oh, ow), k, st, pads = self.geom
        x = xs[0].reshape((n, h, w, c) if self.last else (n, c, h, w))
        y = ys[0].reshape((n, oh, ow, c) if self.last else (n, c, oh, ow))
        ax = (1, 2) if self.last else (2, 3)
        if self.is_global() and not self.tflite:
            self.run_global(x, y, ax, h * w)
            return
        p, acc = sc
        p.fill(0.0)
        inner = [slice(None)] * 4
        inner[ax[0]], inner[ax[1]] = slice(pads[0], pads[0] + h), slice(pads[1], pads[1] + w)
        dst = p[tuple(inner)]
        if self.tflite:             # the raw bytes (exact sums in float32)
            np.copyto(dst, x)
        else:
            np.subtract(x, np.float32(self.x_zp), out=dst)
            np.multiply(dst, self.x_scale, out=dst)
        acc.fill(0.0)
        for i in range(k[0]):               # window order: rows, then columns
            for j in range(k[1]):
                tap = [slice(None)] * 4
                tap[ax[0]] = slice(i, i + st[0] * (oh - 1) + 1, st[0])
                tap[ax[1]] = slice(j, j + st[1] * (ow - 1) + 1, st[1])
                np.add(acc, p[tuple(tap)], out=acc)
        if self.tflite:
            self.finish_tflite(acc, y)
            return
        np.divide(acc, self.counts, out=acc)
        np.divide(acc, self.y_scale, out=acc)
        np.add(acc, np.float32(self.y_zp), out=acc)
        with np.errstate(invalid="ignore"):
            np.rint(acc, out=acc)
            acc[~(acc < 2.0 ** 31)] = self.lo     # x86: INT32_MIN, then the clamp
        np.clip(acc, self.lo, self.hi, out=acc)
        np.copyto(y, acc, casting="unsafe")

    def run_global(self, x, y, ax, hw):
        """onnxruntime's global pool (MLAS qlgavgpool.cpp): an exact integer
        sum, ``(float)(sum - x_zp * hw) * scale`` clamped, rounded, + y_zp."""
        scale = np.float32(self.x_scale / np.float32(self.y_scale * np.float32(hw)))
        s = np.sum(x, axis=ax, dtype=np.int64, keepdims=True) - self.x_zp * hw
        t = s.astype(np.float32) * scale
        np.clip(t, np.float32(self.lo - self.y_zp), np.float32(self.hi - self.y_zp), out=t)
        np.copyto(y, np.rint(t) + self.y_zp, casting="unsafe")
