"""What an ONNX model declares of its tensors, in pyarena's terms: element
types as NumPy dtypes, a ValueInfo's dims (ints, symbols, None for
unknown), and the shapes and types a model's ValueInfos and initializers
name (``_collect``).  Every step of the ONNX import reads them, and so do
the session and the re-sizing of a graph (through ``onnx.py``).
"""
import numpy as np

from ..errors import ModelImportError


def _np_dtype(onnx, elem_type, what, _known={}):
    dt = _known.get(elem_type)
    if dt is not None:
        return dt
    try:
        dt = _known[elem_type] = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(elem_type))
        return dt
    except Exception:
        raise ModelImportError(f"{what}: unsupported ONNX element type {elem_type}") from None


def _dims(vi):
    """Shape of a ValueInfo: ints, symbol strings, None for unknown; or None
    if the rank is unknown."""
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    out = []
    for d in tt.shape.dim:
        if d.HasField("dim_value") and d.dim_value >= 0:
            out.append(int(d.dim_value))
        elif d.HasField("dim_value"):     # -1: "any size", as some exporters write
            out.append(None)
        elif d.HasField("dim_param") and d.dim_param:
            out.append(d.dim_param)
        else:
            out.append(None)
    return out


def _input_dims(vi):
    """A graph input's dims, the symbol ``?`` (each one its own unknown,
    not one symbol shared) as unknown, to be bound."""
    dims = _dims(vi)
    if dims is None:
        return None
    return [None if d == "?" else d for d in dims]


#: a ValueInfo's type that is not a tensor -> the kind of value pyarena holds
#: outside the arena for it (``Tensor.host``): in ``types`` in place of an
#: element type
HOST_TYPES = {"sequence_type": "sequence", "optional_type": "optional"}


def _collect(model):
    """(shapes, types) of the model's ValueInfos and initializers: dims and
    ONNX element types; a sequence or an optional typed ``"sequence"`` /
    ``"optional"`` (:data:`HOST_TYPES`), with no shape."""
    shapes, types = {}, {}
    g = model.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        which = vi.type.WhichOneof("value")
        if which in HOST_TYPES:
            types[vi.name] = HOST_TYPES[which]
            shapes.setdefault(vi.name, None)
            continue
        if which == "tensor_type":
            tt = vi.type.tensor_type
            if tt.elem_type:
                types[vi.name] = tt.elem_type
            d = _dims(vi)
            if d is not None or vi.name not in shapes:
                shapes[vi.name] = d
    for init in g.initializer:
        shapes[init.name] = list(init.dims)
        types[init.name] = init.data_type
    return shapes, types


def type_string(onnx, type_proto):
    """onnxruntime's name of a value's type: ``tensor(float)``, ``seq(...)``."""
    which = type_proto.WhichOneof("value")
    if which == "tensor_type":
        name = onnx.TensorProto.DataType.Name(type_proto.tensor_type.elem_type)
        return f"tensor({name.lower()})"
    if which == "sequence_type":
        return f"seq({type_string(onnx, type_proto.sequence_type.elem_type)})"
    if which == "optional_type":
        return f"optional({type_string(onnx, type_proto.optional_type.elem_type)})"
    if which == "map_type":
        key = onnx.TensorProto.DataType.Name(type_proto.map_type.key_type).lower()
        return f"map({key},{type_string(onnx, type_proto.map_type.value_type)})"
    return "unknown"
