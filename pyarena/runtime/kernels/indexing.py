"""Indexing kernels: GatherElements, GatherND, ScatterElements, ScatterND,
OneHot, ArgMax / ArgMin, TopK, CumSum, Trilu, Range, Shape and Size; and
the ops whose output sizes the data tells (NonZero, Compress, Unique: pool
tensors, see runtime/dynamic.py).

The gathers and scatters turn their run-time indices into flat offsets in
an int64 scratch buffer of the indices' shape (negative indices wrapped
with ``numpy.mod``, plus the offsets of the other axes, a constant made at
setup and kept in the weights arena), then move the data with
``numpy.take`` / ``numpy.put`` (``mode="wrap"``: no bounds-check buffer)
or ``ufunc.at`` for a scatter's reduction.  An index outside its axis
(which ONNX leaves undefined) is refused, as onnxruntime refuses it
(``Kernel.check_indices``: a GraphError for constant indices, an
InvalidArgumentError at run time).
Constant indices are turned into offsets once, at setup (no scratch).
Nothing here allocates at run time but TopK and Unique, which sort
(``numpy.argsort`` returns a new array), and the data-sized ops.  None may write in place
("none") but Trilu, which reads each element before it writes it
("unary").
"""
import math

import numpy as np

from . import evaluators as ev
from . import shape_rules as rules
from . import shape_rules_movement as moves
from . import tflite_attrs as tfl
from .registry import Kernel, const, register


def _axis(a, nd):
    a = int(a)
    return a + nd if a < 0 else a


def _other_offsets(shape, dshape, axis):
    """For each position of an index tensor of ``shape``, the flat offset
    in a C-ordered array of ``dshape`` of every coordinate but ``axis``."""
    strides = [math.prod(dshape[k + 1:]) for k in range(len(dshape))]
    base = np.zeros(shape, np.int64)
    for k, n in enumerate(shape):
        if k != axis:
            r = np.arange(n, dtype=np.int64) * strides[k]
            base += r.reshape((-1,) + (1,) * (len(shape) - k - 1))
    return base


class _Elements(Kernel):
    """Shared by GatherElements and ScatterElements: flat offsets of the
    indices (input 1) along ``axis`` of the data (input 0)."""

    def setup(self):
        ds, ishape = self.shape(0), self.shape(1)
        self.axis = _axis(self.attrs.get("axis", 0), len(ds))
        self.dim = const(ds[self.axis], np.int64)
        self.stride = const(math.prod(ds[self.axis + 1:]), np.int64)
        self.scratch = [(ishape, np.int64)]
        self.fixed = None
        if self.sizing:     # only the scratch is asked: no offsets (as large as the indices)
            self.base = None
        else:
            self.base = self.keep(_other_offsets(ishape, ds, self.axis))
        if self.ins[1].data is not None:        # constant indices: offsets once
            self.check_indices(self.ins[1].data, ds[self.axis], constant=True)
            if not self.sizing:
                flat = np.empty(ishape, np.int64)
                self.fixed = self.keep(self.offsets(np.asarray(self.ins[1].data), flat))
            self.scratch = []
            self.runtime = tuple(i for i in range(len(self.ins)) if i != 1)

    def flat(self, xs, sc):
        if self.fixed is not None:
            return self.fixed
        self.check_indices(xs[1], int(self.dim))
        return self.offsets(xs[1], sc[0])

    def offsets(self, idx, flat):
        np.copyto(flat, idx, casting="unsafe")
        np.mod(flat, self.dim, out=flat)
        np.multiply(flat, self.stride, out=flat)
        np.add(flat, self.base, out=flat)
        return flat


@register
class GatherElements(_Elements):
    op_types = ("GatherElements",)
    family = "indexing"
    shape_rule = moves.gather_elements

    def run(self, xs, ys, sc):
        np.take(xs[0].reshape(-1), self.flat(xs, sc), out=ys[0], mode="wrap")


