"""ONNX control flow resolved at import: an ``If`` whose condition is
known then (a constant, or folded from shapes and from inputs given as
values) is replaced by the nodes of the branch it takes.

Exporters wrap whole models in ``If``s that test a sample rate, a batch
size or whether a state was given (Silero VAD: the model inside an ``If``
on its ``sr`` input, and three more inside on shapes).  For one input
signature those conditions are constants, and the importer takes the
branch: its nodes join the graph (their names prefixed with the ``If``'s,
so that they stay unique), its initializers become constants, and an
``Identity`` per output renames the branch's outputs to the ``If``'s.  The
branch's own ``If``s are resolved the same way as their conditions fold.
An ``If`` whose condition depends on data is refused by name (the
executor does not run subgraphs).
"""
import numpy as np

from ..errors import ModelImportError

__all__ = ["take_branch"]


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
