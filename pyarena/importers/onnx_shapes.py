"""pyarena's own shape inference for ONNX models.

ONNX's shape inference needs its operator-schema registry, which the onnx
package builds on first use: about 7 MiB of resident memory that stays for
the life of the process, more than a small model's weights and arena
together.  :func:`infer_shapes` derives every output's shape and element
type from the shape rules the operators' kernels declare
(``Kernel.shape_rule``, :mod:`pyarena.runtime.kernels.shape_rules`),
propagating the values of small constant tensors as it goes (each op's
own evaluator, ``Kernel.evaluate``) (a ``Shape -> Gather -> Concat`` chain that makes a
``Reshape`` target), as ONNX's data propagation does.  A model with an
operator the rules do not cover raises :class:`NotCovered`, and the
importer uses ONNX's inference for it instead.  The model's own
``value_info`` and output shapes fill the dims the rules leave unknown and
stay where they contradict the rules, as in ONNX's inference.
"""
import math

import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..runtime.kernels import op_fact, op_table
from ..runtime.kernels.shape_rules import Node
from .onnx_contrib import CONTRIB_DOMAINS, full_shapes, rule_of
from .onnx_fold import FOLD_MAX_BYTES, _attrs, _fold_node

__all__ = ["NotCovered", "ShapeProgram", "infer_shapes"]


def _propagates(op):
    """Whether ``op``'s small constant outputs are computed on the way:
    it has a NumPy evaluator (never the ONNX reference evaluator here)."""
    return op in op_table("evaluate")


def _reads_values(op):
    """False for an op whose value needs no input's value (Shape, Size,
    Constant: shapes or attributes only)."""
    return op_fact(op, "needs_values") is not False


class NotCovered(Exception):
    """The model has an operator these rules do not cover."""


def infer_shapes(onnx, model, opset, collect, where, known=None, attrs=None,
                 values_out=None, wanted_out=None):
    """(shapes, types) of every tensor of ``model``, as ``collect`` returns
    them for a model ONNX's inference annotated.  Raises NotCovered, or
    ModelImportError naming ``where`` and the operator for inputs that do
    not go together.  ``known``: tensor name -> value of constants the
    model reads but does not compute (folded before), and of its
    initializers (not decoded again); ``attrs``: node -> its attributes
    (a cache of them; default: decoded here); ``values_out``: a dict given
    gets the small constant values propagated (shape arithmetic);
    ``wanted_out``: a set given gets the tensors whose value a rule asked
    for and did not have, where the node's outputs stayed unsized (the
    values that decide shapes: a fed Reshape target, Resize's scales)."""
    return ShapeProgram(onnx, model, opset, where, known, attrs).run(collect(model),
                                                                     values_out, wanted_out)


class ShapeProgram:
    """:func:`infer_shapes` over one model, prepared: each node's rule,
    inputs, outputs and attributes read from protobuf once, and the
    constants ``known``; :meth:`run` then infers for the graph inputs'
    shapes given (an InferenceSession's retargeted signatures run one program
    many times).  The model and ``known`` must not change meanwhile."""

    def __init__(self, onnx, model, opset, where, known=None, attrs=None):
        attrs = attrs or (lambda node: _attrs(onnx, node))
        self.onnx, self.opset, self.where = onnx, opset, where
        known = known or {}
        self.values = _small_initializers(onnx, model, known)
        self.known = [(name, list(v.shape), _elem_type(onnx, v.dtype),
                       v if v.nbytes <= FOLD_MAX_BYTES and not v.dtype.hasobject else None)
                      for name, v in known.items()]
        self.nodes = []
        # the tensors whose values the propagation can ever know: a node
        # none of whose inputs can be known never propagates (its check
        # is left out of every run)
        valued = set(self.values).union(name for name, _, _, v in self.known if v is not None)
        for node in model.graph.node:
            op, standard = node.op_type, node.domain in ("", "ai.onnx")
            rule = rule_of(op, node.domain) if standard else None
            ins, outs = list(node.input), list(node.output)
            prop = standard and _propagates(op) and \
                (not _reads_values(op) or all(i in valued for i in ins if i))
            folded = None       # the attributes the propagation folds with
            if prop:
                valued.update(o for o in outs if o)
                if op != "Constant":    # (its value is decoded only when small)
                    try:
                        folded = attrs(node)
                    except Exception:   # decoded (and refused) by the folding
                        folded = None
            # a rule's view of the node, made once (its getters set per run)
            view = None if rule is None else \
                Node(node, attrs(node), opset, None, None, None, ins, op, len(outs))
            self.nodes.append((node, rule, view, ins, outs, prop, folded))

    def run(self, shapes_types, values_out=None, wanted_out=None):
        """(shapes, types) of every tensor, from ``shapes_types`` (what the
        model declares, the graph inputs bound: ``collect``'s result, which
        is updated); ``values_out`` and ``wanted_out`` as for
        :func:`infer_shapes`."""
        shapes, types = shapes_types
        onnx, opset, where = self.onnx, self.opset, self.where
        values = dict(self.values)
        for name, shp, et, v in self.known:
            if name not in shapes:
                shapes[name] = list(shp)
                types[name] = et
                if v is not None:
                    values[name] = v
        sget, tget, vget = shapes.get, types.get, values.get
        asked = []
        if wanted_out is not None:
            def vget(k, _get=values.get):
                v = _get(k)
                if v is None:
                    asked.append(k)
                return v
        for node, rule, n, ins, outs, prop, folded in self.nodes:
            if rule is None:
                res = _node_outputs(onnx, node, opset, shapes, types, values, where)
            else:
                n._shape, n._etype, n._value = sget, tget, vget
                res = _apply(rule, n, node, where)
            for name, (shp, et) in zip(outs, res):
                if not name:
                    continue
                old = sget(name)
                if old is None and shp is not None:     # nothing declared: the rule's
                    shapes[name] = shp
                    if et:
                        types[name] = et
                else:
                    _merge(name, shp, et, shapes, types)
            if asked:       # a value asked for, and an output left unsized
                if any(o and not _sized(sget(o)) for o in outs):
                    wanted_out.update(asked)
                asked.clear()
            if prop:
                _propagate(onnx, node, values, shapes, opset, ins, folded)
        if values_out is not None:
            values_out.update(values)
        return shapes, types