_AT = {"add": np.add, "mul": np.multiply, "max": np.maximum, "min": np.minimum}


def _reduction(kernel):
    r = str(kernel.attrs.get("reduction", "none"))
    if r != "none" and r not in _AT:
        kernel.fail(f"reduction {r!r} is not supported (none, add, mul, max, min)")
    return _AT.get(r)


@register
class ScatterElements(_Elements):
    """``reduction`` none (the last of duplicate indices wins, as
    ``numpy.put`` writes in order), add, mul, max or min (``ufunc.at``)."""

    op_types = ("ScatterElements", "Scatter")
    family = "indexing"
    shape_rule = rules.same

    def setup(self):
        super().setup()
        self.at = _reduction(self)

    def run(self, xs, ys, sc):
        y = ys[0]
        np.copyto(y, xs[0])
        flat = self.flat(xs, sc)
        if self.at is None:
            np.put(y.reshape(-1), flat, xs[2], mode="wrap")
        else:
            self.at.at(y.reshape(-1), flat.reshape(-1), xs[2].reshape(-1))


class _ND(Kernel):
    """Shared by GatherND and ScatterND: the row of each index tuple (last
    axis of input 1) in the data seen as (rows, inner)."""

    def setup(self):
        ds, ishape = self.shape(0), self.shape(1)
        b = int(self.attrs.get("batch_dims", 0))
        k = ishape[-1]
        if b + k > len(ds):
            self.malformed(f"indices of depth {k} (batch_dims {b}) into data of rank "
                           f"{len(ds)}")
        self.dims = [const(d, np.int64) for d in ds[b:b + k]]
        self.rows = math.prod(ds[:b + k])
        self.inner = math.prod(ds[b + k:])
        lead = ishape[:-1]
        per_batch = math.prod(ds[b:b + k])
        nb = math.prod(lead[:b])
        self.base = self.keep((np.arange(nb, dtype=np.int64) * per_batch).reshape(
            lead[:b] + (1,) * (len(lead) - b))) if b else None
        self.scratch = [(lead, np.int64), (lead, np.int64)]
        self.fixed = None
        if self.ins[1].data is not None:        # constant indices: rows once
            self.check_tuples(np.asarray(self.ins[1].data), constant=True)
            if not self.sizing:
                tmp = [np.empty(lead, np.int64), np.empty(lead, np.int64)]
                self.fixed = self.keep(self.row_of(np.asarray(self.ins[1].data), tmp))
            self.scratch = []
            self.runtime = tuple(i for i in range(len(self.ins)) if i != 1)

    def rows_for(self, xs, sc):
        if self.fixed is not None:
            return self.fixed
        self.check_tuples(xs[1])
        return self.row_of(xs[1], sc)

    def check_tuples(self, idx, constant=False):
        """Each index tuple's j-th entry within axis j's size."""
        for j, d in enumerate(self.dims):
            self.check_indices(idx[..., j], int(d), f"indexed axis {j}", constant)

    def row_of(self, idx, sc):
        rows, col = sc
        rows.fill(0)
        for j, d in enumerate(self.dims):
            np.copyto(col, idx[..., j], casting="unsafe")
            np.mod(col, d, out=col)
            np.multiply(rows, d, out=rows)
            np.add(rows, col, out=rows)
        if self.base is not None:
            np.add(rows, self.base, out=rows)
        return rows


@register
class GatherND(_ND):
    op_types = ("GatherND",)
    family = "indexing"
    shape_rule = moves.gather_nd
    tflite = {"GATHER_ND": ("GatherND", {})}

    def run(self, xs, ys, sc):
        rows = self.rows_for(xs, sc)
        np.take(xs[0].reshape(self.rows, self.inner), rows, axis=0,
                out=ys[0].reshape(rows.shape + (self.inner,)), mode="wrap")


