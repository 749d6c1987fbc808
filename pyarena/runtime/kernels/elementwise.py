"""Element-wise kernels: activations, maths on one tensor, binary and
variadic arithmetic with broadcasting (the casts: cast.py).

Aliasing contract (the in-place kinds declared here): "unary" kernels
stay correct when ``ys[0]`` is the very memory of ``xs[0]``; "binary"
kernels when ``ys[0]`` is one same-shaped input (each element is read
before it is written).  Kernels that would otherwise overwrite an input
they still read take a scratch buffer (LeakyRelu, PRelu, HardSwish, Elu,
Softsign: one output-sized buffer); the ones that need temporaries
(Erf, Gelu, Mish, Celu, ThresholdedRelu, Shrink) work in flat chunks, 1-3
chunk-sized buffers within the scratch budget (a chunk never smaller than
``MIN_STEP_ELEMENTS``: no loop per element, however small the budget).
"""
import math

import numpy as np

from ..._native import check, lib
from ..._native import kernels as nk
from . import evaluators as ev
from .erf import ErfMixin, erf_values
from . import shape_rules as rules
from .binary_native import add_calls
from .row_add import RowAdd, row_plan
from .native import NATIVE_DTYPE, Pointers, unary
from . import tflite_attrs as tfl
from .registry import Kernel, const, items_per_step, register


def _relu_value(n):
    x = n.v(0)
    return [np.maximum(x, x.dtype.type(0))]


def _clip_value(n):
    """Clip: bounds from the inputs (opset 11) or the attributes."""
    x = n.v(0)
    lo = n.v(1).reshape(-1)[0] if n.has(1) else n.a.get("min")
    hi = n.v(2).reshape(-1)[0] if n.has(2) else n.a.get("max")
    t = x.dtype.type
    return [np.clip(x, -np.inf if lo is None else t(lo), np.inf if hi is None else t(hi))]


def _hard_sigmoid_value(n):
    x = n.v(0)
    t = x.dtype.type
    return [np.clip(x * t(n.a.get("alpha", 0.2)) + t(n.a.get("beta", 0.5)), 0, 1)]


def _hard_swish_value(n):
    x = n.v(0)
    t = x.dtype.type
    return [x * np.clip(x * t(1 / 6) + t(0.5), 0, 1)]


