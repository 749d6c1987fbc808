"""NumPy operator kernels that write into memory they are given.

Every kernel is a class built once per operator (``make_kernel``) from the
operator and its tensors (shapes, dtypes, constant values).  At build time
it works out everything that does not depend on the data -- padding, output
windows, folded BatchNorm factors, resize indices -- and the workspace it
needs (``scratch_bytes``).  At run time ``kernel(xs, ys, scratch)`` gets the
input arrays, the output arrays and a ``uint8`` scratch array and writes its
results into ``ys`` with ``out=`` arguments, ``np.copyto`` and views, so a
steady-state inference performs no NumPy data allocation.

Aliasing contract (the planner's in-place rules, ``pyarena.inplace``):
elementwise "unary" kernels (Relu, Clip, Sigmoid, BatchNormalization ...)
stay correct when ``ys[0]`` is the very memory of ``xs[0]``; "binary"
kernels (Add, Sub, Mul, Div ...) when ``ys[0]`` is one same-shaped input;
"alias" kernels (Reshape, Flatten, Squeeze, Unsqueeze, Identity, Dropout)
copy nothing when the output already is the input's memory.  Kernels that
would otherwise overwrite an input they still read take a scratch buffer
(LeakyRelu, PRelu, HardSwish).

Layouts: ONNX is NCHW.  TFLite graphs keep NHWC (attribute
``layout="NHWC"``) and TFLite weight layouts (conv ``OHWI``, depthwise
``1HWC``); the conv/pool/resize kernels handle both, so no weight or
activation is transposed at import time.

Scratch sizes are computed here, not guessed elsewhere: ``scratch_bytes_for``
is what the importers put in ``Op.scratch_bytes``.
"""
import math

import numpy as np

from .graph import GraphError

__all__ = ["KERNELS", "make_kernel", "scratch_bytes_for", "supported_ops",
           "UnsupportedOpError", "Kernel"]

_ALIGN = 64


class UnsupportedOpError(GraphError):
    """An operator (or an attribute value of one) the executor cannot run.
    The message names every offending operator."""


KERNELS = {}


def register(*names):
    def deco(cls):
        for n in names:
            KERNELS[n] = cls
        return cls
    return deco


def supported_ops():
    return sorted(KERNELS)


def _c(value, dtype=np.float32):
    """A 0-d array: a ufunc operand that converts nothing at run time."""
    return np.array(value, dtype=dtype)