@register
class ScatterND(_ND):
    """``reduction`` none, add, mul, max or min; with none, duplicate
    indices are undefined in ONNX (here the last wins)."""

    op_types = ("ScatterND",)
    family = "indexing"
    shape_rule = rules.same

    def setup(self):
        super().setup()
        if int(self.attrs.get("batch_dims", 0)):
            self.fail("ScatterND has no batch_dims")
        self.at = _reduction(self)

    def run(self, xs, ys, sc):
        y = ys[0]
        np.copyto(y, xs[0])
        rows = self.rows_for(xs, sc).reshape(-1)
        yv = y.reshape(self.rows, self.inner)
        upd = xs[2].reshape(-1, self.inner)
        if self.at is None:
            yv[rows] = upd
        else:
            self.at.at(yv, rows, upd)


@register
class OneHot(Kernel):
    """depth constant (or a run-time value the kernel is built for);
    values (off, on) read at run time; indices outside [-depth, depth)
    give a row of ``off`` values."""

    op_types = ("OneHot",)
    family = "indexing"
    shape_rule = moves.one_hot
    fold = "expanding"

    def setup(self):
        self.runtime = (0, 2)
        depth = int(np.asarray(self.const(1, "depth")).reshape(-1)[0])
        if math.prod(self.shape(2)) != 2:
            self.malformed(f"values must hold two elements (off, on), not "
                           f"{list(self.shape(2))}")
        ishape = self.shape(0)
        ax = _axis(self.attrs.get("axis", -1), len(ishape) + 1)
        inner = math.prod(ishape[ax:])
        self.depth, self.inner = const(depth, np.int64), const(inner, np.int64)
        self.lo = const(-depth, np.int64)
        outer = np.arange(math.prod(ishape[:ax]), dtype=np.int64) * depth * inner
        base = outer.reshape(-1, 1) + np.arange(inner, dtype=np.int64)
        self.base = self.keep(base.reshape(ishape))
        self.scratch = [(ishape, np.int64), (ishape, np.bool_), (ishape, np.bool_),
                        (ishape, self.dtype)]

    def run(self, xs, ys, sc):
        flat, ok, hi, vals = sc
        pair = xs[2].reshape(-1)
        off, on = pair[:1], pair[1:]            # views: copyto broadcasts them
        np.copyto(flat, xs[0], casting="unsafe")
        np.greater_equal(flat, self.lo, out=ok)
        np.less(flat, self.depth, out=hi)
        np.logical_and(ok, hi, out=ok)
        np.copyto(vals, off)
        np.copyto(vals, on, where=ok)
        np.mod(flat, self.depth, out=flat)       # an invalid index writes off in its own row
        np.multiply(flat, self.inner, out=flat)
        np.add(flat, self.base, out=flat)
        np.copyto(ys[0], off)
        np.put(ys[0].reshape(-1), flat, vals, mode="wrap")


