"""Shape inference for the ONNX import: the shapes and element types of a
model's tensors, by pyarena's own rules (``onnx_shapes.py``) or, for a
model with an operator they do not cover, by ONNX's (with the contrib
ops' rules).  After folding, the inference runs again over the nodes
left (:meth:`ShapeInference.reinfer`): the small folded values they read
as initializers, every other constant as a typed graph input -- no tensor
data is copied into protobuf but shape arithmetic.
"""
from functools import partial

import numpy as np

from ..errors import ModelImportError
from .onnx_contrib import infer_with_contrib
from .onnx_fold import FOLD_MAX_BYTES, _attrs
from .onnx_loop import outer_names
from .onnx_shapes import NotCovered, infer_shapes
from .onnx_types import _collect

__all__ = ["OWN_SHAPE_INFERENCE", "ShapeInference"]

#: pyarena's own shape inference (onnx_shapes.py) first; False: always
#: ONNX's, whose operator-schema registry costs ~7 MiB resident for good
OWN_SHAPE_INFERENCE = True


class ShapeInference:
    """The inference step of one import (``imp``: its state; the shapes and
    types it finds go to ``imp.shapes`` / ``imp.types``)."""

    def __init__(self, imp):
        self.imp = imp

    def infer(self, m, first=False):
        """(shapes, types) of ``m``'s tensors: pyarena's own rules, or ONNX's
        shape inference (with the contrib ops' rules) for a model with an
        operator they do not cover, or when ``OWN_SHAPE_INFERENCE`` is off."""
        imp = self.imp
        if OWN_SHAPE_INFERENCE:
            try:
                cached = first and imp.cache is not None    # no If branch inlined yet
                return infer_shapes(imp.onnx, m, imp.opset, _collect, imp.path,
                                    imp.cache.values if cached else None,
                                    partial(imp.cache.attrs, partial(_attrs, imp.onnx))
                                    if cached else None, wanted_out=imp.wanted)
            except NotCovered:
                pass
        imp.used_onnx_inference = True
        try:
            return _collect(infer_with_contrib(
                imp.onnx, m, lambda mm: imp.onnx.shape_inference.infer_shapes(
                    mm, data_prop=True), _collect))
        except Exception as exc:
            raise ModelImportError(f"{imp.path}: ONNX shape inference failed: "
                                   f"{exc}") from None

    def reinfer(self, remaining):
        """Shape inference again over the remaining nodes: the folded
        (small) values they read as initializers, every other constant as a
        typed input -- no tensor data is copied into protobuf but shape
        arithmetic."""
        imp = self.imp
        onnx, g = imp.onnx, imp.model.graph
        used = {i for n in remaining for i in n.input if i}
        for n in remaining:     # what bodies read from this graph
            if any(a.type == onnx.AttributeProto.GRAPH for a in n.attribute):
                used.update(outer_names(onnx, n))
        small, typed = [], []
        for name in sorted(used & set(imp.vals)):
            v = np.asarray(imp.vals[name])
            if v.dtype.hasobject:
                raise ModelImportError(f"tensor {name!r}: folded to a value that is not "
                                       f"numeric ({v.dtype}, shape {list(v.shape)})")
            if v.nbytes <= FOLD_MAX_BYTES:   # logical size: from_array copies it
                small.append(onnx.numpy_helper.from_array(v, name))
            else:
                typed.append(onnx.helper.make_tensor_value_info(
                    name, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)))
        consts = set(imp.vals)
        ins = [vi for vi in g.input if vi.name not in consts] + typed
        # Loop / Scan outputs sized from their bodies (a graph output's own
        # declaration is what inference reads for it)
        known = {k: onnx.helper.make_tensor_value_info(k, imp.types[k], imp.shapes[k])
                 for k in imp.forced}
        # their outputs whose size only a run tells (an If whose branches
        # differ in shape): the type the bodies give, no shape -- else what
        # reads them gets no type either and cannot even be a pool tensor
        for n in remaining:
            if any(a.type == onnx.AttributeProto.GRAPH for a in n.attribute):
                for o in n.output:
                    # (a sequence / optional, typed by name, is not a tensor)
                    if o and o not in known and isinstance(imp.types.get(o), int):
                        known[o] = onnx.helper.make_tensor_value_info(o, imp.types[o], None)
        outs = [known.pop(o.name, o) for o in g.output]
        g2 = onnx.helper.make_graph(list(remaining), g.name or "reinfer", ins, outs,
                                    initializer=small, value_info=list(known.values()))
        m2 = onnx.helper.make_model(g2, opset_imports=list(imp.model.opset_import),
                                    ir_version=imp.model.ir_version)
        s2, t2 = self.infer(m2)
        for k, v in s2.items():
            if v is not None and all(isinstance(d, int) for d in v):
                imp.shapes[k] = v
        imp.types.update({k: v for k, v in t2.items() if k not in imp.types})
