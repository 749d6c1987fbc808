"""NumPy evaluation of operators on known inputs (``Kernel.evaluate``).

The ONNX importer folds an operator whose inputs are all constants, and
its shape inference propagates the small values of shape arithmetic
(a ``Shape -> Gather -> Concat`` chain that makes a ``Reshape`` target);
the QDQ rewrite tabulates an element-wise function of an 8-bit input.
All three evaluate the operator here, in NumPy, when its kernel names an
evaluator -- otherwise the ONNX reference evaluator folds it (about 200
modules, 10 MiB) and its values are not propagated.

An evaluator takes a :class:`~.shape_rules.Node` view (``n.v(i)``: input
values, ``n.s(i)``: input shapes, ``n.a``: attributes, ``n.opset``) and
returns the list of output values, None when the op cannot be folded
here (an unknown shape, a result over :data:`FOLD_MAX_BYTES`), or
``NotImplemented`` to leave it to the reference evaluator (a form it does
not cover).
"""
import math

import numpy as np

from ...errors import ModelImportError
from ...graph import MAX_TENSOR_BYTES

__all__ = ["FOLD_MAX_BYTES", "check_dims", "ufunc", "arith", "power", "extreme",
           "identity", "cast", "cast_like", "bit_shift", "bit_cast", "shape", "size", "constant_of_shape", "unsqueeze", "squeeze",
           "concat", "gather", "reshape", "slice_values", "transpose", "arange", "expand"]

#: the largest value constant folding computes (bytes): shape arithmetic
FOLD_MAX_BYTES = 64 << 10


def check_dims(name, dims, itemsize=4):
    """ModelImportError naming tensor ``name`` for a negative or absurd
    shape, before anything is allocated."""
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise ModelImportError(f"tensor {name!r} has negative dimension {d} in shape "
                                   f"{list(dims)}")
    if all(isinstance(d, int) for d in dims):
        n = math.prod(dims) * itemsize
        if n > MAX_TENSOR_BYTES:
            raise ModelImportError(f"tensor {name!r} would need {n:,} bytes (shape "
                                   f"{list(dims)}): refusing an absurd size")


def _values(n):
    return [n.v(i) for i in range(len(n.ins))]


def _known(compute, name):
    """The evaluator of ``compute(values)`` (its result as an array):
    ``NotImplemented`` -- the reference evaluator folds it -- while an input
    value is unknown."""
    def evaluate(n):
        x = _values(n)
        if not x or any(v is None for v in x):
            return NotImplemented
        return [np.asarray(compute(x))]
    evaluate.__name__ = f"evaluate_{name}"
    return evaluate


def ufunc(fn):
    """The evaluator of ``y = fn(x)`` (one operand)."""
    return _known(lambda x: fn(x[0]), fn.__name__)


def arith(fn):
    """The evaluator of a binary arithmetic op: NumPy's result in the
    operands' common type, an integer Div truncated (ONNX) not floored."""
    def compute(x):
        r = fn(x[0], x[1])
        if fn is np.divide and x[0].dtype.kind in "iu":
            r = np.trunc(r)
        return np.asarray(r).astype(np.result_type(x[0], x[1]))
    return _known(compute, fn.__name__)


#: Pow: the base's type (ONNX)
power = _known(lambda x: np.asarray(np.power(x[0], x[1])).astype(np.asarray(x[0]).dtype),
               "power")


def extreme(fn):
    """Min / Max of any number of broadcast operands."""
    return _known(lambda x: fn.reduce(np.broadcast_arrays(*x)), fn.__name__)


def logical(fn, arity):
    """A comparison or boolean op of ``arity`` operands."""
    return _known(lambda x: fn(*x[:arity]), fn.__name__)


where = _known(lambda x: np.where(x[0], x[1], x[2]), "where")


def _bit_shift(x, s, left):
    """ONNX BitShift (opset 28): the amount read as unsigned; a shift by the
    width or more gives 0 (a right shift of a signed integer: its sign)."""
    bits = x.dtype.itemsize * 8
    s = np.ascontiguousarray(s, dtype=x.dtype).view(f"u{x.dtype.itemsize}")
    out_of_range = s >= bits
    amount = np.minimum(s, bits - 1).astype(x.dtype)
    if left:
        return np.where(out_of_range, 0, np.left_shift(x, amount)).astype(x.dtype)
    fill = (x < 0).astype(x.dtype) * -1 if x.dtype.kind == "i" else np.zeros_like(x)
    return np.where(out_of_range, fill, np.right_shift(x, amount)).astype(x.dtype)


def bit_shift(n):
    x, s = n.v(0), n.v(1)
    if x is None or s is None:
        return NotImplemented
    d = n.a.get("direction", "")
    return [_bit_shift(x, s, (d.decode() if isinstance(d, bytes) else d) == "LEFT")]