@register
class ArgMax(Kernel):
    """``keepdims``, ``select_last_index`` (the first match of the reversed
    axis, counted from the end).  ``numpy.argmax`` copies an operand whose
    axis is not the last, contiguous one: unless the axis is already that,
    the input is first copied (reversed if need be) into scratch laid out
    (outer, inner, axis).  An int32 output (TFLite ``output_type``) is
    written through an int64 scratch (``numpy.argmax`` writes intp only).

    NaN as onnxruntime (ReduceAggregatorArgMax / ArgMin,
    onnxruntime/core/providers/cpu/reduction/reduction_ops.h): a scan from
    element 0 that moves on ``v > best`` (``>=`` with select_last_index), so
    a NaN is never chosen, except that a NaN at index 0 stops every move (the
    answer is 0).  ``numpy.argmax`` picks the first NaN instead; the rows
    where it did are answered again (:func:`_nan_rows`)."""

    op_types = ("ArgMax", "ArgMin")
    family = "reduce"
    shape_rule = moves.arg_reduce
    tflite = {"ARG_MAX": ("ArgMax", {}, tfl.arg_max), "ARG_MIN": ("ArgMin", {}, tfl.arg_max)}

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        ax = _axis(self.attrs.get("axis", 0), len(xs))
        self.f = np.argmax if self.op.op_type == "ArgMax" else np.argmin
        self.last = bool(int(self.attrs.get("select_last_index", 0)))
        n = xs[ax]
        self.view = (math.prod(xs[:ax]), n, math.prod(xs[ax + 1:]))
        self.n1 = const(n - 1, np.int64)
        self.direct = self.view[2] == 1 and not self.last
        self.scratch = [] if self.direct else \
            [((self.view[0], self.view[2], n), self.ins[0].dtype)]
        self.narrow = self.dtype != np.intp
        if self.narrow:
            self.scratch.append(((self.view[0], self.view[2]), np.intp))
        self.floating = np.issubdtype(self.ins[0].dtype, np.floating)
        if self.floating:   # the chosen values' flat index, value, is-NaN (+ any)
            rows = self.view[0] * self.view[2]
            self.flat = self.keep(np.arange(rows, dtype=np.intp) * n)
            self.nan_sc = len(self.scratch)
            self.scratch += [((rows,), np.intp), ((rows,), self.ins[0].dtype),
                             ((rows + 1,), np.bool_)]

    def run(self, xs, ys, sc):
        outer, n, inner = self.view
        y = sc[0 if self.direct else 1] if self.narrow else ys[0].reshape(outer, inner)
        if self.direct:
            a, y = xs[0].reshape(outer, n), y.reshape(outer)
        else:
            src = xs[0].reshape(self.view).transpose(0, 2, 1)
            np.copyto(sc[0], src[..., ::-1] if self.last else src)
            a = sc[0]
        self.f(a, axis=-1, out=y)
        if self.floating:       # did numpy choose a NaN anywhere?  (no allocation)
            i, v, hit = sc[self.nan_sc:self.nan_sc + 3]
            np.add(self.flat, y.reshape(-1), out=i)
            np.take(a.reshape(-1), i, out=v, mode="clip")
            np.isnan(v, out=hit[:-1])
            np.logical_or.reduce(hit[:-1], axis=0, keepdims=True, out=hit[-1:])
            if hit[-1]:
                _nan_rows(a, y, hit[:-1].reshape(y.shape), self.f is np.argmax, self.last)
        if self.last:
            np.subtract(self.n1, y, out=y)
        if self.narrow:
            np.copyto(ys[0].reshape(outer, inner), y, casting="unsafe")


def _nan_rows(a, y, bad, is_max, reversed_):
    """Answer again, as onnxruntime's scan does, the rows ``bad`` of ``a``
    (the axis last; reversed for select_last_index, so the scan's first
    element is the row's last) where ``numpy.argmax`` / ``argmin`` chose a
    NaN: the first index of the extreme of the non-NaN values, or the
    scan's first element when that is a NaN (no comparison with it is ever
    true)."""
    rows = a[bad]
    best = (np.fmax if is_max else np.fmin).reduce(rows, axis=-1)   # NaN ignored
    idx = np.argmax(rows == best[:, None], axis=-1)
    start = -1 if reversed_ else 0
    idx[np.isnan(rows[:, start])] = rows.shape[1] - 1 if reversed_ else 0
    y[bad] = idx


class _NumpyPool:
    """``empty`` from NumPy (an output size the model declares)."""

    @staticmethod
    def empty(shape, dtype):
        return np.empty(shape, dtype)


class _Declared(Kernel):
    """A one-output op whose output's length the data decides (``produce``
    makes it from a pool: a pool tensor, runtime/dynamic.py), run where the
    model declares that length: ``run`` holds the data to it."""

    def run(self, xs, ys, sc):
        y = self.produce(xs, ys, sc, _NumpyPool())[0]
        if y.shape != ys[0].shape:
            self.malformed(f"the data makes an output of shape {list(y.shape)}, the model "
                           f"declares {list(ys[0].shape)}")
        np.copyto(ys[0], y)


