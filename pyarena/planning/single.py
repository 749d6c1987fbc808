"""One plan of a graph as it stands: lifetimes, sharing, Concat, offsets.

:func:`plan_once` is the single-shot planner under :func:`pyarena.plan`
and the budget search (:mod:`.fit`), which both call it with a
:class:`~.options.PlanOptions`: tensor lifetimes and buffer sharing under
the in-place rules (:mod:`.sharing`), Concat inputs written into their
slices of the output when that does not raise the arena (:mod:`.concat`),
then aligned offsets from the C core (:mod:`.assign`).  It neither
validates nor reorders the graph and checks no memory budget: the caller
does (``plan`` once, the budget search once for all its candidates).
"""
import gc
import time

from ..errors import PlanInfeasibleError
from .assign import assign_offsets
from .limit import graph_weights
from .concat import ConcatPlacer
from .inplace import as_rule_table
from .result import Plan, padded_size, tensor_info
from .sharing import share_buffers, tensor_lifetimes

__all__ = ["plan_once", "NoGC"]


def plan_once(graph, options, weights=None):
    """The :class:`Plan` of ``graph`` in its current order with
    ``options``' strategy, alignment, time limit, capacity and sharing
    (``options.memory_budget``, ``schedule`` and the like are the
    caller's business).  ``weights``: the bytes of the graph's constants
    when the caller has summed them."""
    t0 = time.perf_counter()
    if weights is None:
        weights = graph_weights(graph)
    with NoGC():
        return _plan(graph, options, weights, t0)


def _plan(graph, options, weights, t0):
    inplace, alignment = options.inplace, options.alignment
    table = as_rule_table(options.rules) if inplace else None
    life = tensor_lifetimes(graph)
    tensors = graph.tensors
    nbytes = {name: tensors[name].nbytes for name in life}
    joins = []
    buffers, reuses = share_buffers(graph, life, nbytes, table, record=joins)
    naive = sum(padded_size(v, alignment) for v in nbytes.values()) + \
        sum(padded_size(op.scratch_bytes, alignment) for op in graph.ops if op.scratch_bytes)

    def assign(bufs):
        return assign_offsets([b.size for b in bufs], [b.first for b in bufs],
                              [b.last for b in bufs], options.strategy, alignment,
                              options.time_limit, options.capacity)
    res = None
    if options.concat:
        res, buffers, reuses = _concat_in_place(graph, life, nbytes, table, buffers, reuses,
                                                alignment, assign, joins)
    if res is None:
        res = assign(buffers)
    for b, off in zip(buffers, res["offsets"].tolist()):
        b.offset = off
    return Plan(buffers, arena_bytes=res["arena"], lower_bound_bytes=res["bound"],
                naive_bytes=naive, alignment=alignment, strategy=options.strategy,
                chosen_strategy=res["chosen"], optimal=res["optimal"],
                plan_seconds=time.perf_counter() - t0, num_ops=len(graph.ops),
                weights_bytes=weights, graph=graph, inplace=inplace, reuses=reuses,
                tensor_info=tensor_info(graph, nbytes), rules=table,
                c_seconds=res["seconds"])


def _concat_in_place(graph, life, nbytes, table, base, reuses, alignment, assign, joins):
    """``(offsets, buffers, reuses)`` with Concat inputs in their output's
    slices (:mod:`.concat`) when that arena is not larger than the plan's
    without; else ``(None or the offsets of base, base, reuses)``.  ``joins``:
    the in-place decisions of the pass that made ``base``, replayed up to
    the first Concat that moves an input."""
    placer = ConcatPlacer(graph, table, life, base, alignment)
    if not placer.any:
        return None, base, reuses
    merged, with_concat = share_buffers(graph, life, nbytes, table, placer, replay=joins)
    if not any(r[3] == "concat" for r in with_concat):
        return None, base, reuses
    try:
        res = assign(merged)
    except PlanInfeasibleError:     # within the capacity only without: try that
        return None, base, reuses
    if res["arena"] <= placer.base_peak:    # no plan of base can be smaller
        return res, merged, with_concat
    try:
        alt = assign(base)
    except PlanInfeasibleError:     # within the capacity only with it
        return res, merged, with_concat
    if alt["arena"] < res["arena"]:
        return alt, base, reuses
    return res, merged, with_concat


class NoGC:
    """Pause the cyclic GC while building many small objects (it would
    rescan them all again and again: half the front end's time at 100,000
    buffers); nothing built here forms cycles."""

    def __enter__(self):
        self.was = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc):
        if self.was:
            gc.enable()
        return False