def bit_cast(n):
    """BitCast: the input's bytes read as the type ``to``."""
    x = n.v(0)
    return NotImplemented if x is None else [np.ascontiguousarray(x).view(n.dtype_of(n.a["to"]))]


def identity(n):
    """Identity, Dropout (inference): the input."""
    return [n.v(0)]


def cast(n):
    return [n.v(0).astype(n.dtype_of(n.a["to"]))]


def cast_like(n):
    """CastLike: the first input in the second's element type (its value
    unread: the type comes from the value when known, else from the graph)."""
    x, like = n.v(0), n.v(1)
    if x is None:
        return NotImplemented
    if like is not None:
        return [x.astype(like.dtype)]
    t = n.t(1)
    return NotImplemented if t is None else [x.astype(n.dtype_of(t))]


def shape(n):
    shp = n.s(0)
    if shp is None or not all(isinstance(d, int) for d in shp):
        return None
    s = np.asarray(shp, dtype=np.int64)
    return [s[n.a.get("start", 0):n.a.get("end", None)]]


def size(n):
    shp = n.s(0)
    if shp is None or not all(isinstance(d, int) for d in shp):
        return None
    return [np.asarray(math.prod(shp), dtype=np.int64)]


def constant_of_shape(n):
    shp = [int(d) for d in n.v(0).reshape(-1)]
    val = np.asarray(n.a.get("value", np.zeros(1, np.float32))).reshape(-1)
    check_dims(n.node.output[0], shp, val.dtype.itemsize)
    if math.prod(shp) * val.dtype.itemsize > FOLD_MAX_BYTES:
        return None     # a run-time op: its output is planned like any tensor
    return [np.full(shp, val[0], dtype=val.dtype)]


def unsqueeze(n):
    axes = n.a.get("axes") if n.opset < 13 else n.v(1)
    r = n.v(0)
    nd = r.ndim + len(axes)
    for ax in sorted(int(v) + nd if int(v) < 0 else int(v) for v in axes):
        r = np.expand_dims(r, ax)
    return [r]


def squeeze(n):
    axes = n.a.get("axes") if n.opset < 13 else (n.v(1) if len(n.ins) > 1 else None)
    if axes is None:
        return [np.squeeze(n.v(0))]
    return [np.squeeze(n.v(0), axis=tuple(int(v) for v in axes))]


def concat(n):
    return [np.concatenate([v for v in _values(n) if v is not None], axis=n.a["axis"])]


def gather(n):
    return [np.take(n.v(0), n.v(1).astype(np.int64), axis=n.a.get("axis", 0))]


def reshape(n):
    if n.opset < 5:
        return NotImplemented
    x = n.v(0)
    shp = [int(d) for d in n.v(1)]
    if not n.a.get("allowzero", 0):
        shp = [x.shape[i] if d == 0 else d for i, d in enumerate(shp)]
    return [x.reshape(shp)]


def slice_values(n):
    """ONNX Slice of a known value (starts / ends / axes / steps as inputs
    from opset 10, attributes before), clamped as the operator says."""
    x, a = _values(n), n.a
    data = x[0]
    if n.opset >= 10:
        starts, ends = [int(v) for v in x[1]], [int(v) for v in x[2]]
        axes = [int(v) for v in x[3]] if len(x) > 3 and x[3] is not None else None
        steps = [int(v) for v in x[4]] if len(x) > 4 and x[4] is not None else None
    else:
        starts, ends, axes, steps = list(a["starts"]), list(a["ends"]), a.get("axes"), None
    axes = list(range(len(starts))) if axes is None else [int(v) for v in axes]
    steps = [1] * len(starts) if steps is None else steps
    index = [slice(None)] * data.ndim
    for ax, st, en, sp in zip(axes, starts, ends, steps):
        if sp == 0:
            raise ValueError("Slice step 0")
        r = range(*slice(st, en, sp).indices(data.shape[ax]))   # ONNX's clamping
        index[ax] = slice(r.start, r.stop if r.stop >= 0 else None, r.step) if len(r) \
            else slice(0, 0)
    return [data[tuple(index)]]


def transpose(n):
    x = n.v(0)
    return NotImplemented if x is None else [np.asarray(np.transpose(x, n.a.get("perm")))]


def _arange(x):
    start, limit, delta = (v.reshape(()) for v in x)
    count = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + delta * np.arange(count)).astype(x[0].dtype)


arange = _known(_arange, "arange")


expand = _known(lambda x: np.broadcast_to(
    x[0], np.broadcast_shapes(x[0].shape, tuple(int(d) for d in x[1]))).copy(), "expand")
