"""Tied weights held once: a linear layer whose weight is another op's
run-time table reads that table where it lies.

A language model's output layer is often its token embedding, tied: the
ONNX export computes ``logits = h @ Transpose(embedding)`` (or a Gemm
with ``transB``) while a Gather reads the same embedding for the input
tokens.  Folded at import, the transpose is a view of the embedding's
memory, not a copy; but a linear kernel packs its constant weight into
its own layout, so the process would hold the embedding twice -- the
Gather's table in the weights arena and the packed copy (4 MiB each for
a 4096 x 256 vocabulary, 150 MiB for GPT-2's).

:func:`note_tied_weights` finds such a weight and notes on the linear op
(``Op.notes.tied_weight``: its input index, the table's constant, the axis
permutation from the table to the weight).  The MatMul / Gemm kernel then
does not pack it and runs its NumPy product over the weight as a view
(BLAS reads a transposed operand as it lies), and the executor places the
weight as that view of the table's copy (:func:`pyarena.runtime.placement.place_constants`):
one copy of the embedding in the process.  A table of fewer than
``TIED_MIN_BYTES`` is left to the packed path (its copy costs little).
"""
import numpy as np

__all__ = ["TIED_MIN_BYTES", "note_tied_weights"]

#: a shared weight smaller than this is packed as usual
TIED_MIN_BYTES = 1 << 20

#: linear ops and the input that is their weight
_LINEAR = {"MatMul": 1, "Gemm": 1}


def _span(d):
    """(address, bytes) of the memory array ``d`` covers, or None unless it
    covers exactly its bytes (C-contiguous up to an axis permutation)."""
    if not isinstance(d, np.ndarray) or d.ndim != 2 or d.size == 0:
        return None
    if not (d.flags.c_contiguous or d.T.flags.c_contiguous):
        return None
    return d.__array_interface__["data"][0], d.nbytes


def _tables(graph):
    """(address, bytes) -> name of each constant a Gather reads at run time
    as its table (input 0), C-contiguous and 2-D."""
    out = {}
    for op in graph.ops:
        if op.op_type != "Gather" or not op.inputs or not op.inputs[0]:
            continue
        t = graph.tensors[op.inputs[0]]
        d = t.data
        if t.role == "constant" and isinstance(d, np.ndarray) and d.flags.c_contiguous and \
                d.nbytes >= TIED_MIN_BYTES:
            span = _span(d)
            if span is not None:
                out[span] = t.name
    return out


def note_tied_weights(graph):
    """Note on every MatMul / Gemm whose weight is a Gather's table (the
    same memory, as it lies or transposed) ``notes.tied_weight = (input,
    table name, perm)``; clear a stale note.  Returns the ops noted."""
    tables = _tables(graph) if any(op.op_type == "Gather" for op in graph.ops) else {}
    noted = []
    for op in graph.ops:
        i = _LINEAR.get(op.op_type)
        if i is None:
            continue
        op.notes.tied_weight = None
        if not tables or len(op.inputs) <= i or not op.inputs[i]:
            continue
        t = graph.tensors[op.inputs[i]]
        owner = tables.get(_span(t.data)) if t.role == "constant" else None
        if owner is None:
            continue
        table = graph.tensors[owner].data
        d = t.data
        if d.shape == table.shape and d.strides == table.strides:
            perm = (0, 1)
        elif d.shape == table.shape[::-1] and d.strides == table.strides[::-1]:
            perm = (1, 0)
        else:
            continue
        if d.dtype != table.dtype:
            continue
        op.notes.tied_weight = (i, owner, perm)
        noted.append(op)
    return noted
