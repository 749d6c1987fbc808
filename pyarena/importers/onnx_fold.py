"""Evaluating ONNX nodes whose inputs are all known, for constant folding
at import: NumPy for the shape arithmetic real models use (Shape, Size,
ConstantOfShape, Cast, Gather, Slice, Concat, Reshape, Unsqueeze /
Squeeze, Transpose, Range, comparisons, Where, Min / Max, Expand, the
four arithmetic ops, dequantization), the ONNX reference evaluator for
anything else.  ``_attrs`` decodes a node's attributes (refusing
subgraphs), ``_check_dims`` refuses negative or absurd sizes before
anything is allocated.
"""
import math

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import MAX_TENSOR_BYTES
from ..runtime.kernels.quantization import dequantize

#: the largest value constant folding computes (bytes): shape arithmetic
FOLD_MAX_BYTES = 64 << 10


def _plain_dims(dims):
    """Whether every dimension is a plain int >= 0 (a tensor sized as it
    is; ``_check_dims`` then only needs its size compared)."""
    for d in dims:
        if type(d) is not int or d < 0:
            return False
    return True


def _check_dims(name, dims, itemsize=4):
    for d in dims:
        if isinstance(d, int) and d < 0:
            raise ModelImportError(f"tensor {name!r} has negative dimension {d} in shape "
                                   f"{list(dims)}")
    if all(isinstance(d, int) for d in dims):
        n = math.prod(dims) * itemsize
        if n > MAX_TENSOR_BYTES:
            raise ModelImportError(f"tensor {name!r} would need {n:,} bytes (shape "
                                   f"{list(dims)}): refusing an absurd size")


def _attrs(onnx, node):
    out = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            raise UnsupportedOpError(f"operator {node.name!r} ({node.op_type}): subgraph "
                                     f"attributes are not supported")
        if not isinstance(a.name, str):     # protobuf hands invalid UTF-8 back as bytes
            raise ModelImportError(f"operator {node.name!r} ({node.op_type}): attribute "
                                   f"name {a.name!r} is not UTF-8 text")
        try:
            v = onnx.helper.get_attribute_value(a)
            if isinstance(v, bytes):
                v = v.decode("utf-8", "replace")
            elif isinstance(v, onnx.TensorProto):
                v = onnx.numpy_helper.to_array(v)
            elif isinstance(v, list) and v and isinstance(v[0], bytes):
                v = [x.decode("utf-8", "replace") for x in v]
        except Exception as exc:        # a corrupt attribute: onnx cannot decode it
            raise ModelImportError(f"operator {node.name!r} ({node.op_type}): attribute "
                                   f"{a.name!r} cannot be decoded ({type(exc).__name__}: "
                                   f"{str(exc)[:120]})") from None
        out[a.name] = v
    return out


