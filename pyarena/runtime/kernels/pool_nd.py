"""Window pooling over any number of spatial axes, in NumPy: what
:class:`.pooling.WindowPool` and :class:`.pooling.LpPool` run for 3-D (and
more) spatial inputs and for a MaxPool asked for its Indices output (the
1-D and 2-D forms without Indices keep their own paths, native ones
included).

The image planes (N * C of them, NCHW only) go in groups: a group is
copied into the scratch padded with -inf (max) or 0 (average, Lp), every
kernel tap then is one strided view of it reduced into the output with one
ufunc call -- a loop over the taps, never over elements.  The average's
divisor is separable: per axis, how many taps of each output position fall
in the image (or in the explicit pads, ``count_include_pad``; never in a
ceil-mode overhang), and the product over the axes.  Indices (MaxPool):
the first tap that holds the maximum (a strictly greater value replaces
it, as onnxruntime and ONNX's reference), turned at the end into the flat
index of the input, row-major, or column-major over H and W with
``storage_order=1`` (2-D only).
"""
import itertools
import math

import numpy as np

from .registry import const, items_per_step
from .spatial import pads_for

__all__ = ["wants_nd", "setup_nd", "run_nd"]


def wants_nd(k):
    """True when kernel ``k`` (a window pool) runs here."""
    return len(k.shape(0)) - 2 >= 3 or len(k.op.outputs) > 1 and bool(k.op.outputs[1])


def setup_nd(k, pad_value, average=True):
    """Geometry, divisor (not ``average``: a plain sum, LpPool's) and scratch
    of window pool ``k`` over N-D planes."""
    xs, ys = k.shape(0), k.oshape()
    nsp = len(xs) - 2
    if nsp < 1:
        k.malformed(f"input {list(xs)} has no spatial axis")
    if k.attrs.get("layout", "NCHW") == "NHWC":
        k.fail(f"NHWC layout with {nsp}-D spatial input or the Indices output is not supported")
    ks = [int(v) for v in k.attrs["kernel_shape"]]
    st = [int(v) for v in k.attrs.get("strides", [1] * nsp)]
    dil = [int(v) for v in k.attrs.get("dilations", [1] * nsp)]
    if not len(ks) == len(st) == len(dil) == nsp or min(ks + st + dil) < 1:
        k.malformed(f"kernel_shape {ks}, strides {st} and dilations {dil} must be {nsp} "
                    f"positive integers each (input {list(xs)})")
    sp_in, sp_out = list(xs[2:]), list(ys[2:])
    if len(ys) != len(xs) or tuple(ys[:2]) != tuple(xs[:2]) or min(sp_out, default=1) < 1:
        k.malformed(f"inconsistent output shape {list(ys)} for input {list(xs)}")
    pads = pads_for(k.attrs, sp_in, ks, st, dil)
    if len(pads) != 2 * nsp or min(pads) < 0:
        k.malformed(f"pads {pads} must be {2 * nsp} non-negative integers")
    begin, end = pads[:nsp], pads[nsp:]
    reach = [(o - 1) * s + (kk - 1) * d + 1 for o, s, kk, d in zip(sp_out, st, ks, dil)]
    if any(b >= (kk - 1) * d + 1 for b, kk, d in zip(begin, ks, dil)) or \
            any((o - 1) * s >= b + n for o, s, b, n in zip(sp_out, st, begin, sp_in)):
        k.malformed(f"output {list(ys)} has windows that lie in the padding alone (input "
                    f"{list(xs)}, kernel {ks}, pads {pads})")
    k.nd = nd = _Geometry(xs, sp_out, ks, st, dil, begin, end, reach)
    k.pad_value = const(pad_value, k.dtype)
    k.nd_indices = len(k.op.outputs) > 1 and bool(k.op.outputs[1])
    k.col_major = bool(int(k.attrs.get("storage_order", 0)))
    if k.col_major and nsp != 2:
        k.fail(f"storage_order=1 with {nsp}-D spatial input is not supported (2-D only)")
    k.native = None
    k.div = None
    if not k.is_max and average and not k.sizing:
        cip = bool(int(k.attrs.get("count_include_pad", 0)))
        cnt = np.ones((), np.float64)
        for a in range(nsp):
            lo, hi = (0, sp_in[a] + begin[a] + end[a]) if cip else \
                (begin[a], begin[a] + sp_in[a])
            pos = (np.arange(sp_out[a])[:, None] * st[a] + np.arange(ks[a])[None] * dil[a])
            c = ((pos >= lo) & (pos < hi)).sum(axis=1)
            cnt = np.multiply.outer(cnt, c)
        k.div = k.keep((1.0 / np.maximum(cnt, 1)).astype(k.dtype))
    planes = xs[0] * xs[1]
    group = items_per_step(k.scratch_budget, math.prod(nd.padded) * k.dtype.itemsize,
                           max(planes, 1), math.prod(sp_out) * math.prod(ks))
    nd.group = group
    k.scratch = [((group,) + tuple(nd.padded), k.dtype)] if nd.is_padded else []
    if k.nd_indices:
        k.scratch = k.scratch + [((group,) + tuple(sp_out), np.int64)] + \
            [((group,) + tuple(sp_out), np.bool_)]