def _sized(shape):
    return shape is not None and all(type(d) is int for d in shape)


def _node_outputs(onnx, node, opset, shapes, types, values, where):
    """The outputs of a node without a plain rule: a contrib op's, an If
    (sized from its branches later), a Constant; NotCovered for the rest."""
    if node.domain in CONTRIB_DOMAINS:
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
        rule = rule_of(node.op_type, node.domain)
        got = rule(Node(node, attrs, opset, full_shapes(shapes.get), types.get,
                        values.get)) if rule is not None else []
        got = list(got)[:len(node.output)]
        return got + [(None, None)] * (len(node.output) - len(got))
    standard = node.domain in ("", "ai.onnx")
    if standard and node.op_type == "If":         # folded, or sized from its branches
        return [(None, None)] * len(node.output)
    if standard and node.op_type == "Constant":   # may be a view of the file: dims only
        return [_constant(onnx, node)]
    raise NotCovered(f"{node.op_type} ({node.domain or 'ai.onnx'})")


def _apply(rule, n, node, where):
    """``rule(n)``; NotCovered for what the rule does not handle,
    ModelImportError naming the operator for inputs that do not go together."""
    try:
        return rule(n)
    except (NotImplementedError, UnsupportedOpError) as exc:
        raise NotCovered(f"{node.op_type}: {exc}") from None
    except ModelImportError:
        raise
    except Exception as exc:
        raise ModelImportError(f"{where}: shape inference failed: operator {node.name!r} "
                               f"({node.op_type}): {type(exc).__name__}: "
                               f"{str(exc)[:160]}") from None


def _constant(onnx, node):
    for a in node.attribute:
        if a.name in ("value", "sparse_value") and a.type == onnx.AttributeProto.TENSOR:
            return list(a.t.dims), a.t.data_type
        if a.name in ("value_float", "value_int"):
            return [], 1 if a.name == "value_float" else 7
        if a.name in ("value_floats", "value_ints"):
            return [len(a.floats) + len(a.ints)], 1 if a.name == "value_floats" else 7
    raise NotCovered("Constant without a numeric value")


def _merge(name, shp, et, shapes, types):
    """The rule's shape and type for ``name``, merged with what the model
    declares: a declared dim fills one the rule leaves unknown, and where
    the two disagree the declared shape stays (as in ONNX's inference,
    which drops a node's result that contradicts the model; the kernel
    then checks the shapes it is given) -- unless the rule's shape is
    concrete and the declared one is not: a declaration that cannot size
    the tensor and contradicts what the op computes is wrong (ddddocr's
    CRNN declares its (T, 1, classes) output as [1, 'seqlen']; onnxruntime
    warns and returns the computed shape)."""
    old = shapes.get(name)
    if shp is not None and old is not None:
        if len(old) != len(shp) or any(isinstance(d, int) and isinstance(o, int) and d != o
                                       for d, o in zip(shp, old)):
            if not (all(isinstance(d, int) for d in shp) and
                    not all(isinstance(o, int) for o in old)):
                shp = old
        else:
            shp = [d if isinstance(d, int) or not isinstance(o, int) and d else o
                   for d, o in zip(shp, old)]
    shapes[name] = shp if shp is not None else old
    if et:          # the operator's rule over a declared type, as ONNX's does
        types[name] = et


def _elem_type(onnx, dtype, _types={}):
    if dtype not in _types:
        _types[dtype] = onnx.helper.np_dtype_to_tensor_dtype(dtype)
    return _types[dtype]


def _small_initializers(onnx, model, known):
    """Values of the initializers small enough to be shape arithmetic."""
    out = {}
    ext = onnx.TensorProto.EXTERNAL
    for init in model.graph.initializer:
        if init.data_location == ext or math.prod(init.dims) * 8 > FOLD_MAX_BYTES:
            continue
        if init.name in known:
            out[init.name] = known[init.name]
            continue
        try:
            out[init.name] = onnx.numpy_helper.to_array(init)
        except Exception:
            continue            # undecodable: the importer names it later
    return out


def _propagate(onnx, node, values, shapes, opset, ins, attrs=None):
    """The node's value when its inputs (``ins``) are known small constants
    (``attrs``: the node's, decoded already; None: decoded here)."""
    if _reads_values(node.op_type) and not all(i in values for i in ins if i):
        return
    if node.op_type == "Constant":
        shp = shapes.get(node.output[0])
        if shp is None or math.prod(shp) * 8 > FOLD_MAX_BYTES:
            return              # large (and perhaps a view of the file): not read here
    try:
        res = _fold_node(onnx, node, values, shapes, opset, attrs)
    except Exception:
        return                  # left to the importer's folding, which names errors
    for name, v in zip(node.output, res or ()):
        v = np.asarray(v)
        if name and v.nbytes <= FOLD_MAX_BYTES and not v.dtype.hasobject:
            values[name] = v