@register
class NonZero(_Declared):
    """The indices of the non-zero elements, (rank, count): the count is
    known only once the data is, so the output is a pool tensor, made by
    ``produce`` (runtime/dynamic.py); the kernel has no planned form."""

    op_types = ("NonZero",)
    family = "indexing"
    shape_rule = moves.nonzero
    fold = "expanding"
    data_sized = True

    def produce(self, xs, ys, sc, pool):
        x = xs[0]
        idx = np.nonzero(x.reshape(1) if x.ndim == 0 else x)
        y = pool.empty((max(x.ndim, 1), idx[0].size), np.int64)
        for i, row in enumerate(idx):
            y[i] = row
        return [y]


class _DataSized(Kernel):
    """An op whose output sizes the data tells: ``produce`` makes its pool
    outputs (None in ``ys``) from the pool (runtime/dynamic.py) and checks
    that the data keeps the sizes the model declares for the others;
    ``run`` is ``produce`` with every size declared.  Outputs by position."""

    outputs_by_position = True

    def run(self, xs, ys, sc):
        self.produce(xs, ys, sc, None)

    def out(self, ys, k, shape, dtype, pool):
        """Output ``k`` (of those the op has): the planned view, or a pool array."""
        if ys[k] is None:
            return pool.empty(tuple(shape), dtype)
        if ys[k].shape != tuple(shape):
            self.malformed(f"the data makes an output of shape {list(shape)}, the "
                           f"model declares {list(ys[k].shape)}")
        return ys[k]

    def place(self, values, ys, pool):
        """The op's outputs (by position) copied to their arrays."""
        out = []
        for name, v in zip(self.op.outputs, values):
            if name:
                y = self.out(ys, len(out), v.shape, v.dtype, pool)
                np.copyto(y, v)
                out.append(y)
        return out


@register
class Compress(_DataSized):
    """The slices along ``axis`` (the flattened input without one) where
    the 1-D condition is true; a condition shorter than the axis leaves
    the rest out, a longer one may only be false beyond it."""

    op_types = ("Compress",)
    family = "indexing"
    fold = "expanding"
    data_sized = True

    def produce(self, xs, ys, sc, pool):
        x, c = xs[0], xs[1].reshape(-1)
        axis = self.attrs.get("axis")
        if axis is None:
            x, axis = x.reshape(-1), 0
        axis = _axis(axis, x.ndim)
        n = x.shape[axis]
        if c.size > n:
            if np.any(c[n:]):
                self.malformed(f"the condition has {c.size} elements and is true beyond "
                               f"the {n} of axis {axis}")
            c = c[:n]
        shape = list(x.shape)
        shape[axis] = int(np.count_nonzero(c))
        y = self.out(ys, 0, shape, x.dtype, pool)
        np.compress(c, x, axis=axis, out=y)
        return [y]


@register
class Unique(_DataSized):
    """Y, the index of each one's first occurrence, the inverse indices and
    the counts, over the flattened input or the slices along ``axis``;
    ``sorted`` 0 keeps the order of first occurrence.  Sorts with NumPy
    (allocates), then the outputs go to the pool."""

    op_types = ("Unique",)
    family = "indexing"
    fold = "expanding"
    data_sized = True

    def produce(self, xs, ys, sc, pool):
        x, axis = xs[0], self.attrs.get("axis")
        if axis is None:
            x, axis = x.reshape(-1), 0
        axis = _axis(axis, x.ndim)
        y, first, inverse, counts = np.unique(x, True, True, True, axis=axis)
        inverse = inverse.reshape(-1)
        if not int(self.attrs.get("sorted", 1)):
            order = np.argsort(first, kind="stable")
            rank = np.empty_like(order)
            rank[order] = np.arange(order.size)
            first, counts, inverse = first[order], counts[order], rank[inverse]
            y = np.take(x, first, axis=axis)
        return self.place([y] + [a.astype(np.int64) for a in (first, inverse, counts)],
                          ys, pool)


