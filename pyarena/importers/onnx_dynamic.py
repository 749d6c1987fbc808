"""Which tensors of an ONNX model are pool tensors, and the shape rule of
the operators that touch them (see ``runtime/dynamic.py``).

A *source* makes a tensor whose size depends on data: NonZero, Compress,
Unique, a TopK whose K is not a constant, a Range whose bounds are not, a
reduction whose axes are not, a
Loop whose scan outputs have a length only a run tells, an If whose
branches make an output of different shapes.  Everything computed from a source is
*dependent*; a dependent tensor whose shape shape inference cannot fix
becomes a pool tensor (``Tensor.dynamic``), taken from the executor's
Pool at run time.  A tensor of unknown size that depends on no source is
still an error naming it (an input dimension left unbound is not data).

An operator reading or writing a pool tensor gets ``notes.infer``:
its output shapes for given inputs, by shape inference on that one node
(pyarena's own rules, ONNX's for an op they do not cover; the small
integer inputs computed at run time given as values, so a Reshape to a
computed shape or a TopK's K are known).
"""
import numpy as np

from ..errors import GraphError
from ..runtime.kernels import op_fact
from ..runtime.kernels.shape_rules_movement import reduce as _reduce_rule
from .onnx_shapes import NotCovered, infer_shapes

__all__ = ["VALUE_MAX_ELEMENTS", "deciding_inputs", "dependent_tensors", "shape_rule",
           "value_ops"]

#: the most elements a tensor read as a value (a shape, a K, scales) has
VALUE_MAX_ELEMENTS = 64


def _is_source(imp, n):
    if n.domain not in ("", "ai.onnx"):
        return False
    if op_fact(n.op_type, "data_sized"):
        return True
    if n.op_type == "TopK" and len(n.input) > 1:
        return n.input[1] not in imp.vals
    if n.op_type == "Range":
        return any(i not in imp.vals for i in n.input)
    if len(n.input) > 1 and n.input[1] and op_fact(n.op_type, "shape_rule") is _reduce_rule:
        return n.input[1] not in imp.vals       # the axes: the output's rank follows them
    if n.op_type in ("Loop", "If"):
        return bool(imp.bodies.get(n.name, ((), {}))[1].get("dynamic"))
    return _sized_by_a_value(imp, n)


_INTEGER_TYPES = frozenset((2, 3, 4, 5, 6, 7, 12, 13))    # ONNX's integer element types


def _sized_by_a_value(imp, n):
    """An op whose output shape inference could not fix although its
    inputs' shapes are known, and which reads a small integer tensor
    computed at run time (a Pad's pads, a Reshape's shape, a Slice's
    bounds, a ConstantOfShape's shape): the value sizes the output."""
    shapes = imp.shapes

    def fixed(name):
        dims = shapes.get(name)
        return dims is not None and all(isinstance(d, int) for d in dims)
    if not n.input or not all(fixed(i) for i in n.input if i) or \
            all(fixed(o) for o in n.output if o):
        return False
    for i in n.input:
        if i and i not in imp.vals and imp.types.get(i) in _INTEGER_TYPES and fixed(i) and \
                int(np.prod(shapes[i], dtype=np.int64)) <= VALUE_MAX_ELEMENTS:
            return True
    return False


def deciding_inputs(imp):
    """The graph inputs of import ``imp`` whose values decide shapes: the
    small numeric inputs (at most :data:`VALUE_MAX_ELEMENTS` elements) from
    which a value that a shape rule asked for and lacked is computed
    (``imp.wanted``: a fed Reshape target, Resize's scales, TopK's K, the
    pads or bounds of a Pad or Slice), traced back through the ops that
    read values (not through a Shape: the shape of a tensor is known)."""
    if not imp.wanted:
        return frozenset()
    known = imp.vals
    inputs = {vi.name for vi in imp.model.graph.input
              if vi.name not in imp.init_names and vi.name not in known}
    producer = {o: n for n in imp.model.graph.node for o in n.output if o}
    found, seen, todo = set(), set(), list(imp.wanted)
    while todo:
        name = todo.pop()
        if name in seen or name in known:
            continue
        seen.add(name)
        if name in inputs:
            dims = imp.shapes.get(name)
            if dims is not None and all(isinstance(d, int) for d in dims) and \
                    int(np.prod(dims, dtype=np.int64)) <= VALUE_MAX_ELEMENTS and \
                    imp.types.get(name) in _NUMERIC_TYPES:
                found.add(name)
            continue
        n = producer.get(name)
        if n is not None and op_fact(n.op_type, "needs_values") is not False:
            todo.extend(i for i in n.input if i)
    return frozenset(found)


#: ONNX's numeric element types but float8 / 4-bit (bool included)
_NUMERIC_TYPES = frozenset((1, 2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 13, 16))


