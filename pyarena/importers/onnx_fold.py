"""Evaluating ONNX nodes whose inputs are all known, for constant folding
at import: each op's own NumPy evaluator where its kernel names one
(``Kernel.evaluate``, :mod:`pyarena.runtime.kernels.evaluators`: the shape
arithmetic real models use, the element-wise maths, dequantization), the
ONNX reference evaluator for anything else.  ``_attrs`` decodes a node's
attributes (refusing subgraphs), ``_check_dims`` refuses negative or
absurd sizes before anything is allocated.
"""
import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..graph import MAX_TENSOR_BYTES
from ..runtime.kernels import op_fact
from ..runtime.kernels.evaluators import FOLD_MAX_BYTES
from ..runtime.kernels.evaluators import check_dims as _check_dims
from ..runtime.kernels.shape_rules import Node

__all__ = ["FOLD_MAX_BYTES", "MAX_TENSOR_BYTES"]


def _plain_dims(dims):
    """Whether every dimension is a plain int >= 0 (a tensor sized as it
    is; ``_check_dims`` then only needs its size compared)."""
    for d in dims:
        if type(d) is not int or d < 0:
            return False
    return True


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
    attributes, decoded already (None: decoded here).  The op's own
    evaluator (``Kernel.evaluate``) in NumPy when it has one, else the ONNX
    reference evaluator."""
    a = _attrs(onnx, node) if attrs is None else attrs
    evaluate = op_fact(node.op_type, "evaluate")
    if evaluate is not None:
        n = Node(node, a, opset, shapes.get, None, vals.get)
        n.dtype_of = onnx.helper.tensor_dtype_to_np_dtype
        res = evaluate(n)
        if res is not NotImplemented:
            return res
    return _fold_by_reference(onnx, node, vals, opset)


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