def _layout_size(specs):
    off = 0
    for shape, dtype in specs:
        off = -(-off // _ALIGN) * _ALIGN
        off += math.prod(shape) * np.dtype(dtype).itemsize
    return off


def _carve(scratch, specs):
    """Views of ``scratch`` for each (shape, dtype), 64-byte aligned."""
    out = []
    off = 0
    for shape, dtype in specs:
        off = -(-off // _ALIGN) * _ALIGN
        n = math.prod(shape) * np.dtype(dtype).itemsize
        out.append(scratch[off:off + n].view(dtype).reshape(shape))
        off += n
    return out


class Kernel:
    """Base class: ``self.op``, ``self.ins`` / ``self.outs`` (graph Tensors,
    None for an omitted optional input), ``self.attrs``; subclasses set
    ``self.scratch`` (list of (shape, dtype)) in ``setup`` and implement
    ``run(xs, ys, sc)`` where ``sc`` is the list of scratch views."""

    def __init__(self, op, ins, outs, keep=None):
        self.op = op
        self.ins = ins
        self.outs = outs
        self.attrs = op.attrs
        self.keep = keep or (lambda a: a)   # puts derived constants in the weights arena
        self.scratch = []
        self.runtime = None    # input indices read at run time (None: all)
        self.dtype = np.dtype(outs[0].dtype) if outs else np.dtype(np.float32)
        self.setup()
        act = self.attrs.get("activation")
        self._act = None
        if act not in (None, "", "NONE"):
            self._act = _fused_activation(op, act, self.dtype)

    # helpers -----------------------------------------------------------
    def fail(self, why):
        raise UnsupportedOpError(f"operator {self.op.name!r} ({self.op.op_type}): {why}")

    def shape(self, i):
        t = self.ins[i]
        return tuple(int(d) for d in t.shape)

    def oshape(self, i=0):
        return tuple(int(d) for d in self.outs[i].shape)

    def const(self, i, what="input"):
        """The constant value of input ``i`` (GraphError if it is computed)."""
        if i >= len(self.ins) or self.ins[i] is None:
            return None
        t = self.ins[i]
        if t.data is None:
            self.fail(f"{what} {t.name!r} must be a constant")
        return np.asarray(t.data)

    def has(self, i):
        return i < len(self.ins) and self.ins[i] is not None

    @property
    def scratch_bytes(self):
        return _layout_size(self.scratch) if self.scratch else 0

    def setup(self):
        pass

    def __call__(self, xs, ys, scratch=None):
        sc = _carve(scratch, self.scratch) if self.scratch else ()
        self.run(xs, ys, sc)
        if self._act is not None:
            self._act(ys[0])

    def run(self, xs, ys, sc):
        raise NotImplementedError


def _fused_activation(op, act, dtype):
    act = str(act).upper()
    zero, six, one, mone = _c(0, dtype), _c(6, dtype), _c(1, dtype), _c(-1, dtype)
    if act == "RELU":
        return lambda y: np.maximum(y, zero, out=y)
    if act == "RELU6":
        return lambda y: (np.maximum(y, zero, out=y), np.minimum(y, six, out=y))
    if act in ("RELU_N1_TO_1", "RELU1"):
        return lambda y: (np.maximum(y, mone, out=y), np.minimum(y, one, out=y))
    if act == "TANH":
        return lambda y: np.tanh(y, out=y)
    raise UnsupportedOpError(f"operator {op.name!r}: fused activation {act!r} is not supported")


# ---------------------------------------------------------------------------
# elementwise
# ---------------------------------------------------------------------------
@register("Relu")
class Relu(Kernel):
    def setup(self):
        self.zero = _c(0, self.dtype)

    def run(self, xs, ys, sc):
        np.maximum(xs[0], self.zero, out=ys[0])


@register("Clip", "Relu6")
class Clip(Kernel):
    def setup(self):
        self.runtime = (0,)
        lo = self.attrs.get("min")
        hi = self.attrs.get("max")
        if self.op.op_type == "Relu6":
            lo, hi = 0.0, 6.0
        if self.has(1):
            lo = float(self.const(1, "min"))
        if self.has(2):
            hi = float(self.const(2, "max"))
        self.lo = None if lo is None else _c(lo, self.dtype)
        self.hi = None if hi is None else _c(hi, self.dtype)

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if self.lo is not None:
            np.maximum(x, self.lo, out=y)
            x = y
        if self.hi is not None:
            np.minimum(x, self.hi, out=y)
        elif self.lo is None:
            np.copyto(y, x)


def _unary(name, fn):
    @register(name)
    class _U(Kernel):
        def run(self, xs, ys, sc):
            fn(xs[0], out=ys[0])
    _U.__name__ = name
    return _U


for _n, _f in (("Tanh", np.tanh), ("Exp", np.exp), ("Log", np.log), ("Sqrt", np.sqrt),
               ("Neg", np.negative), ("Abs", np.abs), ("Reciprocal", np.reciprocal),
               ("Floor", np.floor), ("Ceil", np.ceil), ("Sin", np.sin), ("Cos", np.cos)):
    _unary(_n, _f)


@register("Sigmoid", "Logistic")
class Sigmoid(Kernel):
    def setup(self):
        self.one = _c(1, self.dtype)

    def run(self, xs, ys, sc):
        y = ys[0]
        np.negative(xs[0], out=y)
        np.exp(y, out=y)
        np.add(y, self.one, out=y)
        np.reciprocal(y, out=y)


@register("HardSigmoid")
class HardSigmoid(Kernel):
    def setup(self):
        self.a = _c(self.attrs.get("alpha", 0.2), self.dtype)
        self.b = _c(self.attrs.get("beta", 0.5), self.dtype)
        self.zero, self.one = _c(0, self.dtype), _c(1, self.dtype)

    def run(self, xs, ys, sc):
        y = ys[0]
        np.multiply(xs[0], self.a, out=y)
        np.add(y, self.b, out=y)
        np.maximum(y, self.zero, out=y)
        np.minimum(y, self.one, out=y)


@register("HardSwish")
class HardSwish(Kernel):
    def setup(self):
        self.a, self.b = _c(1 / 6, self.dtype), _c(0.5, self.dtype)
        self.zero, self.one = _c(0, self.dtype), _c(1, self.dtype)
        self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        x, s = xs[0], sc[0]
        np.multiply(x, self.a, out=s)
        np.add(s, self.b, out=s)
        np.maximum(s, self.zero, out=s)
        np.minimum(s, self.one, out=s)
        np.multiply(x, s, out=ys[0])


@register("LeakyRelu", "PRelu")
class LeakyRelu(Kernel):
    """y = max(x, 0) + slope * min(x, 0); the negative part goes to scratch
    first so ``y`` may be ``x``."""

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
            self.slope = _c(self.attrs.get("alpha", 0.01), self.dtype)
        self.zero = _c(0, self.dtype)
        self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        x, s, y = xs[0], sc[0], ys[0]
        np.minimum(x, self.zero, out=s)
        np.multiply(s, self.slope, out=s)
        np.maximum(x, self.zero, out=y)
        np.add(y, s, out=y)


@register("Softplus")
class Softplus(Kernel):
    def setup(self):
        self.zero = _c(0, self.dtype)

    def run(self, xs, ys, sc):
        np.logaddexp(xs[0], self.zero, out=ys[0])


@register("Elu", "Selu")
class Elu(Kernel):
    """y = scale * (max(x, 0) + alpha * (exp(min(x, 0)) - 1)); the negative
    part is built in scratch first so ``y`` may be ``x``."""

    def setup(self):
        selu = self.op.op_type == "Selu"
        alpha = self.attrs.get("alpha", 1.6732632423543772 if selu else 1.0)
        gamma = self.attrs.get("gamma", 1.0507009873554805 if selu else 1.0)
        self.alpha, self.gamma = _c(alpha, self.dtype), _c(gamma, self.dtype)
        self.selu = selu
        self.zero, self.one = _c(0, self.dtype), _c(1, self.dtype)
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


@register("Softsign")
class Softsign(Kernel):
    def setup(self):
        self.one = _c(1, self.dtype)
        self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        s = sc[0]
        np.abs(xs[0], out=s)
        np.add(s, self.one, out=s)
        np.divide(xs[0], s, out=ys[0])


_unary("Sign", np.sign)


# -- elementwise ops that need temporaries: processed in flat chunks so the
# scratch stays within SCRATCH_BUDGET whatever the tensor size, and read
# every input element before the output element is written (so the output
# may be the input's memory: "unary" in the in-place table).
class _Chunked(Kernel):
    """``nbuf`` chunk-sized scratch buffers; subclasses implement
    ``step(x, y, bufs)`` on matching flat slices."""
    nbuf = 1

    floats_only = True

    def consts(self):
        pass

    def setup(self):
        self.runtime = (0,)
        if self.floats_only and not np.issubdtype(self.dtype, np.floating):
            self.fail(f"dtype {self.dtype} is not supported (floating point only)")
        self.consts()
        n = math.prod(self.oshape())
        ch = max(1, min(n, int(SCRATCH_BUDGET) // max(1, self.nbuf * self.dtype.itemsize)))
        self.n, self.chunk = n, ch
        self.scratch = [((ch,), self.dtype)] * self.nbuf

    def run(self, xs, ys, sc):
        x, y = xs[0].reshape(-1), ys[0].reshape(-1)
        n, ch = self.n, self.chunk
        if n <= ch:
            self.step(x, y, sc)
            return
        for a in range(0, n, ch):
            b = min(a + ch, n)
            self.step(x[a:b], y[a:b], [s[:b - a] for s in sc])


# erf(x) = x P(x^2) / Q(x^2) on x clamped to [-4, 4] (outside, erf is +-1 in
# float32): the rational approximation Eigen uses for float; max abs error
# 4.2e-7 against math.erf on [-6, 6] (tests/test_kernels.py checks it).
_ERF_P = (-2.72614225801306e-10, 2.77068142495902e-08, -2.10102402082508e-06,
          -5.69250639462346e-05, -7.34990630326855e-04, -2.95459980854025e-03,
          -1.60960333262415e-02)
_ERF_Q = (-1.45660718464996e-05, -2.13374055278905e-04, -1.68282697438203e-03,
          -7.37332916720468e-03, -1.42647390514189e-02)


class _ErfMixin:
    def erf_consts(self):
        d = self.dtype
        self.ep = [_c(v, d) for v in _ERF_P]
        self.eq = [_c(v, d) for v in _ERF_Q]
        self.four, self.mfour = _c(4, d), _c(-4, d)

    def erf(self, u, e, t):
        """e = erf(u) where u is a buffer it may overwrite; t: a temporary."""
        np.minimum(u, self.four, out=u)
        np.maximum(u, self.mfour, out=u)
        np.multiply(u, u, out=t)                   # t = x^2
        np.multiply(t, self.ep[0], out=e)
        np.add(e, self.ep[1], out=e)
        for c in self.ep[2:]:
            np.multiply(e, t, out=e)
            np.add(e, c, out=e)
        np.multiply(e, u, out=e)                   # e = x P(x^2)
        np.multiply(t, self.eq[0], out=u)
        np.add(u, self.eq[1], out=u)
        for c in self.eq[2:]:
            np.multiply(u, t, out=u)
            np.add(u, c, out=u)
        np.divide(e, u, out=e)


@register("Erf")
class Erf(_ErfMixin, _Chunked):
    nbuf = 2

    def consts(self):
        self.erf_consts()

    def step(self, x, y, sc):
        u, t = sc
        np.copyto(u, x)
        self.erf(u, y, t)


@register("Gelu")
class Gelu(_ErfMixin, _Chunked):
    """ONNX Gelu (opset 20): approximate="none" 0.5 x (1 + erf(x / sqrt 2)),
    "tanh" 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))."""

    def consts(self):
        ap = self.attrs.get("approximate", "none")
        ap = ap.decode() if isinstance(ap, bytes) else ap
        if ap not in ("none", "tanh"):
            self.fail(f"approximate={ap!r} is not supported (none, tanh)")
        self.tanh = ap == "tanh"
        d = self.dtype
        self.half, self.one = _c(0.5, d), _c(1, d)
        self.rs2 = _c(1 / math.sqrt(2), d)
        self.k3, self.k = _c(0.044715, d), _c(math.sqrt(2 / math.pi), d)
        self.nbuf = 1 if self.tanh else 3
        self.erf_consts()

    def step(self, x, y, sc):
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


@register("Mish")
class Mish(_Chunked):
    """x tanh(softplus(x))."""

    def consts(self):
        self.zero = _c(0, self.dtype)

    def step(self, x, y, sc):
        s = sc[0]
        np.logaddexp(x, self.zero, out=s)
        np.tanh(s, out=s)
        np.multiply(x, s, out=y)


@register("Celu")
class Celu(_Chunked):
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""

    def consts(self):
        a = float(self.attrs.get("alpha", 1.0))
        self.alpha, self.inv = _c(a, self.dtype), _c(1 / a, self.dtype)
        self.zero = _c(0, self.dtype)

    def step(self, x, y, sc):
        s = sc[0]
        np.minimum(x, self.zero, out=s)
        np.multiply(s, self.inv, out=s)
        np.expm1(s, out=s)
        np.multiply(s, self.alpha, out=s)
        np.maximum(x, self.zero, out=y)
        np.add(y, s, out=y)


@register("ThresholdedRelu")
class ThresholdedRelu(_Chunked):
    """x where x > alpha, else 0."""

    def consts(self):
        self.alpha = _c(float(self.attrs.get("alpha", 1.0)), self.dtype)

    def step(self, x, y, sc):
        s = sc[0]
        np.greater(x, self.alpha, out=s)
        np.multiply(x, s, out=y)


@register("Shrink")
class Shrink(_Chunked):
    """x - bias where x > lambd, x + bias where x < -lambd, else 0:
    with m = [x > lambd] - [x < -lambd], y = (x - bias m) |m|."""
    nbuf = 2
    floats_only = False

    def consts(self):
        lam = float(self.attrs.get("lambd", 0.5))
        self.lam, self.mlam = _c(lam, self.dtype), _c(-lam, self.dtype)
        self.bias = _c(float(self.attrs.get("bias", 0.0)), self.dtype)

    def step(self, x, y, sc):
        m, t = sc
        np.greater(x, self.lam, out=m)
        np.less(x, self.mlam, out=t)
        np.subtract(m, t, out=m)
        np.multiply(m, self.bias, out=t)
        np.subtract(x, t, out=t)
        np.abs(m, out=m)
        np.multiply(t, m, out=y)


_unary("Round", np.rint)     # ONNX Round: half to even, like rint
_unary("Square", np.square)  # TFLite SQUARE


@register("Rsqrt")
class Rsqrt(Kernel):
    """TFLite RSQRT: 1 / sqrt(x), two in-place passes."""

    def run(self, xs, ys, sc):
        np.sqrt(xs[0], out=ys[0])
        np.reciprocal(ys[0], out=ys[0])


@register("SquaredDifference")
class SquaredDifference(Kernel):
    """TFLite SQUARED_DIFFERENCE: (a - b)^2 with broadcasting; the output may
    be a same-shaped input (each element is read before it is written)."""

    def run(self, xs, ys, sc):
        np.subtract(xs[0], xs[1], out=ys[0])
        np.square(ys[0], out=ys[0])


@register("Tile")
class Tile(Kernel):
    """y viewed as (r0, d0, r1, d1, ...) gets x broadcast over the r axes."""

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        reps = [y // x if x else 1 for x, y in zip(xs, ys)]
        self.yview = tuple(v for r, d in zip(reps, xs) for v in (r, d))
        self.xview = tuple(v for d in xs for v in (1, d))

    def run(self, xs, ys, sc):
        np.copyto(ys[0].reshape(self.yview), xs[0].reshape(self.xview))


@register("InstanceNormalization")
class InstanceNorm(Kernel):
    """Per (image, channel) mean/variance over the spatial axes; scratch:
    the two statistics and one centred copy."""

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        n, c = xs[:2]
        self.view = (n, c, math.prod(xs[2:]))
        self.eps = _c(float(self.attrs.get("epsilon", 1e-5)), self.dtype)
        self.inv = _c(1.0 / max(self.view[2], 1), self.dtype)
        self.g = self.keep(self.const(1, "scale").astype(self.dtype).reshape(1, c, 1))
        self.b = self.keep(self.const(2, "bias").astype(self.dtype).reshape(1, c, 1))
        self.scratch = [((n, c, 1), self.dtype), ((n, c, 1), self.dtype),
                        (self.view, self.dtype)]

    def run(self, xs, ys, sc):
        m, v, d = sc
        x = xs[0].reshape(self.view)
        y = ys[0].reshape(self.view)
        np.add.reduce(x, axis=2, out=m, keepdims=True)
        np.multiply(m, self.inv, out=m)
        np.subtract(x, m, out=d)
        np.multiply(d, d, out=y)
        np.add.reduce(y, axis=2, out=v, keepdims=True)
        np.multiply(v, self.inv, out=v)
        np.add(v, self.eps, out=v)
        np.sqrt(v, out=v)
        np.divide(d, v, out=y)
        np.multiply(y, self.g, out=y)
        np.add(y, self.b, out=y)


_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide,
           "Pow": np.power, "Max": np.maximum, "Min": np.minimum, "Sum": np.add}


@register(*_BINARY, "Mean")
class Elementwise(Kernel):
    """Add/Sub/Mul/Div/Pow and the variadic Sum/Max/Min/Mean, with NumPy
    (= ONNX multidirectional) broadcasting.  If the output aliases an input
    it is the same-shaped one, and every step reads each element of that
    input before writing it."""

    def setup(self):
        t = self.op.op_type
        self.f = _BINARY.get(t, np.add)
        n = len([i for i in self.ins if i is not None])
        if n < 1:
            self.fail("needs at least one input")
        if t in ("Add", "Sub", "Mul", "Div", "Pow") and n != 2:
            self.fail(f"expects 2 inputs, got {n}")
        self.mean = _c(1.0 / n, self.dtype) if t == "Mean" else None
        if np.issubdtype(self.dtype, np.integer) and t == "Div":
            self.f = np.floor_divide  # ONNX integer division (positive operands)

    def run(self, xs, ys, sc):
        y = ys[0]
        xs = [x for x in xs if x is not None]
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


@register("BatchNormalization")
class BatchNorm(Kernel):
    """Inference BatchNorm folded at build time into y = x * scale + shift
    (per channel, axis 1); two in-place-safe ufunc passes."""

    def setup(self):
        self.runtime = (0,)
        if len([o for o in self.op.outputs if o]) > 1:
            self.fail("training-mode outputs (running mean/var) are not supported")
        g = self.const(1, "scale").astype(np.float64)
        b = self.const(2, "bias").astype(np.float64)
        m = self.const(3, "mean").astype(np.float64)
        v = self.const(4, "var").astype(np.float64)
        eps = float(self.attrs.get("epsilon", 1e-5))
        scale = g / np.sqrt(v + eps)
        shift = b - m * scale
        nd = len(self.shape(0))
        bshape = (-1,) + (1,) * (nd - 2)
        self.scale = self.keep(scale.astype(self.dtype).reshape(bshape))
        self.shift = self.keep(shift.astype(self.dtype).reshape(bshape))

    def run(self, xs, ys, sc):
        y = ys[0]
        np.multiply(xs[0], self.scale, out=y)
        np.add(y, self.shift, out=y)


@register("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout")
class Alias(Kernel):
    """Copies nothing when the planner made the output the input's memory."""

    def setup(self):
        self.runtime = (0,)
        outs = [o for o in self.op.outputs if o]
        if len(outs) > 1:
            self.fail("the mask output is not supported")

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if x.size and y.size and x.__array_interface__["data"][0] == \
                y.__array_interface__["data"][0]:
            return
        np.copyto(y, x.reshape(y.shape))


@register("Cast")
class Cast(Kernel):
    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0], casting="unsafe")


@register("Expand")
class Expand(Kernel):
    def setup(self):
        self.runtime = (0,)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0])   # copyto broadcasts


