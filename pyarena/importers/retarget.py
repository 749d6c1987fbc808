"""A new input-shape signature from the last one's graph, retargeted.

An :class:`~pyarena.InferenceSession` sees a model again for other input
shapes.  The graph the importer builds for them differs from the last
signature's only in its tensors' shapes and in the shape arithmetic folded
from them (a ``Reshape`` target computed from a ``Shape``): the nodes, the
static folds, the fused convolutions and their attributes are the same.
:func:`retarget` therefore runs pyarena's shape rules once over the model
without its static nodes (``ImportCache.reduced``, read, not copied;
the rules prepared once, :class:`~.onnx_shapes.ShapeProgram`),
takes the derived constants' new values from the rules' value propagation,
and gives the last graph those shapes and values (:meth:`Graph.retargeted`):
no protobuf copy, no folding passes, no graph building, no fusion.  The
kernels, the scratch sizes and the plan are then made for the new shapes
as for any graph.

It declines -- returns None, and the caller imports in full -- whenever the
new graph could differ in more than that: a last graph with pool tensors,
control flow, ops built at run time or inputs fixed to values; the rules
not covering an operator or failing (the full import then names the
error); a tensor whose new shape one pass of the rules does not fix, or
of another rank or element type; a derived constant whose new value the
propagation does not give, or of another shape or type.  A derived
constant read only by an op fused away (its value baked into the fusion)
is not in the fused graph any more, and such a graph is not retargeted
either (:func:`retargetable`); nor is one whose derived constant the layout
pass re-laid out.  Nor is it retargeted to shapes for which a pass would
have chosen otherwise: every choice the passes made from the last
signature's shapes (fusion's residuals, the NHWC pass's regions) is
recorded with its rule (``graph.shape_decisions``,
:mod:`pyarena.graph.decisions`) and asked again of the new shapes.  The
tensors the NHWC pass made NHWC (``graph.relaid["shapes"]``) get the NCHW
rules' shapes permuted.
"""
from functools import partial

import numpy as np

from ..errors import PyArenaError
from ..graph.binding import bind_shapes
from ..runtime.kernels import op_fact
from .onnx import _attrs, _collect, _input_dims, _np_dtype
from .onnx_shapes import NotCovered, ShapeProgram

__all__ = ["Template", "retargetable", "retarget"]


class Template:
    """A signature's graph kept to retarget: ``graph`` and ``derived`` (its
    constants computed from the input shapes, which change with them)."""

    def __init__(self, graph, derived):
        self.graph = graph
        self.derived = frozenset(derived)
        self.program = None     # the shape rules over the reduced model, prepared once


def retargetable(graph, derived):
    """Whether ``graph`` (fused, as imported; ``derived`` the names of its
    constants that are not static) can be retargeted for other shapes."""
    ts = graph.tensors
    if any(n not in ts for n in derived):       # baked into a fused op
        return False
    if graph.relaid is not None and graph.relaid["baked"] & frozenset(derived):
        return False                            # re-laid out for NHWC
    if any(t.dynamic or t.shape is None for t in ts.values()):
        return False
    return not any(op_fact(op.op_type, "family") == "control" or op.notes.infer is not None
                   or op.notes.reads_values for op in graph.ops)


def retarget(template, cache, onnx, path, inputs):
    """The template's graph retargeted for the input shapes ``inputs`` (name
    -> dims), or None when it cannot be (module docstring)."""
    model = cache.reduced
    g0 = template.graph
    inits = cache.parsed[2]
    declared = {vi.name: _input_dims(vi) for vi in model.graph.input if vi.name not in inits}
    try:
        bound, _ = bind_shapes(declared, dict(inputs or {}))
    except PyArenaError:
        return None
    if any(d is None or any(type(x) is not int for x in d) for d in bound.values()):
        return None

    def collect(m):
        shapes, types = _collect(m)
        shapes.update((k, list(v)) for k, v in bound.items())
        return shapes, types
    values = {}
    try:
        if template.program is None:
            opset = next((o.version for o in model.opset_import
                          if o.domain in ("", "ai.onnx")), 1)
            template.program = ShapeProgram(onnx, model, opset, path, cache.values,
                                            partial(cache.attrs, partial(_attrs, onnx)))
        shapes, types = template.program.run(collect(model), values)
    except (NotCovered, PyArenaError):
        return None
    for d in g0.shape_decisions:    # a pass would choose otherwise at these shapes
        if not d.holds(shapes):
            return None
    data = {}
    for name in template.derived:
        v, t = values.get(name), g0.tensors[name]
        if v is None or tuple(v.shape) != tuple(t.shape) or v.dtype != np.dtype(t.dtype):
            return None
        data[name] = v
    relaid = g0.relaid["shapes"] if g0.relaid is not None else {}
    for name, t in g0.tensors.items():
        if t.role != "constant":    # (a Transpose's NHWC copy: its source's type)
            et = types.get(relaid[name][0] if name in relaid else name)
            if et is None or _np_dtype(onnx, et, name) != np.dtype(t.dtype):
                return None
    for name, (src, perm) in relaid.items():    # NHWC: the NCHW rules' shapes, permuted
        d = shapes.get(src)
        shapes[name] = None if d is None or len(d) != len(perm) else [d[p] for p in perm]
    try:
        g = g0.retargeted(shapes, data)
    except PyArenaError:
        return None
    for op in g.ops:        # the last plan's narrowed scratch is its own
        op.notes.scratch_budget = None
    return g


def retarget_built(template, cache, onnx, path, inputs, shared, prior):
    """(graph, kernels): :func:`retarget`'s graph and its kernels, built once
    over the session's shared weights (``shared``: their arena and packed
    memo; their scratch sizes set the ops'), lending ``prior``'s (the same
    ops at other shapes) what does not depend on the shapes (a
    convolution's weights as laid out; a kernel that cannot lend folds and
    re-lays them out again); (None, None) when it cannot be (the caller
    imports in full)."""
    from ..runtime.keeper import build_kernels
    g = retarget(template, cache, onnx, path, inputs)
    if g is None:
        return None, None
    try:    # (the budget is checked by the planner, before anything is allocated)
        return g, build_kernels(g, shared.weights_arena, shared.packed, prior)
    except PyArenaError:        # the full import names what does not fit
        return None, None