@register
class TopK(Kernel):
    """k constant; ``largest`` (default 1) and ``sorted`` (always sorted
    here, which ONNX allows); equal values keep the lower index first.
    Either output may be unused (the indices then go to scratch).
    Allocates: ``numpy.argsort`` returns a new array."""

    op_types = ("TopK",)
    family = "indexing"
    shape_rule = moves.topk
    outputs_by_position = True

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        self.axis = _axis(self.attrs.get("axis", -1), len(xs))
        if self.has(1):
            self.k = int(np.asarray(self.const(1, "k")).reshape(-1)[0])
        elif "k" in self.attrs:         # opset 1: an attribute
            self.k = int(self.attrs["k"])
        else:
            self.malformed("k is missing (neither input 1 nor the attribute)")
        if not 0 <= self.k <= xs[self.axis]:
            self.malformed(f"k={self.k} outside [0, {xs[self.axis]}]")
        self.largest = bool(int(self.attrs.get("largest", 1)))
        self.n1 = const(xs[self.axis] - 1, np.int64)
        named = list(self.op.outputs) + ["", ""]
        self.has_vals, self.has_idx = bool(named[0]), bool(named[1])
        if not self.has_idx:
            self.scratch = [(self.oshape(), np.int64)]

    def run(self, xs, ys, sc):
        x, ax, k = xs[0], self.axis, self.k
        vals = ys[0] if self.has_vals else None
        idx = ys[-1] if self.has_idx else sc[0]
        if self.largest:
            # stable sort of the reversed axis: ties come out highest index first,
            # so reading from the end puts the lower original index first
            order = np.argsort(np.flip(x, ax), axis=ax, kind="stable")
            top = np.flip(np.take(order, range(order.shape[ax] - k, order.shape[ax]), ax), ax)
            np.subtract(self.n1, top, out=idx)
        else:
            order = np.argsort(x, axis=ax, kind="stable")
            np.copyto(idx, np.take(order, range(k), ax))
        if vals is not None:
            np.copyto(vals, np.take_along_axis(x, idx, ax))


@register
class EyeLike(Kernel):
    """Ones on the k-th diagonal of a 2-D output shaped like the input (of
    its type or ``dtype``), zeros elsewhere: a fill, then the diagonal
    written through one strided view of the flat output."""

    op_types = ("EyeLike",)
    family = "indexing"
    shape_rule = moves.eye_like
    fold = "expanding"

    def setup(self):
        self.runtime = ()
        shp = self.oshape()
        if len(shp) != 2:
            self.fail(f"takes a 2-D input, not shape {list(shp)}")
        n, m = shp
        k = int(self.attrs.get("k", 0))
        count = min(n, m - k) if k >= 0 else min(n + k, m)
        start = k if k >= 0 else -k * m
        self.diag = slice(start, start + max(count, 0) * (m + 1), m + 1) if count > 0 \
            else None

    def run(self, xs, ys, sc):
        y = ys[0]
        y.fill(0)
        if self.diag is not None:
            y.reshape(-1)[self.diag] = 1


