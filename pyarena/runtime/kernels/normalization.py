"""Normalisation and reduction kernels (BatchNormalization:
batch_norm.py): InstanceNormalization, LRN, the Reduce*
family, LayerNormalization and the losses (NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss); Softmax / LogSoftmax: rows.py.

Scratch rules: InstanceNorm -- the two statistics and one centred copy
(the squares go to the output);
LRN -- the channel-padded squares and the denominator.
"""
import math

import numpy as np

from ..._native import ffi
from ...errors import InvalidArgumentError
from .native import NATIVE_DTYPE, plane_mean
from .rows import layer_norm_rows
from . import shape_rules as rules
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .registry import Kernel, const, items_per_step, register


class _Affine:
    """A scale or bias input that is a constant (laid out once) or fed at
    run time (reshaped each run)."""

    def affine_term(self, i, what, shape):
        """Input ``i`` laid out as ``shape`` once (a constant), or None: read
        at run time (``self.runtime`` then includes it)."""
        if self.ins[i].data is None:
            self.runtime = tuple(self.runtime) + (i,)
            self.shapes = getattr(self, "shapes", {})
            self.shapes[i] = shape
            return None
        return self.keep(self.const(i, what).astype(self.dtype).reshape(shape))

    def term(self, xs, i, kept):
        return kept if kept is not None else xs[i].reshape(self.shapes[i])


