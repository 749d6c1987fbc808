"""Integer matrix products: ``MatMulInteger`` (exact int32 accumulators),
``QLinearMatMul`` and onnxruntime's ``com.microsoft`` ``QGemm``.  B is a
constant kept in its file dtype; it is converted (zero point subtracted) a
chunk of columns at a time into scratch, A once per call."""
import math

import numpy as np

from .quantization import QuantKernel, requantize
from .requant_fixed import requant_fixed, tflite_multipliers
from . import shape_rules as rules
from . import shape_rules_quantized as qrules
from .registry import _carve, register
from .quantized_cols import try_few_columns
from .quantized_conv_native import try_native_matmul


class _QMatMul(QuantKernel):
    """A (..., M, K) @ B (K, N) on integers with zero points, B constant;
    N in column chunks so the converted weights stay within the budget.  A
    B of more than two axes (..., K, N): one batched matmul of the whole
    (broadcast) batch, B converted once at setup (:meth:`setup_batched`)."""

    integer = True   # int32 accumulators out (MatMulInteger) or requantized

    def setup(self):
        self.shrink_budget()
        self.runtime = (0,)
        ia, ib, iaz, ibz = self.layout
        # B computed at run time, every scale and zero point a constant (else
        # the constant path below asks for their values: NeedsValueError)
        self.runtime_b = self.batched_b and self.has(ib) and self.ins[ib].data is None and \
            all(t is None or t.data is not None
                for i, t in enumerate(self.ins) if i not in (ia, ib))
        if self.runtime_b:
            self.setup_runtime_b()
            return
        b = self.b_matrix(self.const(ib, "B"))
        if b.ndim > 2 and self.batched_b:
            self.setup_batched(b)
            return
        if b.ndim != 2:
            self.fail(f"B of shape {list(b.shape)} is not supported (a 2-D constant)")
        self.batched = False
        a_shape = self.shape(ia)
        if not a_shape or a_shape[-1] != b.shape[0]:
            self.fail(f"A {list(a_shape)} and B {list(b.shape)} do not chain")
        self.K, self.N = b.shape
        self.M = math.prod(a_shape[:-1]) if len(a_shape) > 1 else 1
        self.setup_a(ia, iaz)
        bzp = np.broadcast_to(self.qparam(ibz, "b_zero_point").reshape(-1), (self.N,))
        self.native = try_few_columns(self, b, bzp) or \
            try_native_matmul(self, b, bzp, None if self.azp_input is not None else self.azp,
                              self.M, self.native_bias())
        if self.native is not None:
            self.scratch = self.native.scratch
            return
        self.b = self.keep(np.ascontiguousarray(b))        # the file's integer dtype
        self.bzp = self.keep(bzp.astype(self.ct))
        isz = self.ct.itemsize
        room = max(self.scratch_budget - self.M * self.K * isz, 0)
        self.nc = int(max(1, min(self.N, room // max(1, (self.K + self.M) * isz))))
        self.scratch = [((self.M, self.K), self.ct), ((self.K * self.nc,), self.ct),
                        ((self.M * self.nc,), self.ct)]
        self.finish_setup()

    def setup_a(self, ia, iaz):
        """The accumulator type and A's zero point: one value, a constant
        or fed at run time (then A and it are read each run)."""
        self.ct = np.dtype(np.float64 if self.integer else np.float32)
        self.azp_input = iaz if self.runtime_param(iaz) else None
        azp = np.zeros(1) if self.azp_input is not None else self.qparam(iaz, "a_zero_point")
        if azp.size != 1:
            self.fail("a per-row zero point of A is not supported")
        self.azp = float(azp.reshape(()))
        if self.azp_input is not None:
            self.runtime = (ia, iaz)

    #: whether a B of more than two axes runs (batched); QGemm's B is a matrix
    batched_b = True

    def setup_batched(self, b):
        """A (..., M, K) @ B (..., K, N), batch axes broadcast: B less its
        zero point (per tensor or per column) kept in the accumulator type,
        A converted into the scratch each run, one matmul into the scratch,
        then the store (requantization) of the whole output."""
        ia, ib, iaz, ibz = self.layout
        a_shape, ys = self.shape(ia), self.oshape()
        if len(a_shape) < 2 or a_shape[-1] != b.shape[-2]:
            self.malformed(f"A {list(a_shape)} and B {list(b.shape)} do not chain")
        self.batched = True
        self.native = None
        self.K, self.N = b.shape[-2:]
        self.setup_a(ia, iaz)
        bzp = self.b_param(self.qparam(ibz, "b_zero_point"), b.shape, "b_zero_point")
        self.b = self.keep(np.subtract(b, bzp.astype(self.ct), dtype=self.ct))
        self.b_shape = b.shape
        self.scratch = [(a_shape, self.ct), (ys, self.ct)]
        self.finish_setup()

    def setup_runtime_b(self):
        """B computed at run time (a QLinearMatMul of two activations,
        onnxruntime's fusion of attention scores in a QDQ model): A and B
        less their zero points (per tensor) into float64 scratch each run
        (exact integer products and sums), one broadcast matmul, then the
        store (requantization) of the whole output."""
        ia, ib, iaz, ibz = self.layout
        a_shape, b_shape, ys = self.shape(ia), self.shape(ib), self.oshape()
        if len(a_shape) < 1 or len(b_shape) < 2 or a_shape[-1] != b_shape[-2]:
            self.malformed(f"A {list(a_shape)} and B {list(b_shape)} do not chain")
        self.integer_types(self.ins[ia], self.ins[ib])
        self.batched, self.native = True, None
        self.K, self.N = b_shape[-2:]
        self.b_shape = b_shape
        self.setup_a(ia, iaz)
        self.ct = np.dtype(np.float64)
        bzp = self.qparam(ibz, "b_zero_point")
        if bzp.size != 1:
            self.fail("a per-column zero point of a B computed at run time is not supported")
        self.bzp = float(bzp.reshape(()))
        self.runtime = (ia, ib)
        # the sums rounded to float32 before the requantization, as
        # onnxruntime converts its int32 accumulators (float64 for int32 out)
        self.scratch = [(a_shape, self.ct), (b_shape, self.ct), (ys, self.ct),
                        (ys, np.float64 if self.integer else np.float32)]
        self.finish_setup()

    def b_param(self, v, b_shape, what):
        """A zero point or scale of a batched B: per tensor, per column (N,),
        or per column of each matrix (..., 1, N), onnxruntime's form."""
        v = np.asarray(v)
        if v.ndim <= 1 and v.size in (1, self.N):
            return v.reshape(-1)
        if v.ndim >= 2 and v.shape[-2] == 1 and v.shape[-1] in (1, self.N):
            try:
                if np.broadcast_shapes(v.shape, b_shape) == tuple(b_shape):
                    return v
            except ValueError:
                pass
        self.malformed(f"{what} of shape {list(v.shape)} does not fit B {list(b_shape)}")

    def finish_setup(self):
        pass

    def requant_params(self):
        """(multiplier per column as float32, y zero point, lo, hi) of an
        8-bit output; None for int32 accumulators."""
        return None

    def native_bias(self):
        """The int32 added to each column's accumulator on the native path
        (N,), or None where it is not one value per column."""
        return np.zeros(self.N)

    def b_matrix(self, b):
        return b

    def run(self, xs, ys, sc):
        if self.native is not None:
            z = None if self.azp_input is None else xs[self.azp_input].reshape(-1)[0]
            return self.native.run(xs[self.layout[0]].reshape(self.M, self.K),
                                   ys[0].reshape(self.M, self.N), sc, z)
        azp = self.azp if self.azp_input is None else float(xs[self.azp_input].reshape(-1)[0])
        if self.runtime_b:
            af, bf, acc, acc_out = sc
            np.subtract(xs[self.layout[0]], azp, out=af)
            np.subtract(xs[self.layout[1]], self.bzp, out=bf)
            np.matmul(af, bf, out=acc)
            np.copyto(acc_out, acc, casting="unsafe")
            self.store(acc_out, ys[0], 0, self.N)
            return
        if self.batched:
            af, acc = sc
            np.subtract(xs[self.layout[0]], azp, out=af)
            np.matmul(af, self.b, out=acc)
            self.store(acc, ys[0], 0, self.N)
            return
        a = xs[self.layout[0]].reshape(self.M, self.K)
        y = ys[0].reshape(self.M, self.N)
        af, wf, acc = sc
        np.subtract(a, azp, out=af)
        for c0 in range(0, self.N, self.nc):
            c1 = min(c0 + self.nc, self.N)
            w = wf[:self.K * (c1 - c0)].reshape(self.K, c1 - c0)
            np.subtract(self.b[:, c0:c1], self.bzp[c0:c1], out=w)
            out = acc[:self.M * (c1 - c0)].reshape(self.M, c1 - c0)
            np.matmul(af, w, out=out)
            self.store(out, y[:, c0:c1], c0, c1)

    def store(self, acc, y, c0, c1):
        np.copyto(y, acc, casting="unsafe")

    def native_calls_scratch(self, xs, ys, sc):
        """The native run as call records (the C GEMM's, a constant A
        zero point: its descriptor holds it), or None."""
        calls = getattr(self.native, "calls", None)
        if calls is None or self.azp_input is not None or self._act is not None:
            return None
        parts = None if sc is None else _carve(sc, self.scratch)
        return calls(xs[self.layout[0]].reshape(self.M, self.K),
                     ys[0].reshape(self.M, self.N), parts)

    def native_calls(self, xs, ys):
        if self.scratch:
            return None
        return self.native_calls_scratch(xs, ys, None)


@register
class MatMulInteger(_QMatMul):
    """int32 ``(A - a_zero_point) @ (B - b_zero_point)`` (B constant; its
    zero point per tensor or per column)."""

    op_types = ("MatMulInteger",)
    family = "quantized"
    shape_rule = rules.matmul_integer
    fold = "expanding"
    layout = (0, 1, 2, 3)


@register
class QLinearMatMul(_QMatMul):
    """``y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale /
    y_scale) + y_zp)`` (b constant; its scale and zero point per tensor or
    per column)."""

    op_types = ("QLinearMatMul",)
    family = "quantized"
    shape_rule = rules.qlinear_matmul
    qdq_form = "MatMul"
    layout = (0, 3, 2, 5)
    integer = False

    def requant_params(self):
        a_s = self.qparam(1, "a_scale").reshape(-1)
        b_s = self.qparam(4, "b_scale")
        if self.runtime_b and b_s.size != 1:
            self.fail("a per-column scale of a B computed at run time is not supported")
        b_s = self.b_param(b_s, self.b_shape, "b_scale") if self.batched else b_s.reshape(-1)
        y_s = self.qparam(6, "y_scale").reshape(-1)
        if a_s.size != 1 or y_s.size != 1:
            self.fail("per-row scales of a or y are not supported")
        # float32, in onnxruntime's order (qlinearmatmul.cc:
        # a_scale * b_scale[i] / y_scale)
        f = np.float32
        mult = f(a_s[0]) * b_s.astype(f) / f(y_s[0])
        if mult.ndim <= 1:
            mult = np.broadcast_to(mult, (self.N,))
        lo, hi = self.out_range()
        return mult, float(self.qparam(7, "y_zero_point").reshape(-1)[0]), lo, hi

    def finish_setup(self):
        mult, self.yzp, self.lo, self.hi = self.requant_params()
        self.mult = self.keep(np.ascontiguousarray(mult))

    def store(self, acc, y, c0, c1):
        np.multiply(acc, self.mult[..., c0:c1], out=acc)
        requantize(acc, y, self.yzp, self.lo, self.hi)


@register
class QGemm(QLinearMatMul):
    """com.microsoft QGemm: ``alpha * (A - a_zp) @ (B - b_zp)`` (B constant,
    ``transB`` allowed) plus the int32 bias C at scale ``a_scale *
    b_scale``; requantized with y_scale / y_zero_point, or float32 out
    when y_scale is omitted."""

    op_types = ("QGemm",)
    onnx_domain = "com.microsoft"
    shape_rule = qrules.qgemm
    qdq_form = None
    tflite_int8 = {"FULLY_CONNECTED": "fully_connected"}
    layout = (0, 3, 2, 5)

    batched_b = False

    def scales(self):
        """alpha * a_scale * b_scale per column (/ y_scale with an 8-bit
        output) in float32, in onnxruntime's order (qgemm.cc,
        ComputeOutputScale)."""
        f = np.float32
        a_s = self.qparam(1, "a_scale").reshape(-1)
        if a_s.size != 1:
            self.fail("a per-row scale of A is not supported")
        s = (f(self.attrs.get("alpha", 1.0)) * f(a_s[0])) * \
            self.qparam(4, "b_scale").reshape(-1).astype(f)
        if self.has(7):
            s = s / f(self.qparam(7, "y_scale").reshape(-1)[0])
        return np.broadcast_to(s, (self.N,))

    def fixed_requant(self):
        """TFLite's FULLY_CONNECTED (the importer sets ``requant="tflite"``):
        its fixed-point multipliers and shifts per column (QuantizeMultiplier
        of ``x_scale * w_scale / y_scale`` in double, as its conv's:
        tensorflow/lite/kernels/kernel_util.cc, GetQuantizedConvolutionMultipler
        and PopulateConvolutionQuantizationParams; the accumulator then
        scaled with one rounding, not conv's two: :attr:`single_rounding`),
        or None: onnxruntime's float32 rule."""
        if self.attrs.get("requant") != "tflite" or not self.has(7):
            return None
        got = self.__dict__.get("_fixed")
        if got is None:
            try:
                m, s = tflite_multipliers(self.qparam(1, "a_scale").reshape(-1)[0],
                                          self.qparam(4, "b_scale").reshape(-1),
                                          self.qparam(7, "y_scale").reshape(-1)[0])
            except ValueError as exc:
                self.fail(str(exc))
            got = self._fixed = tuple(np.broadcast_to(v, (self.N,)).copy() for v in (m, s))
        return got

    #: TFLite's FULLY_CONNECTED rounds its fixed-point product once (ruy's
    #: MultiplyByQuantizedMultiplier), its conv twice: pa_qrequant's mode
    single_rounding = True

    def setup_a(self, ia, iaz):
        super().setup_a(ia, iaz)
        if self.fixed_requant() is not None:
            self.ct = np.dtype(np.float64)      # exact sums: TFLite's integer requantization

    def requant_params(self):
        """The 8-bit output's requantization (the C GEMM's, as
        QLinearMatMul's); NotImplemented for a float output (the NumPy
        path's store)."""
        if not self.has(7):
            return NotImplemented
        lo, hi = self.out_range()
        return self.scales(), float(self.qparam(8, "y_zero_point").reshape(-1)[0]), lo, hi

    def native_bias(self):
        if not self.has(6):
            return np.zeros(self.N)
        c = self.qparam(6, "C")
        if c.size not in (1, self.N) or c.ndim > 2 or (c.ndim == 2 and c.shape[0] != 1):
            return None         # a bias per row: the NumPy path
        return np.broadcast_to(c.reshape(-1), (self.N,))

    def b_matrix(self, b):
        if int(self.attrs.get("transA", 0)):
            self.fail("transA=1 is not supported")
        return b.T if int(self.attrs.get("transB", 0)) else b

    def finish_setup(self):
        scale = self.scales()
        self.float_out = not self.has(7)
        if not self.float_out:
            self.yzp = float(self.qparam(8, "y_zero_point").reshape(-1)[0])
            self.lo, self.hi = self.out_range()
        self.mult = self.keep(np.ascontiguousarray(scale, np.float32))
        c = self.qparam(6, "C") if self.has(6) else np.zeros(1)
        if self.native_bias() is not None:      # one value per column
            c = np.broadcast_to(c.reshape(-1), (self.N,))
        else:                                   # (M, 1) or (M, N): Gemm's broadcast
            try:
                c = np.broadcast_to(c, (self.M, self.N))
            except ValueError:
                self.malformed(f"C of shape {list(c.shape)} does not broadcast to "
                               f"{[self.M, self.N]}")
        self.c = self.keep(np.ascontiguousarray(c, self.ct))

    def store(self, acc, y, c0, c1):
        np.add(acc, self.c[..., c0:c1], out=acc)
        fixed = self.fixed_requant()
        if fixed is not None:
            requant_fixed(acc, fixed[0][c0:c1], fixed[1][c0:c1], self.yzp, self.lo, self.hi, y,
                          single_rounding=True)
            return
        np.multiply(acc, self.mult[c0:c1], out=acc)
        if self.float_out:
            np.copyto(y, acc)
        else:
            requantize(acc, y, self.yzp, self.lo, self.hi)