@register
class CumSum(Kernel):
    """CumSum, CumProd (opset 26): axis constant; ``exclusive`` sums
    (multiplies) into the output shifted by one (its first slice 0, 1),
    ``reverse`` works on reversed views."""

    op_types = ("CumSum", "CumProd")
    family = "indexing"
    shape_rule = rules.same
    fold = "expanding"
    tflite = {"CUMSUM": ("CumSum", {}, tfl.cumsum)}

    def setup(self):
        self.runtime = (0,)
        nd = len(self.shape(0))
        self.axis = _axis(np.asarray(self.const(1, "axis")).reshape(-1)[0], nd)
        self.exclusive = bool(int(self.attrs.get("exclusive", 0)))
        self.reverse = bool(int(self.attrs.get("reverse", 0)))
        prod = self.op.op_type == "CumProd"
        self.f, self.start = (np.cumprod, 1) if prod else (np.cumsum, 0)
        cut = [slice(None)] * nd
        self.head, self.tail, self.first = list(cut), list(cut), list(cut)
        self.head[self.axis] = slice(0, -1)
        self.tail[self.axis] = slice(1, None)
        self.first[self.axis] = slice(0, 1)
        self.head, self.tail, self.first = map(tuple, (self.head, self.tail, self.first))

    def run(self, xs, ys, sc):
        x, y, ax = xs[0], ys[0], self.axis
        if self.reverse:
            x, y = np.flip(x, ax), np.flip(y, ax)
        if self.exclusive:
            if y.shape[ax]:
                y[self.first].fill(self.start)
                self.f(x[self.head], axis=ax, out=y[self.tail])
        else:
            self.f(x, axis=ax, out=y)


@register
class Trilu(Kernel):
    """k constant (default 0); the elements outside the band set to 0."""

    op_types = ("Trilu",)
    family = "indexing"
    inplace = "unary"
    shape_rule = rules.same
    fold = "expanding"

    def setup(self):
        self.runtime = (0,)
        xs = self.shape(0)
        k = int(np.asarray(self.const(1, "k")).reshape(-1)[0]) if self.has(1) else 0
        n, m = xs[-2:]
        d = np.arange(m)[None, :] - np.arange(n)[:, None]
        drop = d < k if int(self.attrs.get("upper", 1)) else d > k
        self.drop = self.keep(drop)
        self.zero = const(0, self.dtype)

    def run(self, xs, ys, sc):
        np.copyto(ys[0], xs[0])
        np.copyto(ys[0], self.zero, where=self.drop)


@register
class Range(Kernel):
    """start and delta read at run time, the length known at import (the
    output's shape): y = start + delta * [0, 1, ..., n-1].  When the length
    depends on data the output is a pool tensor, made by ``produce``."""

    op_types = ("Range",)
    family = "indexing"
    shape_rule = moves.arange
    evaluate = ev.arange
    fold = "expanding"

    def setup(self):
        self.runtime = (0, 2)
        if self.outs[0].shape is None or self.sizing:   # a pool tensor: see produce
            return
        (n,) = self.oshape()
        self.ramp = self.keep(np.arange(n, dtype=self.dtype))

    def produce(self, xs, ys, sc, pool):
        start, limit, delta = (x.reshape(()) for x in xs[:3])
        n = max(int(np.ceil(float(limit - start) / float(delta))), 0)
        y = pool.empty((n,), self.dtype) if ys[0] is None else ys[0]
        if y.shape != (n,):
            self.malformed(f"the bounds give {n} values, the model declares {y.shape[0]}")
        np.multiply(np.arange(n, dtype=self.dtype), delta, out=y)
        np.add(y, start, out=y)
        return [y]

    def run(self, xs, ys, sc):
        np.multiply(self.ramp, xs[2], out=ys[0])
        np.add(ys[0], xs[0], out=ys[0])


@register
class Shape(Kernel):
    """The (static) shape of input 0, ``start`` / ``end`` clamped as in
    ONNX; Size its element count.  Normally folded at import."""

    op_types = ("Shape", "Size")
    family = "indexing"
    shape_rule = {"Shape": moves.shape_of, "Size": moves.size_of}
    evaluate = {"Shape": ev.shape, "Size": ev.size}
    fold = "free"
    needs_values = False        # the input's shape only

    def setup(self):
        self.runtime = ()
        shp = np.asarray(self.shape(0), np.int64)
        if self.op.op_type == "Size":
            self.value = self.keep(np.asarray(shp.prod(), np.int64))
        else:
            self.value = self.keep(shp[self.attrs.get("start", 0):self.attrs.get("end")])

    def run(self, xs, ys, sc):
        np.copyto(ys[0], self.value)
