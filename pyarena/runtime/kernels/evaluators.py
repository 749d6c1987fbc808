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

from ...errors import ModelImportError, UnsupportedOpError
from ...graph import MAX_TENSOR_BYTES

__all__ = ["FOLD_MAX_BYTES", "check_dims", "ufunc", "arith", "power", "extreme",
           "identity", "dropout", "dropout_trains", "DROPOUT_TRAINING", "cast",
           "cast_like", "saturation", "bit_shift", "bit_cast", "shape", "size",
           "constant_of_shape", "unsqueeze", "squeeze", "tile",
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


def trunc_divide(a, b, out, scratch):
    """``out = a / b`` for signed integers, rounded toward zero as ONNX (and
    C) divide -- NumPy's ``//`` floors.  ``a - fmod(a, b)`` is a multiple of
    ``b`` (computed in ``scratch``, the output's shape), so flooring its
    quotient is exact; no float round trip, so int64 keeps every bit.
    ``out`` may be ``a`` or ``b`` (each element is read before it is
    written)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        np.fmod(a, b, out=scratch)
        np.subtract(a, scratch, out=scratch)
        np.floor_divide(scratch, b, out=out)
    return out


def wide_power(a, b, out, scratch):
    """An integer base to a float exponent: in float64 (``scratch``), cast
    back to the base's type (ONNX's Pow keeps it), as :data:`power` folds."""
    np.power(a, b, out=scratch)
    np.copyto(out, scratch, casting="unsafe")
    return out


def arith(fn):
    """The evaluator of a binary arithmetic op: NumPy's result in the
    operands' common type, an integer Div truncated (ONNX) not floored."""
    def compute(x):
        a, b = np.asarray(x[0]), np.asarray(x[1])
        t = np.result_type(a, b)
        if fn is np.divide and t.kind in "iu":
            shape = np.broadcast_shapes(a.shape, b.shape)
            if t.kind == "u":
                return np.floor_divide(a, b).astype(t)
            return trunc_divide(a, b, np.empty(shape, t), np.empty(shape, t))
        return np.asarray(fn(a, b)).astype(t)
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
    """Identity: the input."""
    return [n.v(0)]


#: why a Dropout in training mode is refused (its output is random)
DROPOUT_TRAINING = "training mode (training_mode true, ratio > 0) is not supported"


def dropout_trains(ratio, training):
    """True when a Dropout with these input values (None: omitted) drops
    elements: training mode on and a ratio that is not 0."""
    if training is None or not bool(np.asarray(training)):
        return False
    return ratio is None or float(np.asarray(ratio)) != 0.0


def dropout(n):
    """Dropout in inference mode: the input (and an all-true mask);
    refused in training mode, which is random."""
    if n.has(2):
        if n.v(2) is None or (n.has(1) and n.v(1) is None):
            return NotImplemented
        if dropout_trains(n.v(1) if n.has(1) else 0.5, n.v(2)):
            raise UnsupportedOpError(f"Dropout: {DROPOUT_TRAINING}")
    x = n.v(0)
    if x is None:
        return NotImplemented
    return [x, np.ones(np.shape(x), np.bool_)][:max(1, n.nout)]


def saturation(src, to, saturate=1):
    """The largest value a cast from float ``src`` to ``to`` clamps to: a
    float8 type's largest finite value when ``saturate`` (ONNX's default);
    else None (NumPy's cast: what is out of range becomes NaN or inf)."""
    to = np.dtype(to)
    if "float8" not in to.name or np.dtype(src).kind != "f" or not int(saturate):
        return None
    if "e8m0" in to.name:
        raise UnsupportedOpError(f"a cast to {to.name} is not supported")
    import ml_dtypes
    return float(ml_dtypes.finfo(to).max)


def _cast(x, to, saturate):
    hi = saturation(x.dtype, to, saturate)
    return (x if hi is None else np.clip(x, -hi, hi)).astype(to)


def cast(n):
    return [_cast(n.v(0), n.dtype_of(n.a["to"]), n.a.get("saturate", 1))]


def cast_like(n):
    """CastLike: the first input in the second's element type (its value
    unread: the type comes from the value when known, else from the
    graph), saturating into a float8 type as Cast does."""
    x, like = n.v(0), n.v(1)
    if x is None:
        return NotImplemented
    if like is not None:
        to = np.asarray(like).dtype
    else:
        t = n.t(1)
        if t is None:
            return NotImplemented
        to = n.dtype_of(t)
    return [_cast(x, to, n.a.get("saturate", 1))]


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


def tile(n):
    """Tile of known values (NotImplemented for repeats that do not match
    the rank: the reference evaluator says what is wrong)."""
    x, reps = n.v(0), n.v(1)
    if x is None or reps is None:
        return NotImplemented
    reps = [int(r) for r in np.asarray(reps).reshape(-1)]
    if len(reps) != x.ndim or any(r < 0 for r in reps):
        return NotImplemented
    check_dims(n.node.output[0], [d * r for d, r in zip(x.shape, reps)], x.dtype.itemsize)
    return [np.tile(x, reps)]


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
