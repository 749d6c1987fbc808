"""ONNX control flow at import.

An ``If`` whose condition is known then (a constant, or folded from
shapes and from inputs given as values) is replaced by the nodes of the
branch it takes.  Exporters wrap whole models in ``If``s that test a
sample rate, a batch size or whether a state was given (Silero VAD: the
model inside an ``If`` on its ``sr`` input, and three more inside on
shapes).  For one input signature those conditions are constants, and the
importer takes the branch: its nodes join the graph (their names prefixed
with the ``If``'s, so that they stay unique), its initializers become
constants, and an ``Identity`` per output renames the branch's outputs to
the ``If``'s.  The branch's own ``If``s are resolved the same way as their
conditions fold.

An ``If`` whose condition is only known at run time keeps both branches,
each imported as a body (``onnx_loop.import_body``: a graph of its own
whose inputs are the outer-scope names it reads, which become inputs of
the op) for the ``If`` kernel (``runtime/kernels/branching.py``) to plan
in one scratch region and run.  An output both branches make with the
same shape is planned; one whose shape differs between the branches is a
pool tensor (``Op.attrs["dynamic"]``, ``runtime/dynamic.py``).

:func:`resolve_bodies` imports the bodies of every ``Loop``, ``Scan`` and
run-time ``If`` of a graph.
"""
import numpy as np

from ..errors import ModelImportError, UnsupportedOpError
from ..runtime.kernels import op_fact
from .onnx_loop import (Unknown, import_body, import_loop, import_scan, set_shape, shape_of,
                        subgraph_attr)
from .onnx_held_bodies import branches_held, carries_held, import_held_if, import_held_loop
from .onnx_seqmap import import_sequence_map

__all__ = ["resolve_bodies", "take_branch"]


def take_branch(onnx, node, cond):
    """(nodes, {initializer name: array}) replacing the ``If`` ``node``
    whose condition has the value ``cond``."""
    c = np.asarray(cond)
    if c.size != 1:
        raise ModelImportError(f"operator {node.name!r} (If): the condition has "
                               f"{c.size} elements, not one")
    which = "then_branch" if bool(c.reshape(-1)[0]) else "else_branch"
    branch = next((a.g for a in node.attribute if a.name == which), None)
    if branch is None:
        raise ModelImportError(f"operator {node.name!r} (If): no {which}")
    if len(branch.output) != len(node.output):
        raise ModelImportError(f"operator {node.name!r} (If): the {which} has "
                               f"{len(branch.output)} outputs, the If {len(node.output)}")
    nodes = []
    for i, n in enumerate(branch.node):
        m = onnx.NodeProto()
        m.CopyFrom(n)
        m.name = f"{node.name}/{n.name or f'{n.op_type}_{i}'}"
        nodes.append(m)
    for inner, outer in zip(branch.output, node.output):
        if outer:
            nodes.append(onnx.helper.make_node("Identity", [inner.name], [outer],
                                               name=f"{node.name}/{outer}"))
    inits = {}
    for t in branch.initializer:
        try:
            inits[t.name] = onnx.numpy_helper.to_array(t)
        except Exception as exc:
            raise ModelImportError(f"operator {node.name!r} (If): initializer {t.name!r} "
                                   f"of the {which} cannot be decoded: {exc}") from None
    return nodes, inits


def _branch(imp, node, which):
    """(graph, input names, output names) of one branch, or None and the
    reason when its shapes do not go together for this input signature
    (another sample rate's branch): it can only fail if it runs."""
    branch = subgraph_attr(node, f"{which}_branch")
    if len(branch.output) != len(node.output):
        raise ModelImportError(f"operator {node.name!r} (If): the {which}_branch has "
                               f"{len(branch.output)} outputs, the If {len(node.output)}")
    try:
        return import_body(imp, node, branch, [], f"{which}_branch")[:3], None
    except Unknown:
        raise
    except UnsupportedOpError:
        raise
    except ModelImportError as exc:
        return (None, [], []), str(exc)


def import_if(imp, node):
    """(extra inputs, attrs) of an ``If`` run on a run-time condition:
    ``then`` / ``else`` bodies with their input and output names; the
    extra inputs are the outer names either branch reads.  A branch whose
    shapes do not go together is kept as its reason (``<which>_error``),
    raised if the condition ever picks it; both failing is an error now."""
    if not node.input or not node.input[0]:
        raise ModelImportError(f"operator {node.name!r} (If): no condition input")
    if branches_held(imp, node):        # branches run as models of their own
        return import_held_if(imp, node)
    attrs, extra, errors = {}, [], []
    for which in ("then", "else"):
        (graph, names, outs), err = _branch(imp, node, which)
        attrs.update({which: graph, f"{which}_inputs": names, f"{which}_outputs": outs})
        extra += [n for n in names if n not in extra]
        if err is not None:
            attrs[f"{which}_error"] = err
            errors.append(err)
    if len(errors) == 2:
        raise ModelImportError(errors[0])
    sides = [w for w in ("then", "else") if attrs[w] is not None]
    dynamic = []
    for j, name in enumerate(node.output):
        ts = [attrs[w].tensors[attrs[f"{w}_outputs"][j]] for w in sides]
        if any(np.dtype(t.dtype) != np.dtype(ts[0].dtype) for t in ts):
            raise ModelImportError(f"operator {node.name!r} (If): output {j} is "
                                   f"{np.dtype(ts[0].dtype)} in the then_branch, "
                                   f"{np.dtype(ts[1].dtype)} in the else_branch")
        shapes = {shape_of(attrs[w], attrs[f"{w}_outputs"][j]) for w in sides}
        if len(shapes) == 1:
            set_shape(imp, name, shapes.pop(), ts[0].dtype)
        elif name:      # the branch taken tells its shape: a pool tensor
            dynamic.append(name)
            imp.types[name] = imp.onnx.helper.np_dtype_to_tensor_dtype(np.dtype(ts[0].dtype))
    if dynamic:
        attrs["dynamic"] = dynamic
    return extra, attrs


def _import_loop(imp, node):
    """A Loop over tensors (its body planned with the outer graph) or over
    sequences / optionals (its body a model of its own)."""
    if carries_held(imp, node):
        return import_held_loop(imp, node)
    return import_loop(imp, node)


#: the importer of each body kind (the kernels' ``body`` fact)
_IMPORTERS = {"loop": _import_loop, "scan": import_scan, "if": import_if,
              "sequence_map": import_sequence_map}


def resolve_bodies(imp, nodes, strict):
    """Import the bodies of every Loop / Scan / If in ``nodes`` not done
    yet (in order, so a later one sees the shapes an earlier one fixed):
    ``imp.bodies[node name] = (extra inputs, attrs)``.  An If whose
    condition is a constant is left to ``take_branch``.  Not ``strict``: a
    node whose input shapes are not known yet is left for after the next
    shape inference.  Returns how many were imported."""
    count = 0
    for n in nodes:
        kind = op_fact(n.op_type, "body") if n.domain in ("", "ai.onnx") else None
        if kind is None or n.name in imp.bodies or \
                (kind == "if" and n.input and n.input[0] in imp.vals):
            continue
        try:
            imp.bodies[n.name] = _IMPORTERS[kind](imp, n)
        except Unknown:
            if strict:
                raise
            continue
        count += 1
    return count
