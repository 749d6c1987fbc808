"""Where an executor's constants live: once in the weights arena.

The constants a kernel reads at run time are copied into the weights
:class:`~pyarena.Arena` once (:func:`place_constants`); the graph's tensor
then shares that copy (a read-only view), and a weight still in its model
file gives its pages back.  A compiled model's constants are read where
they lie in its mapped file (aligned for the kernels): not copied.  What kernel setup alone read of the files
goes back afterwards (:func:`release_setup_reads`).
"""
import numpy as np

from ..errors import GraphError
from ..memory.heap import trim_heap
from ..memory.mapped import read_in_place, release_files
from .keeper import share

__all__ = ["place_constant", "place_constants", "release_setup_reads"]


def place_constant(weights, t):
    """Constant tensor ``t`` in the ``weights`` arena; ``t.data`` becomes a
    read-only view of that copy (one copy of each weight, not two)."""
    if t.data is None:
        raise GraphError(f"constant tensor {t.name!r} has no data")
    src = np.asarray(t.data)
    if (weights.owns(src) or read_in_place(src)) and src.dtype == t.dtype and \
            src.flags.c_contiguous:     # (a compiled model's constant: used where it lies)
        return src.reshape(t.shape)
    arr = weights.asarray(src.astype(t.dtype, copy=False).reshape(t.shape))
    share(t, arr)
    return arr


def place_constants(graph, kernels, weights):
    """{name: array in ``weights``} of the constants ``kernels`` (one per
    op of ``graph``) read at run time (every input, unless the kernel
    names the ones it reads: ``Kernel.runtime``)."""
    constants = {}
    for op, k in zip(graph.ops, kernels):
        for i, name in enumerate(op.inputs):
            if not name or graph.tensors[name].role != "constant":
                continue
            if k.runtime is not None and i not in k.runtime:
                continue
            if name not in constants:
                constants[name] = place_constant(weights, graph.tensors[name])
    return constants


def release_setup_reads(graph, packed):
    """What kernel setup read of the model files (setup-only weights) goes
    back, and, if it laid weights out (``packed``), the heap its
    temporaries used (weights folded and re-laid out before they were
    packed; not when every kernel took its prior's: the next signature
    would fault it back)."""
    release_files(t.data for t in graph.tensors.values() if t.role == "constant")
    if packed:
        trim_heap()