class _Geometry:
    def __init__(self, xs, sp_out, ks, st, dil, begin, end, reach):
        self.xs, self.sp_in, self.sp_out = tuple(xs), list(xs[2:]), list(sp_out)
        self.ks, self.st, self.dil, self.begin = ks, st, dil, begin
        # the padded extent: explicit pads, and ceil-mode overhang read as padding
        self.padded = [max(n + b + e, r) for n, b, e, r in zip(self.sp_in, begin, end, reach)]
        self.is_padded = self.padded != self.sp_in
        self.inner = tuple(slice(b, b + n) for b, n in zip(begin, self.sp_in))
        self.taps = list(itertools.product(*[range(kk) for kk in ks]))

    def tap(self, src, t):
        """The view of ``src`` (group, *padded) tap ``t`` reads for every
        output position."""
        return src[(slice(None),) + tuple(
            slice(j * d, j * d + (o - 1) * s + 1, s)
            for j, d, o, s in zip(t, self.dil, self.sp_out, self.st))]


def run_nd(k, xs, ys, sc):
    nd = k.nd
    x = xs[0].reshape((-1,) + tuple(nd.sp_in))
    y = ys[0].reshape((-1,) + tuple(nd.sp_out))
    f = np.maximum if k.is_max else np.add
    sc = list(sc)
    buf = sc.pop(0) if nd.is_padded else None
    arg, better = (sc[0], sc[1]) if k.nd_indices else (None, None)
    for p0 in range(0, x.shape[0], nd.group):
        p1 = min(p0 + nd.group, x.shape[0])
        if buf is None:
            src = x[p0:p1]
        else:
            src = buf[:p1 - p0]
            src.fill(k.pad_value)
            np.copyto(src[(slice(None),) + nd.inner], x[p0:p1])
        yb = y[p0:p1]
        np.copyto(yb, nd.tap(src, nd.taps[0]))
        if arg is not None:
            ab, gb = arg[:p1 - p0], better[:p1 - p0]
            ab.fill(0)
        for i, t in enumerate(nd.taps[1:], 1):
            v = nd.tap(src, t)
            if arg is not None:
                np.greater(v, yb, out=gb)
                np.copyto(ab, i, where=gb)
            f(yb, v, out=yb)
        if arg is not None:
            _flat_indices(k, ab, p0, ys[1].reshape((-1,) + tuple(nd.sp_out))[p0:p1])
    if not k.is_max and k.div is not None:
        np.multiply(y, k.div, out=y)


def _flat_indices(k, tap, p0, out):
    """Tap numbers (group, *out) into flat input indices, written to ``out``."""
    nd = k.nd
    nsp = len(nd.sp_in)
    plane = math.prod(nd.sp_in)
    np.copyto(out, (np.arange(p0, p0 + tap.shape[0]) * plane).reshape((-1,) + (1,) * nsp))
    rest = tap
    # strides of the input's spatial axes in the flat index
    if k.col_major:         # (2-D) H fastest, then W
        steps = [1, nd.sp_in[0]]
    else:
        steps = [math.prod(nd.sp_in[a + 1:]) for a in range(nsp)]
    for a in range(nsp - 1, -1, -1):
        j = rest % nd.ks[a]
        rest = rest // nd.ks[a]
        o = np.arange(nd.sp_out[a]).reshape((-1,) + (1,) * (nsp - 1 - a))
        coord = o * nd.st[a] + j * nd.dil[a] - nd.begin[a]
        out += coord * steps[a]