@register
class Relu(Kernel):
    op_types = ('Relu',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    evaluate = _relu_value
    qdq = 'lookup'
    conv_act = 'RELU'
    tflite = {'RELU': ('Relu', {})}

    def setup(self):
        self.zero = const(0, self.dtype)
        self.native = unary(self, "RELU")

    def run(self, xs, ys, sc):
        if self.native:
            self.native(xs, ys)
            return
        np.maximum(xs[0], self.zero, out=ys[0])


@register
class Clip(Kernel):
    op_types = ('Clip', 'Relu6')
    family = 'unary'
    inplace = 'unary'
    shape_rule = {'Clip': rules.same}
    evaluate = {'Clip': _clip_value}
    qdq = {'Clip': 'lookup'}
    conv_act = {'Clip': 'CLIP'}
    tflite = {
        'RELU6': ('Clip', {'min': 0.0, 'max': 6.0}),
        'RELU_N1_TO_1': ('Clip', {'min': -1.0, 'max': 1.0})}

    def setup(self):
        self.runtime = (0,)
        lo = self.attrs.get("min")
        hi = self.attrs.get("max")
        if self.op.op_type == "Relu6":
            lo, hi = 0.0, 6.0
        if self.has(1):
            lo = self._bound(1, "min")
        if self.has(2):
            hi = self._bound(2, "max")
        self.lo = None if lo is None else const(lo, self.dtype)
        self.hi = None if hi is None else const(hi, self.dtype)
        self.native = unary(self, "CLIP", -np.inf if lo is None else lo,
                            np.inf if hi is None else hi)

    def _bound(self, i, name):
        """A bound given as an input: a scalar, or (as onnxruntime takes
        it) any one-element tensor."""
        v = np.asarray(self.const(i, name))
        if v.size != 1:
            self.malformed(f"{name} must hold one value, not shape {list(v.shape)}")
        return float(v.reshape(-1)[0])

    def run(self, xs, ys, sc):
        if self.native:
            self.native(xs, ys)
            return
        x, y = xs[0], ys[0]
        if self.lo is not None:
            np.maximum(x, self.lo, out=y)
            x = y
        if self.hi is not None:
            np.minimum(x, self.hi, out=y)
        elif self.lo is None:
            np.copyto(y, x)


def _unary(name, fn, tflite=None, onnx=True, qdq=None):
    """Declare a one-ufunc element-wise kernel ``y = fn(x)`` (in place safe);
    ``onnx`` False: a TFLite-only op type (no ONNX shape rule)."""
    def run(self, xs, ys, sc):
        fn(xs[0], out=ys[0])
    cls = type(name, (Kernel,), {
        "__doc__": f"{name}: ``numpy.{fn.__name__}`` in one pass.",
        "__module__": __name__, "op_types": (name,), "family": "unary", "inplace": "unary",
        "shape_rule": rules.same if onnx else None, "evaluate": ev.ufunc(fn), "qdq": qdq,
        "tflite": {tflite: (name, {})} if tflite else {}, "run": run})
    return register(cls)


for _n, _f, _t in (("Log", np.log, "LOG"), ("Sqrt", np.sqrt, "SQRT"),
                   ("Reciprocal", np.reciprocal, None),
                   ("Floor", np.floor, "FLOOR"), ("Ceil", np.ceil, "CEIL"),
                   ("Sin", np.sin, "SIN"), ("Cos", np.cos, "COS"),
                   ("Sign", np.sign, None),
                   ("Round", np.rint, "ROUND"),        # ONNX Round: half to even, like rint
                   ("Tan", np.tan, None), ("Asin", np.arcsin, None),
                   ("Acos", np.arccos, None), ("Atan", np.arctan, None),
                   ("Sinh", np.sinh, None), ("Cosh", np.cosh, None),
                   ("Asinh", np.arcsinh, None), ("Acosh", np.arccosh, None),
                   ("Atanh", np.arctanh, None)):
    _unary(_n, _f, _t)
for _n, _f, _t in (("Exp", np.exp, "EXP"),
                   ("Neg", np.negative, "NEG"), ("Abs", np.abs, "ABS")):
    _unary(_n, _f, _t, qdq="lookup")      # 8-bit in QDQ models: a lookup table
_unary("Square", np.square, "SQUARE", onnx=False)      # TFLite SQUARE


@register
class HardSigmoid(Kernel):
    op_types = ('HardSigmoid',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    evaluate = _hard_sigmoid_value
    qdq = 'lookup'
    conv_act = 'HARDSIGMOID'

    def setup(self):
        self.a = const(self.attrs.get("alpha", 0.2), self.dtype)
        self.b = const(self.attrs.get("beta", 0.5), self.dtype)
        self.zero, self.one = const(0, self.dtype), const(1, self.dtype)
        self.native = unary(self, "HARDSIGMOID", self.attrs.get("alpha", 0.2),
                            self.attrs.get("beta", 0.5))

    def run(self, xs, ys, sc):
        if self.native:
            self.native(xs, ys)
            return
        y = ys[0]
        np.multiply(xs[0], self.a, out=y)
        np.add(y, self.b, out=y)
        np.maximum(y, self.zero, out=y)
        np.minimum(y, self.one, out=y)


@register
class HardSwish(Kernel):
    op_types = ('HardSwish',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    evaluate = _hard_swish_value
    qdq = 'lookup'
    conv_act = 'HARDSWISH'
    tflite = {'HARD_SWISH': ('HardSwish', {})}

    def setup(self):
        self.a, self.b = const(1 / 6, self.dtype), const(0.5, self.dtype)
        self.zero, self.one = const(0, self.dtype), const(1, self.dtype)
        self.native = unary(self, "HARDSWISH")
        self.scratch = [] if self.native else [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        if self.native:
            self.native(xs, ys)
            return
        x, s = xs[0], sc[0]
        np.multiply(x, self.a, out=s)
        np.add(s, self.b, out=s)
        np.maximum(s, self.zero, out=s)
        np.minimum(s, self.one, out=s)
        np.multiply(x, s, out=ys[0])


@register
class LeakyRelu(Kernel):
    """y = max(x, 0) + slope * min(x, 0); the negative part goes to scratch
    first so ``y`` may be ``x``."""

    op_types = ('LeakyRelu', 'PRelu')
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same         # (PRelu's slope broadcasts to X)
    nhwc = {'PRelu': 'prelu'}
    tflite = {'LEAKY_RELU': ('LeakyRelu', {}, tfl.leaky_relu),
              'PRELU': ('PRelu', {}, tfl.prelu)}

    def setup(self):
        self.runtime = (0,)
        if self.op.op_type == "PRelu":
            slope = self.const(1, "slope").astype(self.dtype)
            xs = self.shape(0)
            # ONNX PRelu slope broadcasts unidirectionally; a 1-D slope of
            # C values on an NCHW tensor is the common Keras export.
            if slope.ndim == 1 and len(xs) > 2 and slope.shape[0] == xs[1] and \
                    slope.shape[0] != xs[-1] and self.attrs.get("layout") != "NHWC":
                slope = slope.reshape((-1,) + (1,) * (len(xs) - 2))
            self.slope = self.keep(np.ascontiguousarray(slope))
        else:
            self.slope = const(self.attrs.get("alpha", 0.01), self.dtype)
        self.zero = const(0, self.dtype)
        self.native = self._native_slope()
        self.scratch = [] if self.native else [(self.oshape(), self.dtype)]

    def _native_slope(self):
        """(layout, n, c, spatial, slope pointer) for pa_prelu when the slope
        is one value or one per channel (float32); None otherwise."""
        if not self.use_native or self.dtype != NATIVE_DTYPE:
            return None
        shape = self.oshape()
        if self.shape(0) != shape:      # pa_prelu reads the input as the output's shape
            self.malformed(f"input {list(self.shape(0))} and output {list(shape)} differ")
        slope = np.asarray(self.slope, dtype=np.float32)
        total = math.prod(shape)
        # the slope's shape aligned to the output's: one value, or one per
        # channel of the last axis (NHWC) or of axis 1 (NCHW)
        padded = (1,) * (len(shape) - slope.ndim) + tuple(slope.shape)
        if slope.size == 1:
            spec = (nk.layout("NCHW"), 1, 1, total)
        elif padded == (1,) * (len(shape) - 1) + (shape[-1],):
            # rows of c slopes repeated k times (k pixels per row, up to 1024
            # floats): long vector loops instead of one short loop per pixel
            c, pixels = shape[-1], total // shape[-1]
            k = max((d for d in range(1, max(1, 1024 // c) + 1) if pixels % d == 0),
                    default=1)
            slope = np.tile(slope.reshape(-1), k)
            spec = (nk.layout("NHWC"), 1, c * k, pixels // k)
        elif len(shape) >= 2 and padded == (1, shape[1]) + (1,) * (len(shape) - 2):
            spec = (nk.layout("NCHW"), shape[0], shape[1], total // (shape[0] * shape[1]))
        else:
            return None
        mine, old = slope.reshape(-1), getattr(self.prior, "slope_native", None)
        if old is not None and old.shape == mine.shape and np.array_equal(old, mine):
            self.slope_native = old     # the same op's other band geometry: one copy
        else:
            self.slope_native = self.keep(mine.copy())
        self.ptrs = Pointers(self)
        return spec + (nk.fptr(self.slope_native),)

    def native_call(self, xs, ys):
        if not self.native or self._act is not None:
            return None
        layout, n, c, sp, slope = self.native
        return ("prelu", None, slope, nk.fptr(xs[0]), None, nk.fptr(ys[0]), (layout, n, c, sp))

    def run(self, xs, ys, sc):
        if self.native:
            x, y = self.ptrs(xs[0], ys[0])
            layout, n, c, sp, slope = self.native
            st = lib.pa_prelu(layout, n, c, sp, x, slope, y, self.workers)
            if st:
                check(st, f"PRelu {self.op.name!r}")
            return
        x, s, y = xs[0], sc[0], ys[0]
        np.minimum(x, self.zero, out=s)
        np.multiply(s, self.slope, out=s)
        np.maximum(x, self.zero, out=y)
        np.add(y, s, out=y)


@register
class Softplus(Kernel):
    op_types = ('Softplus',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    def setup(self):
        self.zero = const(0, self.dtype)

    def run(self, xs, ys, sc):
        np.logaddexp(xs[0], self.zero, out=ys[0])


@register
class Elu(Kernel):
    """y = scale * (max(x, 0) + alpha * (exp(min(x, 0)) - 1)); the negative
    part is built in scratch first so ``y`` may be ``x``."""

    op_types = ('Elu', 'Selu')
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    tflite = {'ELU': ('Elu', {})}

    def setup(self):
        selu = self.op.op_type == "Selu"
        alpha = self.attrs.get("alpha", 1.6732632423543772 if selu else 1.0)
        gamma = self.attrs.get("gamma", 1.0507009873554805 if selu else 1.0)
        self.alpha, self.gamma = const(alpha, self.dtype), const(gamma, self.dtype)
        self.selu = selu
        self.zero, self.one = const(0, self.dtype), const(1, self.dtype)
        self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        x, s, y = xs[0], sc[0], ys[0]
        np.minimum(x, self.zero, out=s)
        np.expm1(s, out=s)
        np.multiply(s, self.alpha, out=s)
        np.maximum(x, self.zero, out=y)
        np.add(y, s, out=y)
        if self.selu:
            np.multiply(y, self.gamma, out=y)


@register
class Softsign(Kernel):
    op_types = ('Softsign',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    def setup(self):
        self.one = const(1, self.dtype)
        self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        s = sc[0]
        np.abs(xs[0], out=s)
        np.add(s, self.one, out=s)
        np.divide(xs[0], s, out=ys[0])


# -- elementwise ops that need temporaries: processed in flat chunks so the
# scratch stays within SCRATCH_BUDGET whatever the tensor size, and read
# every input element before the output element is written (so the output
# may be the input's memory: "unary" in the in-place table).
class _Chunked(Kernel):
    """``nbuf`` chunk-sized scratch buffers; subclasses implement
    ``on_chunk(x, y, bufs)`` on matching flat slices."""
    nbuf = 1

    floats_only = True
    #: True: a float16 tensor is computed in float32 chunks (its own
    #: arithmetic loses too much on a long formula: erf(-2.7) came out
    #: -1.009), then rounded once, as onnxruntime does
    wide_halves = False

    def consts(self):
        pass

    def setup(self):
        self.runtime = (0,)
        if self.floats_only and not np.issubdtype(self.dtype, np.floating):
            self.fail(f"dtype {self.dtype} is not supported (floating point only)")
        self.work = np.dtype(np.float32) if self.wide_halves and \
            self.dtype.kind == "f" and self.dtype.itemsize < 4 else self.dtype
        self.consts()
        n = math.prod(self.oshape())
        nbuf = self.nbuf + (2 if self.work != self.dtype else 0)
        ch = items_per_step(self.scratch_budget, nbuf * self.work.itemsize, n)
        self.n, self.chunk = n, ch
        self.scratch = [((ch,), self.work)] * nbuf

    def run(self, xs, ys, sc):
        x, y = xs[0].reshape(-1), ys[0].reshape(-1)
        n, ch = self.n, self.chunk
        chunk = self.on_chunk if self.work == self.dtype else self.widened
        if n <= ch:
            chunk(x, y, sc)
            return
        for a in range(0, n, ch):
            b = min(a + ch, n)
            chunk(x[a:b], y[a:b], [s[:b - a] for s in sc])

    def widened(self, x, y, sc):
        """One chunk of a half-precision tensor in float32."""
        xw, yw = sc[-2][:x.size], sc[-1][:x.size]
        np.copyto(xw, x)
        self.on_chunk(xw, yw, [s[:x.size] for s in sc[:-2]])
        np.copyto(y, yw, casting="same_kind")


@register
class Erf(ErfMixin, _Chunked):
    op_types = ('Erf',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    evaluate = ev.ufunc(erf_values)

    nbuf = 2
    wide_halves = True

    def consts(self):
        self.erf_consts(self.work)

    def on_chunk(self, x, y, sc):
        u, t = sc
        np.copyto(u, x)
        self.erf(u, y, t)


@register
class Gelu(ErfMixin, _Chunked):
    """ONNX Gelu (opset 20): approximate="none" 0.5 x (1 + erf(x / sqrt 2)),
    "tanh" 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    op_types = ('Gelu',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same
    tflite = {'GELU': ('Gelu', {}, tfl.gelu)}
    wide_halves = True

    def consts(self):
        ap = self.attrs.get("approximate", "none")
        ap = ap.decode() if isinstance(ap, bytes) else ap
        if ap not in ("none", "tanh"):
            self.fail(f"approximate={ap!r} is not supported (none, tanh)")
        self.tanh = ap == "tanh"
        d = self.work
        self.half, self.one = const(0.5, d), const(1, d)
        self.rs2 = const(1 / math.sqrt(2), d)
        self.k3, self.k = const(0.044715, d), const(math.sqrt(2 / math.pi), d)
        self.nbuf = 1 if self.tanh else 3
        self.erf_consts(d)

    def on_chunk(self, x, y, sc):
        e = sc[0]
        if self.tanh:
            np.multiply(x, x, out=e)
            np.multiply(e, self.k3, out=e)
            np.add(e, self.one, out=e)
            np.multiply(e, x, out=e)
            np.multiply(e, self.k, out=e)
            np.tanh(e, out=e)
        else:
            u, t = sc[1], sc[2]
            np.multiply(x, self.rs2, out=u)
            self.erf(u, e, t)
        np.add(e, self.one, out=e)
        np.multiply(e, x, out=e)
        np.multiply(e, self.half, out=y)


@register
class Mish(_Chunked):
    """x tanh(softplus(x)) = x n / (n + 2) with n = e^x (e^x + 2): one exp
    instead of logaddexp and tanh (11x faster).  e^x is taken of min(x, 20):
    above, n / (n + 2) is 1 in float32 and e^2x would overflow."""

    op_types = ('Mish',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    nbuf = 2
    wide_halves = True      # (e^20 overflows float16)

    def consts(self):
        self.two, self.top = const(2, self.work), const(20, self.work)

    def on_chunk(self, x, y, sc):
        s, t = sc
        np.minimum(x, self.top, out=s)
        np.exp(s, out=s)
        np.add(s, self.two, out=t)
        np.multiply(s, t, out=s)                # n = e^x (e^x + 2)
        np.add(s, self.two, out=t)
        np.divide(s, t, out=s)
        np.multiply(x, s, out=y)


@register
class Celu(_Chunked):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""

    op_types = ('Celu',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    def consts(self):
        a = float(self.attrs.get("alpha", 1.0))
        self.alpha, self.inv = const(a, self.dtype), const(1 / a, self.dtype)
        self.zero = const(0, self.dtype)

    def on_chunk(self, x, y, sc):
        s = sc[0]
        np.minimum(x, self.zero, out=s)
        np.multiply(s, self.inv, out=s)
        np.expm1(s, out=s)
        np.multiply(s, self.alpha, out=s)
        np.maximum(x, self.zero, out=y)
        np.add(y, s, out=y)


@register
class ThresholdedRelu(_Chunked):
    """x where x > alpha, else 0 -- a select, not x * [x > alpha]: NaN and
    -Inf give 0 (as onnxruntime and the ONNX reference; the product gave
    NaN), a negative x +0."""

    op_types = ('ThresholdedRelu',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    def consts(self):
        self.alpha = const(float(self.attrs.get("alpha", 1.0)), self.dtype)
        self.zero = const(0, self.dtype)

    def on_chunk(self, x, y, sc):
        drop = sc[0].view(np.bool_)[:x.size]
        np.greater(x, self.alpha, out=drop)
        np.logical_not(drop, out=drop)
        np.copyto(y, x)
        np.copyto(y, self.zero, where=drop)


@register
class Shrink(_Chunked):
    """x - bias where x > lambd, x + bias where x < -lambd, else 0:
    with m = [x > lambd] - [x < -lambd], y = x - bias m, then 0 where
    m = 0 -- a select, so NaN gives 0 (neither comparison holds; as
    onnxruntime and the ONNX reference) and a small negative x +0."""

    op_types = ('Shrink',)
    family = 'unary'
    inplace = 'unary'
    shape_rule = rules.same

    nbuf = 2
    floats_only = False

    def consts(self):
        lam = float(self.attrs.get("lambd", 0.5))
        self.lam, self.mlam = const(lam, self.dtype), const(-lam, self.dtype)
        self.bias = const(float(self.attrs.get("bias", 0.0)), self.dtype)
        self.zero = const(0, self.dtype)

    def on_chunk(self, x, y, sc):
        m, t = sc
        np.greater(x, self.lam, out=m)
        np.less(x, self.mlam, out=t)
        np.subtract(m, t, out=m)
        np.multiply(m, self.bias, out=t)
        np.subtract(x, t, out=y)
        inside = t.view(np.bool_)[:x.size]
        np.equal(m, self.zero, out=inside)
        np.copyto(y, self.zero, where=inside)


@register
class Rsqrt(Kernel):
    """TFLite RSQRT: 1 / sqrt(x), two in-place passes."""

    op_types = ('Rsqrt',)
    family = 'unary'
    inplace = 'unary'
    tflite = {'RSQRT': ('Rsqrt', {})}

    def run(self, xs, ys, sc):
        np.sqrt(xs[0], out=ys[0])
        np.reciprocal(ys[0], out=ys[0])


@register
class SquaredDifference(Kernel):
    """TFLite SQUARED_DIFFERENCE: (a - b)^2 with broadcasting; the output may
    be a same-shaped input (each element is read before it is written)."""

    op_types = ('SquaredDifference',)
    family = 'binary'
    inplace = 'binary'
    tflite = {'SQUARED_DIFFERENCE': ('SquaredDifference', {})}

    def run(self, xs, ys, sc):
        np.subtract(xs[0], xs[1], out=ys[0])
        np.square(ys[0], out=ys[0])

_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Pow": np.power, "Max": np.maximum, "Min": np.minimum, "Sum": np.add}


@register
class Elementwise(Kernel):
    """Add/Sub/Mul/Div/Pow and the variadic Sum/Max/Min/Mean, with NumPy
    (= ONNX multidirectional) broadcasting.  If the output aliases an input
    it is the same-shaped one, and every step reads each element of that
    input before writing it."""

    op_types = (*_BINARY, "Mean")
    family = 'binary'
    inplace = 'binary'
    shape_rule = rules.bcast
    evaluate = {'Add': ev.arith(np.add), 'Sub': ev.arith(np.subtract),
                'Mul': ev.arith(np.multiply), 'Div': ev.arith(np.divide), 'Pow': ev.power,
                'Max': ev.extreme(np.maximum), 'Min': ev.extreme(np.minimum)}
    # with a constant scalar operand, 8-bit in QDQ models: a lookup table
    qdq = {t: 'lookup' for t in ('Add', 'Sub', 'Mul', 'Div', 'Pow')}
    tflite = {
        'ADD': ('Add', {}, tfl.arithmetic),
        'SUB': ('Sub', {}, tfl.arithmetic),
        'MUL': ('Mul', {}, tfl.arithmetic),
        'DIV': ('Div', {}, tfl.arithmetic),
        'MAXIMUM': ('Max', {}),
        'MINIMUM': ('Min', {})}

    def setup(self):
        t = self.op.op_type
        self.f = _BINARY.get(t, np.add)
        n = len([i for i in self.ins if i is not None])
        if n < 1:
            self.fail("needs at least one input")
        if t in ("Add", "Sub", "Mul", "Div", "Pow") and n != 2:
            self.fail(f"expects 2 inputs, got {n}")
        self.mean = const(1.0 / n, self.dtype) if t == "Mean" else None
        if self.dtype.kind == "u" and t == "Div":
            self.f = np.floor_divide    # (unsigned: floor is truncation)
        self.special = None             # special(a, b, y, scratch)
        if self.dtype.kind == "i" and t == "Div":   # toward zero (ONNX): -7 / 2 = -3
            self.special, self.scratch = ev.trunc_divide, [(self.oshape(), self.dtype)]
        elif t == "Pow" and self.dtype.kind in "iu" and np.dtype(self.ins[1].dtype).kind == "f":
            self.special, self.scratch = ev.wide_power, [(self.oshape(), np.float64)]
        # two operands, none omitted: one ufunc call (the common case, first)
        self.binary = n == 2 and len(self.ins) == 2 and self.mean is None and \
            self.special is None
        plan = row_plan(self.shape(0), self.shape(1), self.oshape()) if self.binary and \
            t == "Add" and self.dtype == np.float32 and self.use_native else None
        self.rows = None if plan is None else RowAdd(plan)

    native_calls = add_calls        # a float32 Add: one C record (binary_native.py)

    def run(self, xs, ys, sc):
        if self.binary:
            if self.rows is None or not self.rows.run(xs[0], xs[1], ys[0], self.workers):
                self.f(xs[0], xs[1], out=ys[0])
            return
        y = ys[0]
        xs = [x for x in xs if x is not None]
        if self.special is not None:
            self.special(xs[0], xs[1], y, sc[0])
            return
        f = self.f
        if len(xs) == 1:
            np.copyto(y, xs[0])
        elif len(xs) == 2:
            f(xs[0], xs[1], out=y)
        else:
            # variadic: y may alias one input; fold that one in first
            first = 0
            for i, x in enumerate(xs):
                if x.shape == y.shape and np.may_share_memory(x, y):
                    first = i
                    break
            rest = xs[:first] + xs[first + 1:]
            f(xs[first], rest[0], out=y)
            for x in rest[1:]:
                f(y, x, out=y)
        if self.mean is not None:
            np.multiply(y, self.mean, out=y)
