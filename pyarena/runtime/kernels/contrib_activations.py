"""onnxruntime's ``com.microsoft`` activations of transformer graphs, each
of ``x`` or of ``x + bias`` (bias: one value per unit of the last axis):
Gelu (0.5 x (1 + erf(x / sqrt 2))), BiasGelu (the same of x + bias),
FastGelu (the tanh approximation, bias optional), QuickGelu (x
sigmoid(alpha x), alpha 1.702 by default), and BiasAdd (x + bias + skip).
Rows of the last axis a chunk at a time through float scratch, so the
scratch keeps within the op's budget; erf is the Erf kernel's rational
approximation (:mod:`.erf`)."""
import math

import numpy as np

from .erf import ErfMixin
from . import shape_rules as rules
from .registry import Kernel, const, items_per_step, register


class _BiasedUnary(ErfMixin, Kernel):
    """y = f(x + bias) (``bias_at``: the bias input, None: f(x)) over
    chunks of rows; ``nbuf`` row-chunk buffers, the first holding x + bias."""

    onnx_domain = "com.microsoft"
    family = "unary"
    inplace = "unary"
    shape_rule = rules.same
    bias_at = None
    nbuf = 3

    def setup(self):
        if not np.issubdtype(self.dtype, np.floating):
            self.fail(f"dtype {self.dtype} is not supported (floating point only)")
        shape = self.shape(0)
        self.hidden = shape[-1] if shape else 1
        self.rows = math.prod(shape[:-1]) if shape else 1
        if self.bias_at is not None and self.has(self.bias_at) and \
                self.shape(self.bias_at)[-1:] != (self.hidden,):
            self.malformed(f"bias {list(self.shape(self.bias_at))} is not one per unit of "
                           f"the last axis ({self.hidden})")
        # float16 runs in float32 (as onnxruntime's kernels do): its erf
        # polynomial in float16 is off by far more than an ulp
        d = self.work = np.dtype(np.float32) if self.dtype == np.float16 else self.dtype
        self.half, self.one = const(0.5, d), const(1, d)
        self.erf_consts(d)
        self.consts(d)
        nbuf = self.nbuf + (d != self.dtype)    # (a temporary y cannot be)
        row = self.hidden * d.itemsize * nbuf
        self.step = items_per_step(self.scratch_budget, row, self.rows, self.hidden)
        self.scratch = [((self.step, self.hidden), d)] * nbuf

    def consts(self, d):
        pass

    def run(self, xs, ys, sc):
        x = xs[0].reshape(self.rows, self.hidden)
        y = ys[0].reshape(self.rows, self.hidden)
        bias = xs[self.bias_at] if self.bias_at is not None and self.has(self.bias_at) \
            else None
        for r0 in range(0, self.rows, self.step):
            r1 = min(r0 + self.step, self.rows)
            bufs = [b[:r1 - r0] for b in sc]
            u = bufs[0]
            np.copyto(u, x[r0:r1])
            if bias is not None:
                np.add(u, bias, out=u)
            with np.errstate(over="ignore"):     # exp of a large -alpha x: inf, y -0
                self.apply(u, y[r0:r1], bufs[1:])

    def gelu_erf(self, u, y, bufs):
        """y = 0.5 u (1 + erf(u / sqrt 2)); ``u`` kept; y the erf's
        temporary unless ``bufs`` has one (float16)."""
        w, e = bufs[:2]
        np.multiply(u, self.rs2, out=w)
        self.erf(w, e, bufs[2] if len(bufs) > 2 else y)
        np.add(e, self.one, out=e)
        np.multiply(e, u, out=e)
        np.multiply(e, self.half, out=y)


@register
class MsGelu(_BiasedUnary):
    """com.microsoft Gelu: 0.5 x (1 + erf(x / sqrt 2))."""

    op_types = ("com.microsoft.Gelu",)

    def consts(self, d):
        self.rs2 = const(1 / math.sqrt(2), d)

    def apply(self, u, y, bufs):
        self.gelu_erf(u, y, bufs)


@register
class BiasGelu(MsGelu):
    """BiasGelu(A, B): Gelu of A + B."""

    op_types = ("BiasGelu",)
    family = "other"        # the bias runs along the last axis: no NHWC, no row bands
    bias_at = 1


@register
class FastGelu(_BiasedUnary):
    """FastGelu(X, bias?): 0.5 u (1 + tanh(sqrt(2 / pi) (u + 0.044715 u^3))),
    u = X + bias."""

    op_types = ("FastGelu",)
    family = "other"        # (as BiasGelu)
    bias_at = 1
    nbuf = 2

    def consts(self, d):
        self.k = const(math.sqrt(2 / math.pi), d)
        self.k3 = const(0.044715 * math.sqrt(2 / math.pi), d)

    def apply(self, u, y, bufs):
        e = bufs[0]
        np.multiply(u, u, out=e)
        np.multiply(e, self.k3, out=e)
        np.add(e, self.k, out=e)
        np.multiply(e, u, out=e)
        np.tanh(e, out=e)
        np.add(e, self.one, out=e)
        np.multiply(e, u, out=e)
        np.multiply(e, self.half, out=y)


@register
class QuickGelu(_BiasedUnary):
    """QuickGelu: x sigmoid(alpha x), alpha 1.702 by default."""

    op_types = ("QuickGelu",)
    nbuf = 2

    def consts(self, d):
        self.alpha = const(-float(self.attrs.get("alpha", 1.702)), d)

    def apply(self, u, y, bufs):
        e = bufs[0]
        np.multiply(u, self.alpha, out=e)
        np.exp(e, out=e)
        np.add(e, self.one, out=e)
        np.divide(u, e, out=y)


@register
class BiasAdd(Kernel):
    """BiasAdd(X, bias, skip): X + bias + skip (X and skip (batch, seq,
    channels), bias (channels))."""

    op_types = ("BiasAdd",)
    onnx_domain = "com.microsoft"
    family = "other"
    inplace = "none"
    shape_rule = rules.same

    def setup(self):
        x = self.shape(0)
        if len(x) != 3 or self.shape(1) != x[-1:] or self.shape(2) != x:
            self.malformed(f"takes X (batch, seq, channels), bias (channels) and skip like "
                           f"X, not {list(x)}, {list(self.shape(1))}, {list(self.shape(2))}")

    def run(self, xs, ys, sc):
        np.add(xs[0], xs[1], out=ys[0])
        np.add(ys[0], xs[2], out=ys[0])