def dependent_tensors(imp, nodes, io=None, host=()):
    """Names of the tensors computed from a source (``nodes`` in order;
    ``io``: their ``(node, inputs, outputs)`` read already, if given).
    ``host``: the tensors held outside the arena (strings...): each is a
    source, and so is every node reading one."""
    dep = set(host)
    bodies = imp.bodies
    for n, n_in, n_out in io or [(n, list(n.input), list(n.output)) for n in nodes]:
        extra = bodies[n.name][0] if bodies and n.name in bodies else ()
        if _is_source(imp, n) or (dep and any(i in dep for i in n_in + list(extra) if i)):
            dep.update(o for o in n_out if o)
    return dep


def _small_runtime(t):
    """A run-time tensor a kernel could want as a value: a small one (a K,
    an axis, a shape; Resize's scales, Clip's bounds, a Pad value)."""
    if t is None or t.role == "constant" or t.dynamic or t.shape is None:
        return False
    return np.dtype(t.dtype).kind in "iubf" and int(np.prod(t.shape, dtype=np.int64)) <= 64


def _parameter(t, k):
    """Input ``k`` of an op, ``t``, might be a parameter fed at run time: a
    small run-time tensor, or a graph input after the op's first input (a
    weight, a scale, a bound fed as an input)."""
    return _small_runtime(t) or (k > 0 and t is not None and t.role == "input" and
                                 not t.dynamic and t.shape is not None)


def value_ops(graph, nodes, rule):
    """Mark the ops whose kernel needs as a constant an input computed at
    run time (TopK's K, CumSum's axis, Resize's scales, a Conv's weights fed
    as inputs): ``notes.reads_values``, with the shape rule
    ``rule(node)`` and the inputs to read as values, ``notes.value_inputs``
    (each one the kernel asks for -- ``NeedsValueError.tensor`` -- probed
    again with a stand-in value until it builds); the executor builds their
    kernels per value.  Only ops reading a possible parameter are probed."""
    from ..errors import NeedsValueError
    from ..runtime.kernels import graph_kernel
    pool_ops = graph.pool_ops()
    tensors = graph.tensors
    for op in graph.ops:
        if op.name in pool_ops or op.name not in nodes or not any(
                _parameter(tensors[i], k) for k, i in enumerate(op.inputs) if i):
            continue
        named, needs = [], False
        try:
            for _ in op.inputs:
                try:
                    graph_kernel(graph, op)
                    break
                except NeedsValueError as e:
                    needs = True
                    t = tensors.get(e.tensor) if e.tensor in op.inputs else None
                    if t is None or t.data is not None or t.role == "constant" or \
                            t.dynamic or t.shape is None:
                        break
                    named.append(t)
                    t.data = np.ones(tuple(int(d) for d in t.shape), t.dtype)  # a stand-in
                except Exception:       # reported with the others by set_scratch
                    break
        finally:
            for t in named:
                t.data = None
        if needs:
            op.notes.reads_values = True
            op.notes.value_inputs = frozenset(t.name for t in named)
            op.notes.infer = rule(nodes[op.name])


def shape_rule(onnx, node, opset_import, opset, collect):
    """``infer(arrays, use_values)``: the output shapes of ``node`` (a
    NodeProto) for input arrays ``arrays`` (None: omitted), the inputs at
    the indices ``use_values`` given by value: pyarena's own shape rules
    (``onnx_shapes.py``), ONNX's inference for an op they do not cover.
    GraphError if neither can fix them.  ``collect``: the importer's
    (shapes, types) reader."""
    helper = onnx.helper

    def infer(arrays, use_values):
        ins, inits = [], []
        for i, (name, a) in enumerate(zip(node.input, arrays)):
            if not name or a is None:
                continue
            a = np.asarray(a)
            if i in use_values and a.size <= 4096:
                inits.append(onnx.numpy_helper.from_array(a, name))
            else:
                ins.append(helper.make_tensor_value_info(
                    name, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape)))
        outs = [helper.make_tensor_value_info(o, onnx.TensorProto.UNDEFINED, None)
                for o in node.output if o]
        g = helper.make_graph([node], "rule", ins, outs, initializer=inits)
        m = helper.make_model(g, opset_imports=list(opset_import))
        try:
            try:
                shapes, _ = infer_shapes(onnx, m, opset, collect, f"operator {node.name!r}")
            except NotCovered:
                shapes, _ = collect(onnx.shape_inference.infer_shapes(
                    m, strict_mode=True, data_prop=True))
        except Exception as exc:
            raise GraphError(f"operator {node.name!r} ({node.op_type}): inputs of shapes "
                             f"{[None if a is None else list(np.shape(a)) for a in arrays]} "
                             f"do not go together ({str(exc)[:160]})") from None
        out = []
        for o in node.output:
            if not o:
                continue
            dims = shapes.get(o)
            if dims is None or not all(isinstance(d, int) for d in dims):
                raise GraphError(f"operator {node.name!r} ({node.op_type}): the shape of "
                                 f"{o!r} cannot be worked out at run time ({dims})")
            out.append(dims)
        return out
    return infer