@register("Transpose")
class Transpose(Kernel):
    def setup(self):
        self.runtime = (0,)
        nd = len(self.shape(0))
        perm = self.attrs.get("perm")
        if self.has(1):
            perm = self.const(1, "perm")
        self.perm = tuple(int(p) for p in perm) if perm is not None else \
            tuple(range(nd - 1, -1, -1))

    def run(self, xs, ys, sc):
        x, y = xs[0], ys[0]
        if x.size and x.__array_interface__["data"][0] == y.__array_interface__["data"][0]:
            return   # the planner made it a view: only size-1 axes move
        np.copyto(y, x.transpose(self.perm))


@register("Concat", "Concatenation")
class Concat(Kernel):
    def setup(self):
        nd = len(self.oshape())
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        self.bounds = []
        off = 0
        for t in self.ins:
            if t is None:
                self.bounds.append(None)
                continue
            n = int(t.shape[self.axis])
            self.bounds.append((off, off + n))
            off += n

    def run(self, xs, ys, sc):
        y = ys[0]
        pre = (slice(None),) * self.axis
        for x, b in zip(xs, self.bounds):
            if b is not None and b[1] > b[0]:
                np.copyto(y[pre + (slice(b[0], b[1]),)], x)


@register("Split")
class Split(Kernel):
    def setup(self):
        self.runtime = (0,)
        nd = len(self.shape(0))
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        self.bounds = []
        off = 0
        for t in self.outs:
            n = int(t.shape[self.axis])
            self.bounds.append((off, off + n))
            off += n

    def run(self, xs, ys, sc):
        pre = (slice(None),) * self.axis
        for y, b in zip(ys, self.bounds):
            np.copyto(y, xs[0][pre + (slice(*b),)])


@register("Slice")
class Slice(Kernel):
    def setup(self):
        self.runtime = (0,)
        shp = self.shape(0)
        if self.has(1):
            starts = self.const(1, "starts")
            ends = self.const(2, "ends")
            axes = self.const(3, "axes") if self.has(3) else range(len(starts))
            steps = self.const(4, "steps") if self.has(4) else [1] * len(starts)
        else:
            starts, ends = self.attrs["starts"], self.attrs["ends"]
            axes = self.attrs.get("axes", range(len(starts)))
            steps = [1] * len(starts)
        sl = [slice(None)] * len(shp)
        for s, e, a, st in zip(starts, ends, axes, steps):
            a = int(a) + len(shp) if int(a) < 0 else int(a)
            s, e, st = int(s), int(e), int(st)
            n = shp[a]
            s = max(-n - 1, min(s, n + 1)) if abs(s) > n else s
            e = max(-n - 1, min(e, n + 1)) if abs(e) > n else e
            sl[a] = slice(s, e, st)
        self.sl = tuple(sl)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0][self.sl])


@register("Gather")
class Gather(Kernel):
    def setup(self):
        nd = len(self.shape(0))
        ax = int(self.attrs.get("axis", 0))
        self.axis = ax + nd if ax < 0 else ax
        if self.ins[1].data is not None:
            self.idx = self.keep(np.asarray(self.ins[1].data).astype(np.intp))
            self.runtime = (0,)
        else:
            self.idx = None

    def run(self, xs, ys, sc):
        idx = self.idx if self.idx is not None else xs[1]
        np.take(xs[0], idx, axis=self.axis, out=ys[0], mode="wrap")


# ---------------------------------------------------------------------------
# matrix products
# ---------------------------------------------------------------------------
@register("MatMul")
class MatMul(Kernel):
    def run(self, xs, ys, sc):
        np.matmul(xs[0], xs[1], out=ys[0])


@register("Gemm")
class Gemm(Kernel):
    def setup(self):
        self.ta = int(self.attrs.get("transA", 0))
        self.tb = int(self.attrs.get("transB", 0))
        alpha = float(self.attrs.get("alpha", 1.0))
        beta = float(self.attrs.get("beta", 1.0))
        self.alpha = None if alpha == 1.0 else _c(alpha, self.dtype)
        self.c = None
        self.beta = None
        if self.has(2):
            if self.ins[2].data is not None:
                c = np.asarray(self.ins[2].data, dtype=self.dtype) * beta
                self.c = self.keep(np.ascontiguousarray(c))
                self.runtime = (0, 1)
            else:
                self.beta = _c(beta, self.dtype) if beta != 1.0 else None
                if self.beta is not None:
                    self.scratch = [(self.oshape(), self.dtype)]

    def run(self, xs, ys, sc):
        a, b, y = xs[0], xs[1], ys[0]
        if self.ta:
            a = a.T
        if self.tb:
            b = b.T
        np.matmul(a, b, out=y)
        if self.alpha is not None:
            np.multiply(y, self.alpha, out=y)
        if self.c is not None:
            np.add(y, self.c, out=y)
        elif self.has(2):
            c = xs[2]
            if self.beta is not None:
                np.multiply(np.broadcast_to(c, y.shape), self.beta, out=sc[0])
                c = sc[0]
            np.add(y, c, out=y)


@register("FullyConnected")
class FullyConnected(Kernel):
    """TFLite FULLY_CONNECTED: y = x.reshape(-1, K) @ W.T + b, W (units, K)."""

    def setup(self):
        self.units, self.k = self.shape(1)
        n = math.prod(self.shape(0))
        if n % self.k:
            self.fail(f"input size {n} is not a multiple of {self.k}")
        self.rows = n // self.k

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.rows, self.k)
        y = ys[0].reshape(self.rows, self.units)
        np.matmul(x, xs[1].T, out=y)
        if len(xs) > 2 and xs[2] is not None:
            np.add(y, xs[2], out=y)


