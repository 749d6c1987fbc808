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
from ..memory.mapped import is_mapped, read_in_place, release_files, release_pages
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
    if is_mapped(src) and src.dtype == t.dtype and src.flags.c_contiguous and \
            src.nbytes > PLACE_SLAB_BYTES:
        arr = _copy_releasing(weights, src.reshape(t.shape))
    else:
        arr = weights.asarray(src.astype(t.dtype, copy=False).reshape(t.shape))
    share(t, arr)
    return arr


#: a weight still in its model file is copied this many bytes at a time,
#: each slab's file pages given back once copied
PLACE_SLAB_BYTES = 1 << 20


def _copy_releasing(weights, src):
    """A copy of mapped-file view ``src`` in ``weights``, slab by slab, each
    slab's pages of the file given back as soon as it is copied: the copy
    never holds the whole weight twice (the file's pages and the arena's)."""
    arr = weights.empty(src.shape, src.dtype)
    flat_src, flat = src.reshape(-1), arr.reshape(-1)
    step = max(1, PLACE_SLAB_BYTES // src.itemsize)
    for lo in range(0, flat.size, step):
        part = flat_src[lo:lo + step]
        flat[lo:lo + step] = part
        release_pages(part)
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
            if name in constants:
                continue
            tied = op.notes.tied_weight
            if tied is not None and tied[0] == i:   # another constant's memory
                _, owner, perm = tied
                if owner not in constants:
                    constants[owner] = place_constant(weights, graph.tensors[owner])
                constants[name] = _tied_view(graph.tensors[name], constants[owner], perm)
            else:
                constants[name] = place_constant(weights, graph.tensors[name])
    return constants


def _tied_view(t, table, perm):
    """Constant ``t`` (a tied weight: runtime/tied.py) as the view ``perm``
    of ``table``'s copy in the weights arena (no bytes of its own)."""
    view = table.transpose(perm).view()
    view.flags.writeable = False
    if view.shape != tuple(t.shape) or view.dtype != t.dtype:
        raise GraphError(f"tied weight {t.name!r}: {list(t.shape)} {t.dtype} is not the "
                         f"table's {list(view.shape)} {view.dtype}")
    t.data = view
    return view


def release_setup_reads(graph, packed):
    """What kernel setup read of the model files (setup-only weights) goes
    back, and, if it laid weights out (``packed``), the heap its
    temporaries used (weights folded and re-laid out before they were
    packed; not when every kernel took its prior's: the next signature
    would fault it back)."""
    release_files(t.data for t in graph.tensors.values() if t.role == "constant")
    if packed:
        trim_heap()
