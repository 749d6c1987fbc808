"""The memory limit: the one check that a model fits before anything is
allocated for it.

``max_memory`` (bytes) bounds the weights plus the work arena of a model.
None means the machine's physical memory.  ``load_model`` checks the
graph (weights + its largest tensor: the arena holds at least that),
``plan`` and ``Executor`` check the plan (weights + arena), and the CLI's
``--max-memory`` passes the figure down.  The refusal is one
:class:`~pyarena.errors.MemoryLimitError` naming the largest tensor, its
bytes, the bytes needed and the limit.  (A *budget* is something else: a
size the planner fits the arena or an op's scratch into by choosing how
to run, see :mod:`.fit`; a limit refuses.)
"""
import os

from ..errors import MemoryLimitError
from ..memory.args import as_size

__all__ = ["physical_memory", "resolve_max_memory", "check_graph_limit",
           "check_plan_limit"]


def physical_memory():
    """Bytes of physical memory (sysconf); 2**64 - 1 where unknown."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return (1 << 64) - 1


def resolve_max_memory(max_memory):
    """``max_memory`` checked (a positive integral byte count), or the
    physical memory for None."""
    if max_memory is None:
        return physical_memory()
    return as_size(max_memory, "max_memory", 1)


def _largest(items):
    best = ("", 0)
    for name, n in items:
        if n > best[1]:
            best = (name, n)
    return best


def graph_weights(graph):
    """Bytes of the constants of ``graph``."""
    return sum(t.nbytes for t in graph.tensors.values() if t.role == "constant")


def check_graph_limit(graph, max_memory=None, weights=None):
    """Refuse ``graph`` if its weights (``weights``: their bytes, when the
    caller has summed them) plus its largest work tensor (or operator
    scratch) exceed the limit.  Returns the limit."""
    limit = resolve_max_memory(max_memory)
    weights = graph_weights(graph) if weights is None else weights
    work = [(n, t.nbytes) for n, t in graph.tensors.items() if t.role != "constant"]
    work += [(f"{op.name}::scratch", op.scratch_bytes or 0) for op in graph.ops]
    name, nbytes = _largest(work)
    if weights + nbytes > limit:
        if weights > nbytes:
            name, nbytes = _largest((n, t.nbytes) for n, t in graph.tensors.items()
                                    if t.role == "constant")
        raise MemoryLimitError(name, nbytes, weights + max(nbytes, 0), limit,
                               f" (weights {weights:,} bytes)", lower_bound=True)
    return limit


def check_plan_limit(plan, graph=None, max_memory=None, weights=None):
    """Refuse a plan whose weights plus arena exceed the limit, naming its
    largest buffer's tensor.  ``weights``: the bytes of ``graph``'s
    constants when the caller has them (None: summed here, or the plan's
    own figure without a graph).  Returns the limit."""
    limit = resolve_max_memory(max_memory)
    if weights is None:
        weights = graph_weights(graph) if graph is not None else int(plan.weights_bytes or 0)
    arena = int(plan.arena_bytes)
    if weights + arena > limit:
        bufs = [((b.tensors[0] if b.tensors else b.name), b.size) for b in plan.buffers]
        name, nbytes = _largest(bufs)
        if graph is not None and weights > arena:
            name, nbytes = _largest((n, t.nbytes) for n, t in graph.tensors.items()
                                    if t.role == "constant")
        raise MemoryLimitError(name, nbytes, weights + arena, limit,
                               f" (weights {weights:,} + arena {arena:,} bytes)")
    return limit