# ---------------------------------------------------------------------------
# convolution and pooling
# ---------------------------------------------------------------------------
def _pads_for(attrs, in_sp, k_sp, strides, dil, out_sp=None):
    """Explicit (begin..., end...) pads from ONNX pads / auto_pad."""
    nd = len(in_sp)
    auto = attrs.get("auto_pad", "NOTSET")
    if isinstance(auto, bytes):
        auto = auto.decode()
    if auto in ("SAME_UPPER", "SAME_LOWER"):
        pads = [0] * (2 * nd)
        for i in range(nd):
            o = -(-in_sp[i] // strides[i])
            total = max(0, (o - 1) * strides[i] + (k_sp[i] - 1) * dil[i] + 1 - in_sp[i])
            small, big = total // 2, total - total // 2
            pads[i], pads[i + nd] = (small, big) if auto == "SAME_UPPER" else (big, small)
        return pads
    if auto == "VALID":
        return [0] * (2 * nd)
    p = attrs.get("pads")
    return [int(v) for v in p] if p is not None else [0] * (2 * nd)


# Workspace of one conv / pool call is bounded: the output is produced in
# bands of rows, each band reading only the (padded) input rows it needs.
# A larger budget means fewer Python-level steps, a smaller one a smaller
# arena; 1 MiB keeps MobileNet-class nets' scratch below their activations.
SCRATCH_BUDGET = 1 << 20


class _Spatial(Kernel):
    """Shared geometry for Conv / pooling in NCHW or NHWC (1-D or 2-D),
    processed in bands of output rows (see SCRATCH_BUDGET)."""

    def geometry(self, k_sp, pad_value=0.0):
        xs = self.shape(0)
        ys = self.oshape()
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        nsp = len(xs) - 2
        if nsp not in (1, 2):
            self.fail(f"{nsp}-D spatial input {list(xs)} is not supported (1-D or 2-D)")
        if self.nhwc:
            sp_in, sp_out = list(xs[1:-1]), list(ys[1:-1])
            self.c_in = xs[-1]
        else:
            sp_in, sp_out = list(xs[2:]), list(ys[2:])
            self.c_in = xs[1]
        strides = [int(s) for s in self.attrs.get("strides", [1] * nsp)]
        dil = [int(d) for d in self.attrs.get("dilations", [1] * nsp)]
        pads = _pads_for(self.attrs, sp_in, k_sp, strides, dil)
        if nsp == 1:   # treat 1-D as 2-D with H = 1
            sp_in, sp_out, k_sp = [1] + sp_in, [1] + sp_out, [1] + list(k_sp)
            strides, dil = [1] + strides, [1] + dil
            pads = [0, pads[0], 0, pads[1]]
        self.nsp = nsp
        self.N = xs[0]
        self.H, self.W = sp_in
        self.Ho, self.Wo = sp_out
        self.kh, self.kw = k_sp
        self.sh, self.sw = strides
        self.dh, self.dw = dil
        pt, pl, pb, pr = pads
        need_h = (self.Ho - 1) * self.sh + (self.kh - 1) * self.dh + 1
        need_w = (self.Wo - 1) * self.sw + (self.kw - 1) * self.dw + 1
        # rows/cols read past the end (ceil_mode) count as padding
        self.Hp = max(self.H + pt + pb, need_h)
        self.Wp = max(self.W + pl + pr, need_w)
        self.pt, self.pl, self.pb, self.pr = pt, pl, pb, pr
        self.padded = (self.Hp, self.Wp) != (self.H, self.W) or pt or pl
        self.pad_value = _c(pad_value, self.dtype)
        if self.Ho <= 0 or self.Wo <= 0 or self.kh <= 0 or self.kw <= 0:
            self.fail(f"inconsistent output shape {list(ys)} for input {list(xs)}")
        self.bands = [(0, self.Ho)]
        self.band_rows = self.Ho

    def rows_in(self, nr):
        """Input rows (padded coordinates) feeding ``nr`` output rows."""
        return (nr - 1) * self.sh + (self.kh - 1) * self.dh + 1

    def plan_bands(self, extra_per_row=0, channels=None):
        """Split the output rows into bands whose scratch (padded input
        rows + ``extra_per_row`` bytes per output row) fits the budget."""
        c = self.c_in if channels is None else channels
        isz = self.dtype.itemsize
        pad_row = c * self.Wp * isz if self.padded else 0

        def need(nr):
            return pad_row * self.rows_in(nr) + extra_per_row * nr

        budget = int(self.attrs.get("_scratch_budget", SCRATCH_BUDGET))
        nr = self.Ho
        if need(nr) > budget:
            per = pad_row * self.sh + extra_per_row
            nr = (budget - pad_row * (self.rows_in(1) - self.sh)) // max(per, 1)
            nr = int(max(1, min(self.Ho, nr)))
        self.band_rows = nr
        self.bands = [(r0, min(r0 + nr, self.Ho)) for r0 in range(0, self.Ho, nr)]
        return nr

    def x4(self, x):
        """Input as 4-D (N, C, H, W) or (N, H, W, C)."""
        if self.nsp == 1:
            return x.reshape((self.N, 1, self.W, self.c_in) if self.nhwc else
                             (self.N, self.c_in, 1, self.W))
        return x

    def y4(self, y):
        if self.nsp == 1:
            c = y.shape[-1] if self.nhwc else y.shape[1]
            return y.reshape((self.N, 1, self.Wo, c) if self.nhwc else
                             (self.N, c, 1, self.Wo))
        return y

    def pad_spec(self, channels=None):
        if not self.padded:
            return []
        c = self.c_in if channels is None else channels
        rows = self.rows_in(self.band_rows)
        if self.nhwc:
            return [((rows, self.Wp, c), self.dtype)]
        return [((c, rows, self.Wp), self.dtype)]

    def band_src(self, xn, buf, r0, r1):
        """The input rows output rows [r0, r1) read, padded: a view whose
        row 0 is padded row ``r0 * sh``."""
        a = r0 * self.sh
        nrows = self.rows_in(r1 - r0)
        if buf is None:
            return xn[a:a + nrows] if self.nhwc else xn[:, a:a + nrows]
        pt, pl, H, W = self.pt, self.pl, self.H, self.W
        t0 = min(max(0, pt - a), nrows)
        t1 = max(min(nrows, pt + H - a), t0)
        v = self.pad_value
        if self.nhwc:
            b = buf[:nrows]
            b[:t0].fill(v)
            b[t1:].fill(v)
            b[t0:t1, :pl].fill(v)
            b[t0:t1, pl + W:].fill(v)
            if t1 > t0:
                np.copyto(b[t0:t1, pl:pl + W], xn[a + t0 - pt:a + t1 - pt])
        else:
            b = buf[:, :nrows]
            b[:, :t0].fill(v)
            b[:, t1:].fill(v)
            b[:, t0:t1, :pl].fill(v)
            b[:, t0:t1, pl + W:].fill(v)
            if t1 > t0:
                np.copyto(b[:, t0:t1, pl:pl + W], xn[:, a + t0 - pt:a + t1 - pt])
        return b

    def tap(self, src, i, j, nr=None):
        """The (nr, Wo) window of kernel tap (i, j) over band rows."""
        nr = self.Ho if nr is None else nr
        h0, w0 = i * self.dh, j * self.dw
        hs = slice(h0, h0 + (nr - 1) * self.sh + 1, self.sh)
        ws = slice(w0, w0 + (self.Wo - 1) * self.sw + 1, self.sw)
        return src[hs, ws] if self.nhwc else src[:, hs, ws]

    def windows(self, src, nr, groups=None, kmajor=False):
        """All taps at once: (C, kh, kw, nr, Wo) or (nr, Wo, kh, kw, C); NHWC
        with ``groups``: (G, nr, Wo, kh, kw, C/G), or (G, kh, kw, C/G, nr, Wo)
        if ``kmajor``."""
        s = src.strides
        if self.nhwc and groups and kmajor:
            cg = src.shape[2] // groups
            shape = (groups, self.kh, self.kw, cg, nr, self.Wo)
            strides = (s[2] * cg, s[0] * self.dh, s[1] * self.dw, s[2], s[0] * self.sh,
                       s[1] * self.sw)
        elif self.nhwc and groups:
            cg = src.shape[2] // groups
            shape = (groups, nr, self.Wo, self.kh, self.kw, cg)
            strides = (s[2] * cg, s[0] * self.sh, s[1] * self.sw, s[0] * self.dh,
                       s[1] * self.dw, s[2])
        elif self.nhwc:
            shape = (nr, self.Wo, self.kh, self.kw, src.shape[2])
            strides = (s[0] * self.sh, s[1] * self.sw, s[0] * self.dh, s[1] * self.dw, s[2])
        else:
            shape = (src.shape[0], self.kh, self.kw, nr, self.Wo)
            strides = (s[0], s[1] * self.dh, s[2] * self.dw, s[1] * self.sh, s[2] * self.sw)
        return np.lib.stride_tricks.as_strided(src, shape, strides, writeable=False)

    def out_rows(self, yn, r0, r1):
        return yn[r0:r1] if self.nhwc else yn[:, r0:r1]


@register("Conv")
class Conv(_Spatial):
    """Convolution by im2col + one (batched) matmul, writing straight into
    the output; depthwise convolution by accumulating kernel taps.  Done
    per image and per band of output rows, so the scratch -- the padded
    input rows of a band and its im2col matrix (C_in * kh * kw * rows *
    W_out elements) or, for depthwise, one band-sized product buffer -- stays
    within SCRATCH_BUDGET (at least one output row).  A 1x1 stride-1
    unpadded conv needs no scratch at all."""

    def setup(self):
        self.runtime = (0,)
        wshape = self.shape(1)
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        g = int(self.attrs.get("group", 1))
        k_sp = wshape[1:-1] if self.nhwc else wshape[2:]   # OHWI / 1HWC vs OIHW
        self.geometry(k_sp)
        C = self.c_in
        self.G = g
        cout = self.oshape()[-1] if self.nhwc else self.oshape()[1]
        self.cout = cout
        if C % g or cout % g:
            self.fail(f"group={g} does not divide channels {C} -> {cout}")
        w = self.const(1, "weight").astype(self.dtype)
        K = C // g * self.kh * self.kw
        self.K = K
        # depthwise (every input channel c feeds output channel c): a loop
        # over kernel taps.  TFLite 1HWC weights with a depth multiplier
        # M = C_out / C_in > 1 (channel c*M + m reads input channel c) become
        # OHWI weights of a grouped conv (group = C_in) and go to im2col:
        # measured 0.3 ms vs 1.4 ms (NCHW) / 7.6 ms (NHWC) for a tap loop
        # broadcasting over M on 32 -> 64 channels at 56x56.
        dw_layout = self.attrs.get("weight_layout") == "1HWC"
        if dw_layout and cout != C:
            if cout % C:
                self.fail(f"depthwise output channels {cout} are not a multiple of {C}")
            w = w.reshape(self.kh, self.kw, cout).transpose(2, 0, 1)[..., None]
            dw_layout = False
        self.depthwise = dw_layout or (g == C and g > 1 and cout == C)
        isz = self.dtype.itemsize
        if self.depthwise:
            if self.nhwc:
                wt = w.reshape(self.kh, self.kw, C)          # 1HWC
            else:
                wt = w.reshape(C, self.kh, self.kw).transpose(1, 2, 0)
            wt = np.ascontiguousarray(wt)
            if not self.nhwc:
                wt = wt.reshape(self.kh, self.kw, C, 1, 1)
            self.wt = self.keep(wt)
            self.mode = "dw"
            nr = self.plan_bands(extra_per_row=C * self.Wo * isz)
            tshape = (nr, self.Wo, C) if self.nhwc else (C, nr, self.Wo)
            self.scratch = self.pad_spec() + [(tshape, self.dtype)]
        elif (self.kh == self.kw == 1 and self.sh == self.sw == 1 and not self.padded
              and g == 1):
            self.mode = "1x1"
            self.wm = self.keep(np.ascontiguousarray(w.reshape(cout, C)))
        else:
            self.mode = "im2col"
            nr = self.plan_bands(extra_per_row=C * self.kh * self.kw * self.Wo * isz)
            self.scratch = self.pad_spec() + [((C * self.kh * self.kw * nr * self.Wo,),
                                               self.dtype)]
            # NHWC with few channels per group: columns (G, K, rows*W_out),
            # filled with W_out innermost -- a copy with a 1- or 2-wide
            # channel axis innermost is slow (32 groups of 2 channels at
            # 28x28: copy + matmul 1.2 ms vs 0.3 ms with this layout)
            self.kmajor = self.nhwc and g > 1 and C // g <= 8
            if self.nhwc:
                # OHWI -> per group (K, Cout/G) matching the (kh, kw, C/G) column
                # order, or (Cout/G, K) for the K-major layout
                cog = cout // g
                wm = w.reshape(g, cog, K)
                if not self.kmajor:
                    wm = wm.transpose(0, 2, 1)
                self.wm = self.keep(np.ascontiguousarray(wm if g > 1 else wm[0]))
            else:
                self.wm = self.keep(np.ascontiguousarray(w.reshape(g, cout // g, K)))
        self.bias = None
        if self.has(2):
            b = self.const(2, "bias").astype(self.dtype)
            self.bias = self.keep(b if self.nhwc else b.reshape(-1, 1, 1))

    def run(self, xs, ys, sc):
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf = sc[0] if self.padded else None
        Wo, cout = self.Wo, self.cout
        for n in range(self.N):
            yn = y[n]
            if self.mode == "1x1":
                if self.nhwc:
                    np.matmul(x[n].reshape(-1, self.c_in), self.wm.T,
                              out=yn.reshape(-1, cout))
                else:
                    np.matmul(self.wm, x[n].reshape(self.c_in, -1),
                              out=yn.reshape(cout, -1))
            else:
                for r0, r1 in self.bands:
                    nr = r1 - r0
                    src = self.band_src(x[n], pbuf, r0, r1)
                    yb = self.out_rows(yn, r0, r1)
                    if self.mode == "dw":
                        tmp = sc[-1][:nr] if self.nhwc else sc[-1][:, :nr]
                        first = True
                        for i in range(self.kh):
                            for j in range(self.kw):
                                win = self.tap(src, i, j, nr)
                                if first:
                                    np.multiply(win, self.wt[i, j], out=yb)
                                    first = False
                                else:
                                    np.multiply(win, self.wt[i, j], out=tmp)
                                    np.add(yb, tmp, out=yb)
                    else:
                        cols = sc[-1][:self.K * self.G * nr * Wo]
                        if self.kmajor:
                            G, cg = self.G, self.c_in // self.G
                            np.copyto(cols.reshape(G, self.kh, self.kw, cg, nr, Wo),
                                      self.windows(src, nr, G, kmajor=True))
                            np.matmul(self.wm, cols.reshape(G, self.K, nr * Wo),
                                      out=yb.reshape(nr * Wo, G, cout // G).transpose(1, 2, 0))
                        elif self.nhwc and self.G > 1:
                            G, cg = self.G, self.c_in // self.G
                            np.copyto(cols.reshape(G, nr, Wo, self.kh, self.kw, cg),
                                      self.windows(src, nr, G))
                            np.matmul(cols.reshape(G, nr * Wo, self.K), self.wm,
                                      out=yb.reshape(nr * Wo, G, cout // G).transpose(1, 0, 2))
                        elif self.nhwc:
                            np.copyto(cols.reshape(nr, Wo, self.kh, self.kw, self.c_in),
                                      self.windows(src, nr))
                            np.matmul(cols.reshape(nr * Wo, self.K), self.wm,
                                      out=yb.reshape(nr * Wo, cout))
                        else:
                            np.copyto(cols.reshape(self.c_in, self.kh, self.kw, nr, Wo),
                                      self.windows(src, nr))
                            out = yn.reshape(self.G, cout // self.G, self.Ho * Wo)
                            np.matmul(self.wm, cols.reshape(self.G, self.K, nr * Wo),
                                      out=out[:, :, r0 * Wo:r1 * Wo])
            if self.bias is not None:
                np.add(yn, self.bias, out=yn)


@register("ConvTranspose")
class ConvTranspose(Kernel):
    """Transposed convolution, 2-D, NCHW (ONNX, groups) or NHWC (TFLite
    TRANSPOSE_CONV, weights ``OHWI``).  Per image and per band of input rows:
    columns = W^T x for the band by one (batched) matmul into scratch, then
    each kernel tap's columns are added straight into the output rows and
    columns they land on (cropping by the pads is a choice of slices, so no
    full-size uncropped buffer).  The output starts as the bias (or zero).
    Scratch: the band's columns, ``C_out * kh * kw * rows * W_in`` elements,
    with ``rows`` the most input rows that fit SCRATCH_BUDGET (at least 1)."""

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        at = self.attrs
        self.nhwc = at.get("layout", "NCHW") == "NHWC"
        w = self.const(1, "weight").astype(self.dtype)
        ys = self.oshape()
        self.one_d = len(xs) == 3
        if self.one_d:      # 1-D as 2-D with H = 1: prepend a unit axis everywhere
            sp = 1 if self.nhwc else 2
            xs, ys = xs[:sp] + (1,) + xs[sp:], ys[:sp] + (1,) + ys[sp:]
            w = w.reshape(w.shape[:1] + (1,) + w.shape[1:]) if self.nhwc else \
                w.reshape(w.shape[:2] + (1,) + w.shape[2:])
            at = dict(at)
            for k in ("strides", "dilations"):
                if k in at:
                    at[k] = [1] + list(at[k])
            for k, v in (("output_padding", 0), ("output_shape", 1)):
                if k in at:
                    at[k] = [v] + list(at[k])[-1:]
            if at.get("pads") is not None:
                at["pads"] = [0, int(at["pads"][0]), 0, int(at["pads"][1])]
            self.x4 = xs
            self.y4 = ys
        if len(xs) != 4:
            self.fail(f"only 1-D and 2-D ConvTranspose are supported (input {list(xs)})")
        g = int(at.get("group", 1))
        if self.nhwc:
            N, H, W, C = xs
            cout, kh, kw, cin = w.shape                 # OHWI
            Ho, Wo = ys[1], ys[2]
            if g != 1 or cin != C:
                self.fail(f"NHWC filter {list(w.shape)} does not match {C} input channels")
            cog = cout
        else:
            N, C, H, W = xs
            _, cog, kh, kw = w.shape
            Ho, Wo = ys[2], ys[3]
            cout = cog * g
        if C % g:
            self.fail(f"group={g} does not divide {C} input channels")
        s = [int(v) for v in at.get("strides", [1, 1])]
        d = [int(v) for v in at.get("dilations", [1, 1])]
        pads = at.get("pads")
        full_h = (H - 1) * s[0] + (kh - 1) * d[0] + 1
        full_w = (W - 1) * s[1] + (kw - 1) * d[1] + 1
        auto = at.get("auto_pad", "NOTSET")
        if isinstance(auto, bytes):
            auto = auto.decode()
        if auto == "VALID":
            pt = pl = 0
        elif pads is None or auto in ("SAME_UPPER", "SAME_LOWER") or \
                "output_shape" in at:
            opad = [int(v) for v in at.get("output_padding", [0, 0])]
            tot_h = max(0, full_h + opad[0] - Ho)
            tot_w = max(0, full_w + opad[1] - Wo)
            if auto == "SAME_UPPER":
                pt, pl = tot_h // 2, tot_w // 2
            else:
                pt, pl = tot_h - tot_h // 2, tot_w - tot_w // 2
            if pads is not None and auto == "NOTSET" and "output_shape" not in at:
                pt, pl = int(pads[0]), int(pads[1])
        else:
            pt, pl = int(pads[0]), int(pads[1])
        self.N, self.C, self.H, self.W, self.G = N, C, H, W, g
        self.kh, self.kw, self.cog, self.cout = kh, kw, cog, cout
        self.Ho, self.Wo = Ho, Wo
        if self.nhwc:
            # (C, kh*kw*C_out): column order (kh, kw, C_out)
            self.wm = self.keep(np.ascontiguousarray(
                w.transpose(3, 1, 2, 0).reshape(C, kh * kw * cout)))
        else:
            # (G, cog*kh*kw, C/G): W^T per group
            self.wm = self.keep(np.ascontiguousarray(
                w.reshape(g, C // g, cog * kh * kw).transpose(0, 2, 1)))
        per_row = cout * kh * kw * W * self.dtype.itemsize
        budget = int(at.get("_scratch_budget", SCRATCH_BUDGET))
        nh = int(max(1, min(H, budget // max(per_row, 1))))
        self.band_rows = nh
        self.scratch = [((cout * kh * kw * nh * W,), self.dtype)]

        def taps(n_in, n_out, k, st, dl, p):
            """Per tap: (input slice, output slice) of the positions that
            land inside the cropped output, for inputs [lo, hi)."""
            def f(lo, hi):
                out = []
                for i in range(k):
                    a = max(lo, -(-(p - i * dl) // st))
                    b = min(hi - 1, (n_out - 1 + p - i * dl) // st)
                    if a > b:
                        out.append(None)
                        continue
                    o0 = a * st + i * dl - p
                    out.append((slice(a - lo, b - lo + 1),
                                slice(o0, o0 + (b - a) * st + 1, st)))
                return out
            return f

        cw = taps(W, Wo, kw, s[1], d[1], pl)(0, W)
        fh = taps(H, Ho, kh, s[0], d[0], pt)
        self.bands = []
        for h0 in range(0, H, nh):
            h1 = min(h0 + nh, H)
            steps = []
            for i, rh in enumerate(fh(h0, h1)):
                if rh is None:
                    continue
                for j, rw in enumerate(cw):
                    if rw is not None:
                        steps.append((i, j, rh[0], rw[0], rh[1], rw[1]))
            self.bands.append((h0, h1, steps))
        self.bias = None
        if self.has(2):
            b = self.const(2, "bias").astype(self.dtype)
            self.bias = self.keep(b if self.nhwc else b.reshape(-1, 1, 1))
        self.zero = _c(0, self.dtype)

    def run(self, xs, ys, sc):
        buf = sc[0]
        x, y = xs[0], ys[0]
        if self.one_d:
            x, y = x.reshape(self.x4), y.reshape(self.y4)
        g, C, W, kh, kw, cout = self.G, self.C, self.W, self.kh, self.kw, self.cout
        for n in range(self.N):
            yn = y[n]
            if self.bias is not None:
                np.copyto(yn, self.bias)
            else:
                yn.fill(self.zero)
            xn = x[n] if self.nhwc else x[n].reshape(g, C // g, self.H * W)
            for h0, h1, steps in self.bands:
                nb = h1 - h0
                cols = buf[:cout * kh * kw * nb * W]
                if self.nhwc:
                    cm = cols.reshape(nb * W, kh * kw * cout)
                    np.matmul(xn[h0:h1].reshape(nb * W, C), self.wm, out=cm)
                    c6 = cols.reshape(nb, W, kh, kw, cout)
                    for i, j, sh, sw, dh, dw in steps:
                        dst = yn[dh, dw]
                        np.add(dst, c6[sh, sw, i, j], out=dst)
                else:
                    cm = cols.reshape(g, self.cog * kh * kw, nb * W)
                    np.matmul(self.wm, xn[:, :, h0 * W:h1 * W], out=cm)
                    c6 = cols.reshape(cout, kh, kw, nb, W)
                    for i, j, sh, sw, dh, dw in steps:
                        dst = yn[:, dh, dw]
                        np.add(dst, c6[:, i, j, sh, sw], out=dst)


@register("MaxPool", "AveragePool")
class Pool(_Spatial):
    """Max/average pooling as a loop over kernel taps with ufuncs writing
    into the output, per band of output rows.  Scratch: the padded input
    rows of a band when there is padding or ceil_mode overhang (padding
    value -inf for max, 0 for average), within SCRATCH_BUDGET."""

    def setup(self):
        if len([o for o in self.op.outputs if o]) > 1:
            self.fail("the Indices output is not supported")
        if int(self.attrs.get("storage_order", 0)):
            self.fail("storage_order=1 is not supported")
        k = [int(v) for v in self.attrs["kernel_shape"]]
        self.is_max = self.op.op_type == "MaxPool"
        self.geometry(k, -np.inf if self.is_max else 0.0)
        self.plan_bands()
        self.scratch = self.pad_spec()
        # non-overlapping windows (stride = kernel, no padding/dilation, e.g.
        # MediaPipe's 64x64 "global" average pools): one reduction over a
        # (rows, kh, Wo, kw) view instead of kh*kw ufunc calls
        self.blocky = (not self.padded and (self.sh, self.sw) == (self.kh, self.kw) and
                       self.dh == self.dw == 1 and self.kh * self.kw >= 4)
        self.div = None
        if not self.is_max:
            cip = int(self.attrs.get("count_include_pad", 0))
            # count of the window elements that lie in the image (or in
            # the explicit pads if count_include_pad), per output position
            mask = np.zeros((self.Hp, self.Wp))
            if cip:
                mask[:self.H + self.pt + self.pb, :self.W + self.pl + self.pr] = 1
            else:
                mask[self.pt:self.pt + self.H, self.pl:self.pl + self.W] = 1
            cnt = np.zeros((self.Ho, self.Wo))
            for i in range(self.kh):
                for j in range(self.kw):
                    cnt += self.tap(mask[None] if not self.nhwc else mask[..., None], i, j
                                    ).reshape(self.Ho, self.Wo)
            cnt = np.maximum(cnt, 1)
            if np.all(cnt == self.kh * self.kw):
                self.inv = _c(1.0 / (self.kh * self.kw), self.dtype)
            else:
                d = (1.0 / cnt).astype(self.dtype)
                self.div = self.keep(d[..., None] if self.nhwc else d)

    def run(self, xs, ys, sc):
        x, y = self.x4(xs[0]), self.y4(ys[0])
        pbuf = sc[0] if self.padded else None
        f = np.maximum if self.is_max else np.add
        if self.blocky:
            kh, kw, Wo = self.kh, self.kw, self.Wo
            for n in range(self.N):
                for r0, r1 in self.bands:
                    nr = r1 - r0
                    src = self.band_src(x[n], None, r0, r1)
                    yb = self.out_rows(y[n], r0, r1)
                    st = src.strides
                    if self.nhwc:
                        v = np.lib.stride_tricks.as_strided(
                            src, (nr, kh, Wo, kw, src.shape[2]),
                            (st[0] * kh, st[0], st[1] * kw, st[1], st[2]), writeable=False)
                        f.reduce(v, axis=(1, 3), out=yb.reshape(nr, 1, Wo, 1, -1),
                                 keepdims=True)
                    else:
                        v = np.lib.stride_tricks.as_strided(
                            src, (src.shape[0], nr, kh, Wo, kw),
                            (st[0], st[1] * kh, st[1], st[2] * kw, st[2]), writeable=False)
                        f.reduce(v, axis=(2, 4), out=yb.reshape(-1, nr, 1, Wo, 1),
                                 keepdims=True)
                    if not self.is_max:
                        np.multiply(yb, self.inv, out=yb)
            return
        for n in range(self.N):
            for r0, r1 in self.bands:
                nr = r1 - r0
                src = self.band_src(x[n], pbuf, r0, r1)
                yb = self.out_rows(y[n], r0, r1)
                np.copyto(yb, self.tap(src, 0, 0, nr))
                for i in range(self.kh):
                    for j in range(self.kw):
                        if i or j:
                            f(yb, self.tap(src, i, j, nr), out=yb)
                if not self.is_max:
                    np.multiply(yb, self.div[r0:r1] if self.div is not None else self.inv,
                                out=yb)


@register("GlobalAveragePool", "GlobalMaxPool")
class GlobalPool(Kernel):
    def setup(self):
        xs = self.shape(0)
        self.nhwc = self.attrs.get("layout", "NCHW") == "NHWC"
        n, c = (xs[0], xs[-1]) if self.nhwc else xs[:2]
        self.n, self.c = n, c
        self.sp = math.prod(xs[1:-1]) if self.nhwc else math.prod(xs[2:])
        self.inv = _c(1.0 / max(self.sp, 1), self.dtype)
        self.f = np.add if self.op.op_type == "GlobalAveragePool" else np.maximum

    def run(self, xs, ys, sc):
        if self.nhwc:
            x = xs[0].reshape(self.n, self.sp, self.c)
            y = ys[0].reshape(self.n, 1, self.c)
            self.f.reduce(x, axis=1, out=y, keepdims=True)
        else:
            x = xs[0].reshape(self.n, self.c, self.sp)
            y = ys[0].reshape(self.n, self.c, 1)
            self.f.reduce(x, axis=2, out=y, keepdims=True)
        if self.f is np.add:
            np.multiply(y, self.inv, out=y)


@register("ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin")
class Reduce(Kernel):
    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        axes = self.attrs.get("axes")
        if self.has(1):
            axes = self.const(1, "axes")
        if axes is None or len(np.atleast_1d(axes)) == 0:
            if int(self.attrs.get("noop_with_empty_axes", 0)):
                axes = []
            else:
                axes = range(len(xs))
        axes = tuple(sorted(int(a) + len(xs) if int(a) < 0 else int(a)
                            for a in np.atleast_1d(axes)))
        self.axes = axes
        self.kshape = tuple(1 if i in axes else d for i, d in enumerate(xs))
        t = self.op.op_type
        self.f = {"ReduceMax": np.maximum, "ReduceMin": np.minimum}.get(t, np.add)
        cnt = math.prod(xs[a] for a in axes) if axes else 1
        self.inv = _c(1.0 / max(cnt, 1), self.dtype) if t == "ReduceMean" \
            else None

    def run(self, xs, ys, sc):
        y = ys[0].reshape(self.kshape)
        if not self.axes:
            np.copyto(y, xs[0])
        else:
            self.f.reduce(xs[0], axis=self.axes, out=y, keepdims=True)
        if self.inv is not None:
            np.multiply(y, self.inv, out=y)


@register("Softmax", "LogSoftmax")
class Softmax(Kernel):
    """Softmax over one axis (ONNX opset >= 13, TFLite) or over the
    flattened trailing axes (ONNX opset < 13: attribute ``coerce_2d``).
    Scratch: one reduced row statistic per row."""

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
        self.beta = None if beta == 1.0 else _c(beta, self.dtype)
        self.log = self.op.op_type == "LogSoftmax"
        if self.log:
            self.scratch.append((self.view, self.dtype))

    def run(self, xs, ys, sc):
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


@register("Pad")
class Pad(Kernel):
    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        nd = len(xs)
        pads = self.attrs.get("pads")
        if self.has(1):
            pads = self.const(1, "pads")
        pads = np.asarray(pads, dtype=np.int64).reshape(-1)
        if self.attrs.get("layout_pairs"):           # TFLite: [[b, e], ...]
            pads = pads.reshape(-1, 2).T.reshape(-1)
        axes = list(range(nd))
        if self.has(3):
            axes = [int(a) + nd if int(a) < 0 else int(a) for a in self.const(3, "axes")]
        begin, end = [0] * nd, [0] * nd
        k = len(axes)
        for i, a in enumerate(axes):
            begin[a], end[a] = int(pads[i]), int(pads[i + k])
        if min(begin + end) < 0:
            self.fail("negative pads (cropping) are not supported")
        value = float(self.attrs.get("value", 0.0))
        if self.has(2):
            value = float(self.const(2, "constant_value").reshape(-1)[0])
        mode = self.attrs.get("mode", "constant")
        if isinstance(mode, bytes):
            mode = mode.decode()
        if mode not in ("constant", "reflect", "edge"):
            self.fail(f"mode {mode!r} is not supported")
        self.mode, self.value = mode, _c(value, self.dtype)
        self.begin, self.end, self.xs = begin, end, xs
        self.inner = tuple(slice(b, b + d) for b, d in zip(begin, xs))

    def run(self, xs, ys, sc):
        y = ys[0]
        if self.mode == "constant":
            # borders only, axis by axis
            for a, (b, e) in enumerate(zip(self.begin, self.end)):
                pre = (slice(None),) * a
                if b:
                    y[pre + (slice(0, b),)].fill(self.value)
                if e:
                    y[pre + (slice(y.shape[a] - e, None),)].fill(self.value)
            np.copyto(y[self.inner], xs[0])
            return
        np.copyto(y[self.inner], xs[0])
        # fill axis by axis from the already-valid region
        cur = list(self.inner)
        for a, (b, e) in enumerate(zip(self.begin, self.end)):
            n = self.xs[a]
            for i in range(b):
                src = b + (b - i) if self.mode == "reflect" else b
                dst = list(cur)
                dst[a] = slice(i, i + 1)
                sl = list(cur)
                sl[a] = slice(src, src + 1)
                np.copyto(y[tuple(dst)], y[tuple(sl)])
            for i in range(e):
                pos = b + n + i
                src = b + n - 2 - i if self.mode == "reflect" else b + n - 1
                dst = list(cur)
                dst[a] = slice(pos, pos + 1)
                sl = list(cur)
                sl[a] = slice(src, src + 1)
                np.copyto(y[tuple(dst)], y[tuple(sl)])
            cur[a] = slice(None)


@register("LRN")
class LRN(Kernel):
    """Local response normalisation across channels (NCHW).  Scratch: the
    channel-padded squares and the denominator."""

    def setup(self):
        xs = self.shape(0)
        self.size = int(self.attrs["size"])
        self.alpha = float(self.attrs.get("alpha", 1e-4))
        self.beta = _c(float(self.attrs.get("beta", 0.75)), self.dtype)
        self.bias = _c(float(self.attrs.get("bias", 1.0)), self.dtype)
        self.scale = _c(self.alpha / self.size, self.dtype)
        self.lo = (self.size - 1) // 2
        self.hi = self.size - 1 - self.lo
        N, C = xs[:2]
        rest = xs[2:]
        self.C = C
        self.scratch = [((N, C + self.size - 1) + rest, self.dtype), (xs, self.dtype)]

    def run(self, xs, ys, sc):
        p, s = sc
        x = xs[0]
        lo, C = self.lo, self.C
        if lo:
            p[:, :lo].fill(0)
        if self.hi:
            p[:, lo + C:].fill(0)
        np.square(x, out=p[:, lo:lo + C])
        np.copyto(s, p[:, 0:C])
        for i in range(1, self.size):
            np.add(s, p[:, i:i + C], out=s)
        np.multiply(s, self.scale, out=s)
        np.add(s, self.bias, out=s)
        np.power(s, self.beta, out=s)
        np.divide(x, s, out=ys[0])


# ---------------------------------------------------------------------------
# resize
# ---------------------------------------------------------------------------
def _coords(out_n, in_n, scale, mode):
    o = np.arange(out_n, dtype=np.float64)
    if mode == "half_pixel":
        return (o + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (o + 0.5) / scale - 0.5 if out_n > 1 else np.zeros(out_n)
    if mode == "align_corners":
        return o * (in_n - 1) / (out_n - 1) if out_n > 1 else np.zeros(out_n)
    if mode == "asymmetric":
        return o / scale
    if mode == "tf_half_pixel_for_nn":
        return (o + 0.5) / scale
    if mode == "half_pixel_symmetric":
        # centre of the implicit ROI onto the centre of the output (differs
        # from half_pixel only when scale * in is not an integer)
        adj = out_n / (scale * in_n)
        return in_n / 2 * (1 - adj) + (o + 0.5) / scale - 0.5
    raise ValueError(mode)


@register("Resize", "Upsample")
class Resize(Kernel):
    """Nearest, (bi)linear and (bi)cubic resize of up to two axes.  Each
    resized axis is a ``np.take`` with precomputed indices (and, for
    linear / cubic, a weighted sum of two / four takes with precomputed
    weights: cubic_coeff_a, exclude_outside, edge-clamped indices as in the
    ONNX reference).  Scratch: the intermediate after the first axis and,
    for linear / cubic, the second operand of each blend."""

    def setup(self):
        self.runtime = (0,)
        xs, ys = self.shape(0), self.oshape()
        nd = len(xs)
        a = self.attrs
        mode = a.get("mode", "nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        if mode == "bilinear":
            mode = "linear"
        if mode == "bicubic":
            mode = "cubic"
        if mode not in ("nearest", "linear", "cubic"):
            self.fail(f"mode {mode!r} is not supported (nearest, linear, cubic)")
        if mode != "nearest" and int(a.get("antialias", 0)):
            self.fail("antialias=1 is not supported")
        if mode == "cubic" and self.op.op_type == "Upsample":
            self.fail("cubic Upsample is not supported")
        ca = float(a.get("cubic_coeff_a", -0.75))
        excl = int(a.get("exclude_outside", 0))
        ctm = a.get("coordinate_transformation_mode")
        ctm = ctm.decode() if isinstance(ctm, bytes) else ctm
        if ctm is None:
            ctm = "asymmetric" if self.op.op_type == "Upsample" or a.get("_opset", 11) < 11 \
                else "half_pixel"
        nm = a.get("nearest_mode", "round_prefer_floor")
        nm = nm.decode() if isinstance(nm, bytes) else nm
        scales = a.get("scales")
        # Upsample(X, scales) / Resize opset 10 (X, scales) / 11+ (X, roi, scales, sizes)
        if self.op.op_type == "Upsample" or a.get("_opset", 11) < 11:
            if self.has(1):
                scales = self.const(1, "scales")
        elif self.has(2) and self.ins[2].data is not None and np.size(self.ins[2].data):
            scales = self.const(2, "scales")
        # opset 18: scales / sizes may name only ``axes``; keep_aspect_ratio_policy
        # not_larger / not_smaller scales every named axis by the min / max
        # of sizes / input (the output shape already says the rounded sizes)
        axes = a.get("axes")
        axes = list(range(nd)) if axes is None else [int(v) + nd if int(v) < 0 else int(v)
                                                     for v in axes]
        if scales is not None and len(np.atleast_1d(scales)) == len(axes) != nd:
            full = [1.0] * nd
            for ax, v in zip(axes, np.atleast_1d(scales)):
                full[ax] = float(v)
            scales = full
        if scales is None or len(np.atleast_1d(scales)) != nd:
            scales = [o / i for o, i in zip(ys, xs)]
            pol = a.get("keep_aspect_ratio_policy", "stretch")
            pol = pol.decode() if isinstance(pol, bytes) else pol
            if pol in ("not_larger", "not_smaller") and self.has(3):
                sizes = np.atleast_1d(self.const(3, "sizes"))
                r = [float(sz) / xs[ax] for ax, sz in zip(axes, sizes)]
                common = min(r) if pol == "not_larger" else max(r)
                for ax in axes:
                    scales[ax] = common
            elif pol != "stretch":
                self.fail(f"keep_aspect_ratio_policy {pol!r} is not supported")
        scales = [float(s) for s in np.atleast_1d(scales)]
        self.extrap = []
        crop = None
        if ctm == "tf_crop_and_resize":
            roi = self.const(1, "roi") if self.has(1) else None
            if roi is None or np.size(roi) != 2 * len(axes):
                self.fail(f"tf_crop_and_resize needs a constant roi of {2 * len(axes)} values")
            roi = np.asarray(roi, dtype=np.float64).reshape(-1)
            crop = [(0.0, 1.0)] * nd
            for k, ax in enumerate(axes):
                crop[ax] = (float(roi[k]), float(roi[k + len(axes)]))
            self.extrap_value = _c(float(a.get("extrapolation_value", 0.0)), self.dtype)
        self.plan = []
        for ax in range(nd):
            if ctm == "tf_crop_and_resize":
                # x = roi_start (in-1) + o (roi_end - roi_start) (in-1) / (out-1);
                # positions outside [0, in-1] get extrapolation_value
                r0, r1 = crop[ax]
                n, o = xs[ax], np.arange(ys[ax], dtype=np.float64)
                c = (r0 * (n - 1) + o * (r1 - r0) * (n - 1) / (ys[ax] - 1) if ys[ax] > 1
                     else np.full(1, (r1 - r0) * (n - 1) / 2 + r0 * (n - 1)))
                if n == ys[ax] and np.array_equal(c, o):
                    continue
                out = (c < 0) | (c > n - 1)
                if out.any():
                    pre = int(np.argmin(out)) if not out.all() else len(out)
                    suf = int(np.argmin(out[::-1])) if not out.all() else 0
                    self.extrap.append((ax, pre, len(out) - suf))
            elif xs[ax] == ys[ax] and scales[ax] == 1.0:
                continue
            else:
                try:
                    c = _coords(ys[ax], xs[ax], scales[ax], ctm)
                except ValueError:
                    self.fail(f"coordinate_transformation_mode {ctm!r} is not supported")
            if mode == "nearest":
                if nm == "round_prefer_floor":
                    i = np.ceil(c - 0.5)
                elif nm == "round_prefer_ceil":
                    i = np.floor(c + 0.5)
                elif nm == "floor":
                    i = np.floor(c)
                elif nm == "ceil":
                    i = np.ceil(c)
                else:
                    self.fail(f"nearest_mode {nm!r} is not supported")
                i = np.clip(i, 0, xs[ax] - 1).astype(np.intp)
                self.plan.append((ax, [(self.keep(i), None)]))
            elif mode == "cubic":
                base = np.floor(c)
                t = c - base
                A = ca
                ws = [((A * (t + 1) - 5 * A) * (t + 1) + 8 * A) * (t + 1) - 4 * A,
                      ((A + 2) * t - (A + 3)) * t * t + 1,
                      ((A + 2) * (1 - t) - (A + 3)) * (1 - t) * (1 - t) + 1,
                      ((A * (2 - t) - 5 * A) * (2 - t) + 8 * A) * (2 - t) - 4 * A]
                idx = [base.astype(np.int64) + k for k in (-1, 0, 1, 2)]
                if excl:
                    ws = [np.where((i < 0) | (i >= xs[ax]), 0.0, w) for i, w in zip(idx, ws)]
                    tot = sum(ws)
                    ws = [w / tot for w in ws]
                bshape = [1] * nd
                bshape[ax] = ys[ax]
                self.plan.append((ax, [
                    (self.keep(np.clip(i, 0, xs[ax] - 1).astype(np.intp)),
                     self.keep(w.astype(self.dtype).reshape(bshape))) for i, w in zip(idx, ws)]))
            else:
                c = np.clip(c, 0, xs[ax] - 1)
                i0 = np.floor(c).astype(np.intp)
                i1 = np.minimum(i0 + 1, xs[ax] - 1)
                f = c - i0
                bshape = [1] * nd
                bshape[ax] = ys[ax]
                w0 = (1 - f).astype(self.dtype).reshape(bshape)
                w1 = f.astype(self.dtype).reshape(bshape)
                self.plan.append((ax, [(self.keep(i0), self.keep(w0)),
                                       (self.keep(i1), self.keep(w1))]))
        if len(self.plan) > 2:
            self.fail("resizing more than two axes is not supported")
        specs = []
        shape = list(xs)
        self.shapes = []
        for k, (ax, _taps) in enumerate(self.plan):
            shape[ax] = ys[ax]
            self.shapes.append(tuple(shape))
        if len(self.plan) == 2:
            specs.append((self.shapes[0], self.dtype))     # intermediate
        if mode != "nearest":
            for shp in self.shapes:
                specs.append((shp, self.dtype))            # blend operand
        self.scratch = specs
        self.linear = mode != "nearest"

    def run(self, xs, ys, sc):
        src = xs[0]
        if not self.plan:
            np.copyto(ys[0], src)
            return
        k = 0
        mid = sc[0] if len(self.plan) == 2 else None
        tmps = list(sc[1:] if mid is not None else sc)
        for step, (ax, taps) in enumerate(self.plan):
            dst = ys[0] if step == len(self.plan) - 1 else mid
            i0, w0 = taps[0]
            np.take(src, i0, axis=ax, out=dst, mode="clip")
            if self.linear:
                t = tmps[step]
                np.multiply(dst, w0, out=dst)
                for i1, w1 in taps[1:]:
                    np.take(src, i1, axis=ax, out=t, mode="clip")
                    np.multiply(t, w1, out=t)
                    np.add(dst, t, out=dst)
            src = dst
            k += 1
        y = ys[0]
        for ax, lo, hi in self.extrap:      # tf_crop_and_resize: outside the image
            pre = (slice(None),) * ax
            if lo:
                y[pre + (slice(0, lo),)].fill(self.extrap_value)
            if hi < y.shape[ax]:
                y[pre + (slice(hi, None),)].fill(self.extrap_value)


# ---------------------------------------------------------------------------
def make_kernel(op, ins, outs, keep=None):
    """The kernel object for ``op`` given its input and output Tensors;
    UnsupportedOpError if the op type or one of its attributes is not
    supported."""
    cls = KERNELS.get(op.op_type)
    if cls is None:
        raise UnsupportedOpError(f"operator {op.name!r}: op type {op.op_type!r} is not "
                                 f"supported by the executor")
    return cls(op, ins, outs, keep)


def graph_kernel(graph, op, keep=None):
    ins = [graph.tensors[t] if t else None for t in op.inputs]
    outs = [graph.tensors[t] for t in op.outputs if t]
    return make_kernel(op, ins, outs, keep)


def scratch_bytes_for(graph, op):
    """Workspace bytes ``op`` needs while it runs (0 if none); raises
    UnsupportedOpError for an op the executor cannot run."""
    return graph_kernel(graph, op).scratch_bytes


def set_scratch(graph):
    """Fill ``Op.scratch_bytes`` for every op of ``graph`` from the kernels'
    own workspace rules.  Raises UnsupportedOpError listing every op (by
    name and type) the executor cannot run."""
    bad = []
    for op in graph.ops:
        try:
            op.scratch_bytes = scratch_bytes_for(graph, op)
        except UnsupportedOpError as exc:
            bad.append(str(exc))
    if bad:
        more = f" (and {len(bad) - 10} more)" if len(bad) > 10 else ""
        raise UnsupportedOpError("unsupported operator(s): " + "; ".join(bad[:10]) + more)
    return graph


from . import kernels_tflite  # noqa: E402,F401  (registers StridedSlice, DepthToSpace)