@register
class InstanceNorm(_Affine, Kernel):
    """Per (image, channel) mean/variance over the spatial axes; scratch:
    the two statistics and one centred copy."""

    op_types = ('InstanceNormalization',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        n, c = xs[:2]
        self.view = (n, c, math.prod(xs[2:]))
        self.eps = const(float(self.attrs.get("epsilon", 1e-5)), self.dtype)
        self.inv = const(1.0 / max(self.view[2], 1), self.dtype)
        self.g, self.b = (self.affine_term(i, what, (1, c, 1))
                          for i, what in ((1, "scale"), (2, "bias")))
        self.scratch = [((n, c, 1), self.dtype), ((n, c, 1), self.dtype),
                        (self.view, self.dtype)]


    def run(self, xs, ys, sc):
        m, v, d = sc
        y = ys[0].reshape(self.view)
        moments(xs[0].reshape(self.view), m, v, d, self.inv, self.eps, sq=y)
        np.multiply(d, v, out=y)
        np.multiply(y, self.term(xs, 1, self.g), out=y)
        np.add(y, self.term(xs, 2, self.b), out=y)

_PRE = {"ReduceL1": np.abs, "ReduceL2": np.square, "ReduceSumSquare": np.square}


@register
class Reduce(Kernel):
    """ReduceMean/Sum/Max/Min/Prod in one ``ufunc.reduce``; ReduceL1, ReduceL2,
    ReduceSumSquare, ReduceLogSum and ReduceLogSumExp sum a transformed
    copy (scratch: one input-sized buffer; LogSumExp also the maximum)
    and finish on the output.  Over an empty set each gives the identity
    of its reduction (0, 1, -inf / the type's least value for Max, +inf /
    its greatest for Min)."""

    op_types = ('ReduceMean', 'ReduceSum', 'ReduceMax', 'ReduceMin', 'ReduceProd', 'ReduceL1',
                'ReduceL2', 'ReduceSumSquare', 'ReduceLogSum', 'ReduceLogSumExp')
    family = 'reduce'
    inplace = 'none'
    shape_rule = moves.reduce
    tflite = {
        'MEAN': ('ReduceMean', {}, tfl.reducer),
        'SUM': ('ReduceSum', {}, tfl.reducer),
        'REDUCE_MAX': ('ReduceMax', {}, tfl.reducer)}

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
        self.f = {"ReduceMax": np.maximum, "ReduceMin": np.minimum,
                  "ReduceProd": np.multiply}.get(t, np.add)
        # what a reduction over nothing gives (np.maximum / minimum have no identity)
        self.empty = _lowest(self.dtype) if t == "ReduceMax" else \
            _highest(self.dtype) if t == "ReduceMin" else None
        cnt = math.prod(xs[a] for a in axes) if axes else 1
        self.inv = const(1.0 / max(cnt, 1), self.dtype) if t == "ReduceMean" \
            else None
        # an integer mean: the sum divided by the count, truncated toward 0
        # (onnxruntime's integer division), not times a reciprocal of 0
        self.idiv = max(cnt, 1) if self.inv is not None and self.dtype.kind in "iu" else None
        if self.idiv is not None:
            self.inv = None
        self.pre = _PRE.get(t)
        self.lse = t == "ReduceLogSumExp"
        if self.lse and self.dtype.kind != "f":
            self.fail(f"an integer ReduceLogSumExp ({self.dtype}) is not supported")
        big = np.finfo(self.dtype).max if self.lse and self.dtype.kind == "f" else None
        self.big = None if big is None else (const(-big, self.dtype), const(big, self.dtype))
        self.post = {"ReduceL2": np.sqrt, "ReduceLogSum": np.log,
                     "ReduceLogSumExp": np.log}.get(t)
        if not math.prod(xs):
            self.pre = None             # an empty input: nothing to transform
        # the maximum / minimum over nothing: the identity of the reduction
        # (ONNX: -inf / +inf, an integer type's extremes); NumPy refuses
        self.empty = None
        if t in ("ReduceMax", "ReduceMin") and axes and not math.prod(xs[a] for a in axes):
            lo = t == "ReduceMax"
            dt = self.dtype
            self.empty = (not lo) if dt.kind == "b" else (-np.inf if lo else np.inf) \
                if dt.kind == "f" else (np.iinfo(dt).min if lo else np.iinfo(dt).max)
        if (self.pre or self.lse) and axes and math.prod(xs):
            self.scratch = [(xs, self.dtype)]
            if self.lse:
                self.scratch.append((self.kshape, self.dtype))
        if self.idiv is not None:
            self.scratch = [(self.kshape, self.dtype)]
        # the mean over the middle two axes of a 4-D tensor: an NHWC plane
        self.native = plane_mean(self, *xs) if t == "ReduceMean" and len(xs) == 4 and \
            axes == (1, 2) else None

    def run(self, xs, ys, sc):
        if self.native is not None:
            self.native(xs, ys)
            return
        y = ys[0].reshape(self.kshape)
        x = xs[0]
        if not self.axes:
            np.copyto(y, x)
            return
        if self.empty is not None:
            y.fill(self.empty)
            return
        if self.lse:
            if x.size:
                self.log_sum_exp(x, y, *sc)
            else:
                y.fill(-np.inf)         # log(0): the sum over nothing
            return
        if self.empty is not None and not x.size:
            y.fill(self.empty)
            return
        if self.pre is not None:
            x = self.pre(x, out=sc[0])
        self.f.reduce(x, axis=self.axes, out=y, keepdims=True)
        if self.inv is not None:
            np.multiply(y, self.inv, out=y)
        elif self.idiv is not None:         # (y - fmod(y, n)) is a multiple of n
            r = sc[-1]
            np.fmod(y, self.idiv, out=r)
            np.subtract(y, r, out=y)
            np.floor_divide(y, self.idiv, out=y)
        if self.post is not None:
            with np.errstate(divide="ignore", invalid="ignore"):
                if y.dtype.kind == "f":
                    self.post(y, out=y)
                else:   # an integer L2 / LogSum: the root or log of the integer sum, truncated
                    np.copyto(y, self.post(y.astype(np.float64)), casting="unsafe")

    def log_sum_exp(self, x, y, e, m):
        """log(sum(exp(x - max))) + max: no overflow for large x.  The max
        of the finite values, as onnxruntime's (ReduceAggregatorLogSumExp,
        reduction_ops.h): an Inf gives +-Inf, not inf - inf = NaN."""
        if self.big is None:
            np.maximum.reduce(x, axis=self.axes, out=m, keepdims=True)
        else:
            np.clip(x, *self.big, out=e)
            np.fmax.reduce(e, axis=self.axes, out=m, keepdims=True)    # NaN skipped
        np.subtract(x, m, out=e)
        np.exp(e, out=e)
        np.add.reduce(e, axis=self.axes, out=y, keepdims=True)
        np.log(y, out=y)
        np.add(y, m, out=y)


def _lowest(dtype):
    dtype = np.dtype(dtype)
    return -np.inf if dtype.kind == "f" else False if dtype.kind == "b" else \
        np.iinfo(dtype).min


def _highest(dtype):
    dtype = np.dtype(dtype)
    return np.inf if dtype.kind == "f" else True if dtype.kind == "b" else np.iinfo(dtype).max


@register
class MeanVarianceNorm(Kernel):
    """MeanVarianceNormalization: (x - mean) / (sqrt(var) + 1e-9) over
    ``axes`` (default 0, 2, 3), as ONNX's function body computes it.
    Scratch: the two statistics and the squares."""

    op_types = ('MeanVarianceNormalization',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same

    def setup(self):
        xs = self.shape(0)
        axes = self.attrs.get("axes", [0, 2, 3])
        self.axes = tuple(sorted({rules.norm_axis(a, len(xs)) for a in axes}))
        red = tuple(1 if i in self.axes else d for i, d in enumerate(xs))
        self.inv = const(1.0 / max(math.prod(xs[a] for a in self.axes), 1), self.dtype)
        self.eps = const(1e-9, self.dtype)
        self.scratch = [(red, self.dtype), (red, self.dtype), (xs, self.dtype)]

    def run(self, xs, ys, sc):
        m, v, sq = sc
        x, y = xs[0], ys[0]
        np.add.reduce(x, axis=self.axes, out=m, keepdims=True)
        np.multiply(m, self.inv, out=m)
        np.subtract(x, m, out=y)
        np.square(y, out=sq)
        np.add.reduce(sq, axis=self.axes, out=v, keepdims=True)
        np.multiply(v, self.inv, out=v)
        np.sqrt(v, out=v)
        np.add(v, self.eps, out=v)
        np.divide(y, v, out=y)


@register
class LpNormalization(Kernel):
    """x / ||x||_p along ``axis`` (p 1 or 2), a zero vector left zero:
    the norm and its zero mask in the scratch."""

    op_types = ('LpNormalization',)
    family = 'reduce'
    shape_rule = rules.same

    def setup(self):
        xs = self.shape(0)
        self.p = int(self.attrs.get("p", 2))
        if self.p not in (1, 2):
            self.fail(f"p must be 1 or 2, not {self.p}")
        self.axis = rules.norm_axis(self.attrs.get("axis", -1), len(xs))
        red = tuple(1 if i == self.axis else d for i, d in enumerate(xs))
        self.scratch = [(red, self.dtype), (red, np.bool_)]

    def run(self, xs, ys, sc):
        x, y, (norm, zero) = xs[0], ys[0], sc
        (np.abs if self.p == 1 else np.square)(x, out=y)
        np.add.reduce(y, axis=self.axis, out=norm, keepdims=True)
        if self.p == 2:
            np.sqrt(norm, out=norm)
        np.equal(norm, 0, out=zero)
        np.add(norm, zero, out=norm)        # a zero vector stays zero (0 / 1)
        np.divide(x, norm, out=y)


@register
class LRN(Kernel):
    """Local response normalisation across channels (NCHW).  The squares go
    to the output's memory first; the scratch is the window sums of a band
    of rows (the windows run across channels only, so rows are
    independent): as many rows as the op's scratch budget holds, at least
    one.  The sums add the window's squares in channel order, the padding
    adding nothing, as a zero-padded copy would."""

    op_types = ('LRN',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same

    def setup(self):
        xs = self.shape(0)
        self.size = int(self.attrs["size"])
        if self.size < 1:
            self.malformed(f"LRN size must be >= 1, not {self.size}")
        self.alpha = float(self.attrs.get("alpha", 1e-4))
        self.beta = const(float(self.attrs.get("beta", 0.75)), self.dtype)
        self.bias = const(float(self.attrs.get("bias", 1.0)), self.dtype)
        self.scale = const(self.alpha / self.size, self.dtype)
        self.lo = (self.size - 1) // 2
        self.hi = self.size - 1 - self.lo
        N, C = xs[:2]
        rest = xs[2:]
        self.C = C
        rows = rest[0] if rest else 1
        per_row = N * C * math.prod(rest[1:]) * self.dtype.itemsize
        if rest and per_row * rows > self.scratch_budget:
            rows = items_per_step(self.scratch_budget, per_row, rows, per_row // self.dtype.itemsize)
        self.rows = rows
        band = (rows,) + tuple(rest[1:]) if rest else ()
        self.scratch = [((N, C) + band, self.dtype)]

    def _band(self, x, y, s):
        C = self.C
        np.square(x, out=y)
        for d in range(-self.lo, self.hi + 1):     # s[c] += y[c + d], in order
            a, b = max(0, -d), min(C, C - d)
            if a >= b:
                if d == -self.lo:
                    s.fill(0)
                continue
            if d == -self.lo:
                s[:, :a].fill(0)
                s[:, b:].fill(0)
                np.copyto(s[:, a:b], y[:, a + d:b + d])
            else:
                np.add(s[:, a:b], y[:, a + d:b + d], out=s[:, a:b])
        np.multiply(s, self.scale, out=s)
        np.add(s, self.bias, out=s)
        np.power(s, self.beta, out=s)
        np.divide(x, s, out=y)

    def run(self, xs, ys, sc):
        s = sc[0]
        x, y = xs[0], ys[0]
        if x.ndim < 3 or self.rows >= x.shape[2]:
            self._band(x, y, s)
            return
        for r0 in range(0, x.shape[2], self.rows):
            r1 = min(r0 + self.rows, x.shape[2])
            self._band(x[:, :, r0:r1], y[:, :, r0:r1], s[:, :, :r1 - r0])


def _axis_attr(attrs, nd):
    """``attrs["axis"]`` (default -1: the last) counted from the front."""
    return int(attrs.get("axis", -1)) % max(nd, 1)


def moments(x, m, v, d, inv, eps, sq=None):
    """Mean (into ``m``) and 1/sqrt(var + eps) (into ``v``) over the last
    axis of ``x``; ``d`` ends as x - mean.  Without ``sq``, ``d`` holds
    (x - mean)^2 first and x - mean is taken again.  With ``sq`` (a buffer
    of x's shape) the squares go there and x - mean is taken once, so ``d``
    may be ``x`` itself (in place) and ``v`` may be ``m``."""
    np.add.reduce(x, axis=-1, out=m, keepdims=True)
    np.multiply(m, inv, out=m)
    np.subtract(x, m, out=d)
    if sq is None:
        sq = d
    np.square(d, out=sq)
    np.add.reduce(sq, axis=-1, out=v, keepdims=True)
    np.multiply(v, inv, out=v)
    np.add(v, eps, out=v)
    np.sqrt(v, out=v)
    np.reciprocal(v, out=v)
    if sq is d:
        np.subtract(x, m, out=d)


@register
class LayerNorm(Kernel):
    """LayerNormalization (opset 17): statistics over the axes from ``axis``
    on, then scale and bias (broadcast over those axes: constants laid out
    once, or read at run time).  A float16 input has its statistics and
    centred copy in float32 (``stash_type`` 1, the default).  Scratch: the
    centred copy and the two statistics, copied to the Mean and InvStdDev
    outputs when the graph reads them."""

    op_types = ('LayerNormalization',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.layer_norm

    def setup(self):
        xs = self.shape(0)
        ax = _axis_attr(self.attrs, len(xs))
        outer, inner = math.prod(xs[:ax]), math.prod(xs[ax:])
        self.view = (outer, inner)
        tail = xs[ax:]
        self.full = (outer,) + tuple(tail)      # y as the run-time scale broadcasts to it
        wide = self.dtype == np.float16 and int(self.attrs.get("stash_type", 1)) == 1
        st = np.dtype(np.float32) if wide else self.dtype
        self.inv = const(1.0 / max(inner, 1), st)
        self.eps = const(float(self.attrs.get("epsilon", 1e-5)), st)
        self.runtime = (0,) + tuple(i for i in (1, 2) if self.has(i) and
                                    self.ins[i].data is None)
        self.g = None if 1 in self.runtime else self.keep(np.broadcast_to(
            self.const(1, "scale"), tail).astype(self.dtype).reshape(1, inner))
        self.b = None if not self.has(2) or 2 in self.runtime else self.keep(
            np.broadcast_to(self.const(2, "bias"), tail).astype(self.dtype).reshape(1, inner))
        named = list(self.op.outputs) + [""] * 3
        self.slots = [k for k in range(3) if named[k]]     # ys[i] is output slots[i]
        self.scratch = [(self.view, st), ((outer, 1), st), ((outer, 1), st)]
        # float32, constant scale (and bias), Y alone: kernels/rows.c, no scratch
        self.on_rows = self.use_native and self.dtype == NATIVE_DTYPE and \
            self.op.op_type == "LayerNormalization" and self.slots == [0] and self.g is not None and 2 not in self.runtime and inner > 0
        if self.on_rows:
            self.scratch = []

    @property
    def path(self):
        return "native" if self.on_rows else "numpy"

    def run(self, xs, ys, sc):
        if self.on_rows:
            layer_norm_rows(xs[0].reshape(self.view), self.g, self.b, ys[0].reshape(self.view),
                            self.eps, self.workers, f"LayerNormalization {self.op.name!r}")
            return
        d, m, v = sc
        x = xs[0].reshape(self.view)
        y = ys[0].reshape(self.view)
        self.statistics(x, m, v, d)
        np.multiply(d, v, out=y)
        self.affine(xs, y)
        for k, out in zip(self.slots[1:], ys[1:]):
            np.copyto(out.reshape(-1, 1), m if k == 1 else v)

    def native_call(self, xs, ys):
        """The native rows (``pa_layer_norm_rows``) as a ``pa_call_t``
        record, so a run of it and its neighbours' C calls is one call (a
        decode step's norms between its linear layers); None on the NumPy
        path."""
        if not self.on_rows or not (xs[0].flags.c_contiguous and ys[0].flags.c_contiguous):
            return None
        eps = self.__dict__.get("_eps_c")
        if eps is None:
            eps = self._eps_c = ffi.new("float *", float(self.eps))
        return ("layer_norm", eps, self.g, xs[0], self.b, ys[0], self.view)

    def statistics(self, x, m, v, d):
        moments(x, m, v, d, self.inv, self.eps)

    def affine(self, xs, y):
        """y * scale + bias, the constants' layout or the run-time values'."""
        if self.g is not None:
            np.multiply(y, self.g, out=y)
        else:
            yf = y.reshape(self.full)
            np.multiply(yf, xs[1], out=yf)
        if self.b is not None:
            np.add(y, self.b, out=y)
        elif 2 in self.runtime:
            yf = y.reshape(self.full)
            np.add(yf, xs[2], out=yf)


@register
class RMSNorm(LayerNorm):
    """RMSNormalization (opset 23): x / sqrt(mean(x^2) + eps) over the axes
    from ``axis`` on, times the scale; statistics in float32 for a float16
    input (``stash_type`` 1).  Scratch: the squares and the statistic."""

    op_types = ('RMSNormalization',)
    shape_rule = rules.same

    def statistics(self, x, m, v, d):
        np.square(x, out=d)
        np.add.reduce(d, axis=-1, out=v, keepdims=True)
        np.multiply(v, self.inv, out=v)
        np.add(v, self.eps, out=v)
        np.sqrt(v, out=v)
        np.reciprocal(v, out=v)
        np.copyto(d, x)


@register
class GroupNorm(_Affine, Kernel):
    """GroupNormalization: statistics per (image, group of channels), then
    a per-channel scale and bias (opset 21) or per group (opset 18: scale
    and bias of ``num_groups`` values).  Scratch: the centred copy and the
    two statistics."""

    op_types = ('GroupNormalization',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        n, c = xs[:2]
        grp = int(self.attrs["num_groups"])
        if grp < 1 or c % grp:
            self.malformed(f"{c} channels do not split into {grp} groups")
        self.view = (n, grp, (c // grp) * math.prod(xs[2:]))
        self.inv = const(1.0 / max(self.view[-1], 1), self.dtype)
        self.eps = const(float(self.attrs.get("epsilon", 1e-5)), self.dtype)
        if math.prod(self.shape(1)) == c:
            self.aview = (n, c, math.prod(xs[2:]))
            shp = (1, c, 1)
        else:
            self.aview = self.view
            shp = (1, grp, 1)
        self.g, self.b = (self.affine_term(i, what, shp)
                          for i, what in ((1, "scale"), (2, "bias")))
        self.scratch = [(self.view, self.dtype), ((n, grp, 1), self.dtype),
                        ((n, grp, 1), self.dtype)]

    def run(self, xs, ys, sc):
        d, m, v = sc
        moments(xs[0].reshape(self.view), m, v, d, self.inv, self.eps)
        y = ys[0].reshape(self.view)
        np.multiply(d, v, out=y)
        y = ys[0].reshape(self.aview)
        np.multiply(y, self.term(xs, 1, self.g), out=y)
        np.add(y, self.term(xs, 2, self.b), out=y)


@register
class Hardmax(Kernel):
    """1 at the first maximum along ``axis`` (opset >= 13; before, of the
    input flattened to 2-D from ``axis``), 0 elsewhere.  Scratch: the
    index of each row's maximum, as a flat offset, its value, and, when
    the axis is not the last (``numpy.argmax`` would copy), the input laid
    out (outer, inner, axis).  A row holding a NaN is all 0: its maximum
    is NaN (as ReduceMax gives) and no element equals it -- onnxruntime's
    rule (hardmax.cc), whose maximum depends on where the NaN sits."""

    op_types = ('Hardmax',)
    family = 'reduce'
    inplace = 'none'
    shape_rule = rules.same

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        ax = _axis_attr(self.attrs, len(xs))
        if int(self.attrs.get("coerce_2d", 0)):
            self.view = (math.prod(xs[:ax]), math.prod(xs[ax:]), 1)
        else:
            self.view = (math.prod(xs[:ax]), xs[ax], math.prod(xs[ax + 1:]))
        outer, n, inner = self.view
        self.stride = const(inner, np.int64)
        base = (np.arange(outer, dtype=np.int64) * n * inner).reshape(-1, 1) + \
            np.arange(inner, dtype=np.int64)
        self.base = self.keep(base)
        self.scratch = [((outer, inner), np.int64), ((outer, inner), self.dtype)]
        if inner > 1:
            self.scratch.append(((outer, inner, n), self.dtype))

    def run(self, xs, ys, sc):
        i, v = sc[0], sc[1]
        outer, n, inner = self.view
        if inner > 1:
            np.copyto(sc[2], xs[0].reshape(self.view).transpose(0, 2, 1))
            np.argmax(sc[2], axis=2, out=i)
        else:
            np.argmax(xs[0].reshape(outer, n), axis=1, out=i.reshape(outer))
        np.multiply(i, self.stride, out=i)
        np.add(i, self.base, out=i)
        np.take(xs[0].reshape(-1), i, out=v, mode="wrap")     # a NaN row: 0
        np.equal(v, v, out=v)
        ys[0].fill(0)
        np.put(ys[0].reshape(-1), i, v, mode="wrap")


@register
class NllLoss(Kernel):
    """NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (the NLL of
    the log-softmax over axis 1, which is also its optional second
    output): -input[n, target[n, ...], ...] times the target's class
    weight, 0 where the target is ``ignore_index``; reduction "none", "sum"
    or "mean" (the weighted mean: divided by the weights of the targets
    kept).  One gather along the class axis; the log-softmax in the
    scratch (or the second output)."""

    op_types = ('NegativeLogLikelihoodLoss', 'SoftmaxCrossEntropyLoss')
    family = 'reduce'
    inplace = 'none'
    shape_rule = {'NegativeLogLikelihoodLoss': rules.nll_loss,
                  'SoftmaxCrossEntropyLoss': rules.softmax_cross_entropy}

    def setup(self):
        xs, ts = self.shape(0), self.shape(1)
        if len(xs) < 2 or ts != xs[:1] + xs[2:]:
            self.malformed(f"target {list(ts)} does not fit input {list(xs)} (N, C, d1...)")
        red = self.attrs.get("reduction", "mean")
        self.reduction = red.decode() if isinstance(red, bytes) else str(red)
        if self.reduction not in ("none", "sum", "mean"):
            self.fail(f"reduction must be none, sum or mean, not {self.reduction!r}")
        ignore = self.attrs.get("ignore_index")
        self.ignore = None if ignore is None else int(ignore)
        self.softmax = self.op.op_type == 'SoftmaxCrossEntropyLoss'
        self.classes = xs[1]
        self.weighted = self.has(2)
        self.lp_out = self.softmax and len(self.outs) > 1
        self.scratch = [(xs, self.dtype)] if self.softmax and not self.lp_out else []
        if self.softmax:
            self.scratch.append((xs[:1] + (1,) + xs[2:], self.dtype))

    def run(self, xs, ys, sc):
        x, target = xs[0], xs[1].astype(np.int64, copy=False)
        if self.softmax:        # log_softmax over the classes
            lp = ys[1] if self.lp_out else sc[0]
            m = sc[-1]
            np.maximum.reduce(x, axis=1, out=m, keepdims=True)
            np.subtract(x, m, out=lp)
            np.exp(lp, out=lp)
            np.add.reduce(lp, axis=1, out=m, keepdims=True)
            np.log(m, out=m)
            np.subtract(x, m, out=lp)
            np.subtract(lp, np.max(x, axis=1, keepdims=True), out=lp)
            x = lp
        kept = np.ones(target.shape, bool) if self.ignore is None else target != self.ignore
        t = np.where(kept, target, 0)
        if t.size and (t.min() < 0 or t.max() >= self.classes):
            raise InvalidArgumentError(
                f"operator {self.op.name!r} ({self.op.op_type}): target classes must lie in "
                f"[0, {self.classes}) (or be ignore_index), got {int(t.min())}..{int(t.max())}")
        loss = -np.take_along_axis(x, t[:, None], axis=1)[:, 0]
        w = xs[2][t] * kept if self.weighted else kept.astype(x.dtype)
        loss = loss * w
        if self.reduction == "none":
            np.copyto(ys[0], loss)
        elif self.reduction == "sum":
            np.copyto(ys[0], loss.sum())
        else:
            with np.errstate(divide="ignore", invalid="ignore"):
                np.copyto(ys[0], loss.sum() / w.sum())