# -- constant folding ---------------------------------------------------------
def _fold_node(onnx, node, vals, shapes, opset, attrs=None):
    """Value(s) of a node whose inputs are all known; None if it cannot be
    folded (not deterministic, or not evaluable).  ``attrs``: the node's
    attributes, decoded already (None: decoded here)."""
    t = node.op_type
    a = _attrs(onnx, node) if attrs is None else attrs
    x = [vals.get(i) if i else None for i in node.input]
    if t == "Constant":
        if "value" in a:
            return [np.asarray(a["value"])]
        for k, dt in (("value_float", np.float32), ("value_floats", np.float32),
                      ("value_int", np.int64), ("value_ints", np.int64)):
            if k in a:
                return [np.asarray(a[k], dtype=dt)]
        return None
    if t == "Shape":
        shp = shapes.get(node.input[0])
        if shp is None or not all(isinstance(d, int) for d in shp):
            return None
        s = np.asarray(shp, dtype=np.int64)
        start, end = a.get("start", 0), a.get("end", None)
        return [s[start:end]]
    if t == "Size":
        shp = shapes.get(node.input[0])
        if shp is None or not all(isinstance(d, int) for d in shp):
            return None
        return [np.asarray(math.prod(shp), dtype=np.int64)]
    if t == "ConstantOfShape":
        shp = [int(d) for d in x[0].reshape(-1)]
        val = np.asarray(a.get("value", np.zeros(1, np.float32))).reshape(-1)
        _check_dims(node.output[0], shp, val.dtype.itemsize)
        if math.prod(shp) * val.dtype.itemsize > FOLD_MAX_BYTES:
            return None     # a run-time op: its output is planned like any tensor
        return [np.full(shp, val[0], dtype=val.dtype)]
    if t == "DequantizeLinear" and not a.get("block_size"):
        return [dequantize(x[0], x[1], x[2] if len(x) > 2 else None,
                           a.get("axis", 1)).astype(np.asarray(x[1]).dtype)]
    if t in ("Identity", "Dropout"):
        return [x[0]]
    if t == "Cast":
        return [x[0].astype(onnx.helper.tensor_dtype_to_np_dtype(a["to"]))]
    if t == "Unsqueeze":
        axes = a.get("axes") if opset < 13 else x[1]
        r = x[0]
        nd = r.ndim + len(axes)
        for ax in sorted(int(v) + nd if int(v) < 0 else int(v) for v in axes):
            r = np.expand_dims(r, ax)
        return [r]
    if t == "Squeeze":
        axes = a.get("axes") if opset < 13 else (x[1] if len(x) > 1 else None)
        if axes is None:
            return [np.squeeze(x[0])]
        return [np.squeeze(x[0], axis=tuple(int(v) for v in axes))]
    if t == "Concat":
        return [np.concatenate([v for v in x if v is not None], axis=a["axis"])]
    if t == "Gather":
        return [np.take(x[0], x[1].astype(np.int64), axis=a.get("axis", 0))]
    if t == "Reshape" and opset >= 5:
        shp = [int(d) for d in x[1]]
        if not a.get("allowzero", 0):
            shp = [x[0].shape[i] if d == 0 else d for i, d in enumerate(shp)]
        return [x[0].reshape(shp)]
    if t == "Slice":
        return [_slice(x, a, opset)]
    if t in _NUMPY_FOLDS and all(v is not None for v in x):
        return [np.asarray(_NUMPY_FOLDS[t](x, a))]
    if t in ("Add", "Sub", "Mul", "Div") and all(v is not None for v in x):
        f = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}[t]
        r = f(x[0], x[1])
        if t == "Div" and x[0].dtype.kind in "iu":
            r = np.trunc(r)
        return [np.asarray(r).astype(np.result_type(x[0], x[1]))]
    return _fold_by_reference(onnx, node, vals, opset)


def _range(x, a):
    start, limit, delta = (v.reshape(()) for v in x)
    n = max(int(np.ceil((limit - start) / delta)), 0)
    return (start + delta * np.arange(n)).astype(x[0].dtype)


#: ops folded with NumPy (shape arithmetic seen in real models); anything
#: else goes to the ONNX reference evaluator (about 200 modules, 10 MiB)
_NUMPY_FOLDS = {
    "Transpose": lambda x, a: np.transpose(x[0], a.get("perm")),
    "Range": _range,
    "Equal": lambda x, a: np.equal(x[0], x[1]),
    "Less": lambda x, a: np.less(x[0], x[1]),
    "Greater": lambda x, a: np.greater(x[0], x[1]),
    "Not": lambda x, a: np.logical_not(x[0]),
    "Where": lambda x, a: np.where(x[0], x[1], x[2]),
    "Neg": lambda x, a: np.negative(x[0]),
    "Abs": lambda x, a: np.abs(x[0]),
    "Floor": lambda x, a: np.floor(x[0]),
    "Ceil": lambda x, a: np.ceil(x[0]),
    "Sqrt": lambda x, a: np.sqrt(x[0]),
    "Min": lambda x, a: np.minimum.reduce(np.broadcast_arrays(*x)),
    "Max": lambda x, a: np.maximum.reduce(np.broadcast_arrays(*x)),
    "Expand": lambda x, a: np.broadcast_to(
        x[0], np.broadcast_shapes(x[0].shape, tuple(int(d) for d in x[1]))).copy(),
}


def _slice(x, a, opset):
    """ONNX Slice of a known value (starts / ends / axes / steps as inputs
    from opset 10, attributes before), clamped as the operator says."""
    data = x[0]
    if opset >= 10:
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
    return data[tuple(index)]


def _fold_by_reference(onnx, node, vals, opset):
    """Any other node with known inputs: the ONNX reference implementation
    (None if it cannot evaluate it)."""
    try:
        from onnx.reference import ReferenceEvaluator
        ins = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
               for n in node.input if n]
        outs = [onnx.helper.make_tensor_value_info(n, onnx.TensorProto.UNDEFINED, None)
                for n in node.output if n]
        g = onnx.helper.make_graph([node], "fold", ins, outs)
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", opset)])
        ref = ReferenceEvaluator(m)
        res = ref.run(None, {n: vals[n] for n in node.input if n})
        return [np.asarray(r) for r in res]
    except Exception:
        return None
