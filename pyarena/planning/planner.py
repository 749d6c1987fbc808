"""Static memory planning: one arena and fixed offsets for a whole graph.

``plan(graph)`` turns a :class:`~pyarena.graph.Graph` into a
:class:`~pyarena.planning.result.Plan`: lifetimes and buffer sharing
(:mod:`pyarena.planning.sharing`, using the in-place rule table; Concat
inputs written into their slices, :mod:`pyarena.planning.concat`), then
aligned offsets from the C core (:mod:`pyarena.planning.assign`), so that
buffers live at the same time never overlap in bytes.

``plan_intervals`` plans bare intervals (e.g. a MiniMalloc CSV read by
:func:`~pyarena.planning.intervals.load_intervals_csv`);
:mod:`pyarena.planning.validate` re-checks any plan independently.
"""
import gc
import time

import numpy as np

from ..errors import InvalidArgumentError, PlanInfeasibleError
from ..graph import Graph
from .assign import assign_offsets, check_alignment, check_strategy
from .concat import ConcatPlacer
from .budget import check_graph_budget, check_plan_budget, graph_weights, resolve_max_memory
from .fit import check_memory_budget, fit_plan
from .inplace import as_rule_table
from .result import Buffer, Plan, padded_size, tensor_info
from .schedule import schedule as find_schedule
from .sharing import share_buffers, tensor_lifetimes

__all__ = ["plan", "plan_intervals"]


def plan(graph, strategy="best", alignment=64, inplace=True, time_limit=10.0,
         rules=None, capacity=None, max_memory=None, schedule=False,
         memory_budget=None, rescratch=None, inplace_concat=True, patch=True,
         resized=False):
    """Plan the work arena of ``graph`` (validated, and reordered if needed,
    inside).  ``strategy`` is one of :data:`~pyarena.planning.assign.STRATEGIES`;
    ``inplace`` allows buffer sharing under ``rules`` (the default table:
    what the kernels declare, plus :func:`register_rule`); with it,
    ``inplace_concat`` lets the producers of a Concat's inputs write into
    their slices of its output (:mod:`.concat`; kept only when the arena
    is not larger than without).  ``capacity`` (bytes)
    asks for a plan within that size (PlanInfeasibleError if none is found).
    ``max_memory`` (bytes; None: the physical memory) bounds weights + arena:
    a plan over it raises MemoryBudgetError (:mod:`.budget`).
    ``schedule=True`` first puts the graph's ops in the order of least peak
    (:func:`pyarena.planning.schedule.schedule`; ``graph.ops`` is reordered,
    and ``plan.schedule`` says what was done).  ``memory_budget`` (bytes)
    asks for the fastest plan whose arena fits it: the given order, then
    the scheduled one, then smaller operator scratch through ``rescratch``
    (None: the kernels' rules; False: keep the scratch), then (``patch``)
    a leading stage run in row bands (:mod:`.patch`) -- see :mod:`.fit`;
    ``plan.budget`` says what was done, PlanInfeasibleError (with
    ``smallest_bytes``) when nothing fits.  ``resized``: the graph is a
    :meth:`~pyarena.graph.Graph.resized` copy of a validated graph, its ops
    and tensors not added, removed or reordered since (only their scratch
    sizes set): valid as that one was, so not validated again (the re-size
    checked every new shape).  Returns a :class:`Plan`."""
    t0 = time.perf_counter()
    if not isinstance(graph, Graph):
        raise TypeError(f"plan() needs a pyarena.graph.Graph, not {type(graph).__name__}")
    check_strategy(strategy)
    alignment = check_alignment(alignment)
    budget = resolve_max_memory(max_memory)
    if memory_budget is not None:
        check_memory_budget(memory_budget)
        if capacity is not None:
            raise InvalidArgumentError("give capacity or memory_budget, not both "
                                       "(memory_budget plans with the capacity it needs)")
    if not resized:
        graph.validate()
    weights = graph_weights(graph)      # (the constants do not change while planning)
    check_graph_budget(graph, budget, weights)  # a tensor alone over the budget: no planning
    concat = bool(inplace) and bool(inplace_concat)
    if memory_budget is not None:
        def make(cap, limit=None):
            with _NoGC():
                return _plan(graph, strategy, alignment, inplace,
                             time_limit if limit is None else limit, rules, cap,
                             time.perf_counter(), concat, weights)
        result = fit_plan(graph, memory_budget, make, rescratch=rescratch,
                          schedule=schedule, alignment=alignment, time_limit=time_limit,
                          patch=patch)
        check_plan_budget(result, graph, budget, weights)
        return result
    order = None
    if schedule:
        order = find_schedule(graph, alignment, time_limit=min(time_limit, 5.0))
        graph.ops = [graph.ops[i] for i in order.order]
    with _NoGC():
        result = _plan(graph, strategy, alignment, inplace, time_limit, rules, capacity, t0,
                       concat, weights)
    result.schedule = order
    check_plan_budget(result, graph, budget, weights)
    return result


def _plan(graph, strategy, alignment, inplace, time_limit, rules, capacity, t0, concat,
          weights):
    table = as_rule_table(rules) if inplace else None
    life = tensor_lifetimes(graph)
    tensors = graph.tensors
    nbytes = {name: tensors[name].nbytes for name in life}
    joins = []
    buffers, reuses = share_buffers(graph, life, nbytes, table, record=joins)
    naive = sum(padded_size(v, alignment) for v in nbytes.values()) + \
        sum(padded_size(op.scratch_bytes, alignment) for op in graph.ops if op.scratch_bytes)

    def assign(bufs):
        return assign_offsets([b.size for b in bufs], [b.first for b in bufs],
                              [b.last for b in bufs], strategy, alignment, time_limit,
                              capacity)
    res = None
    if concat:
        res, buffers, reuses = _concat_in_place(graph, life, nbytes, table, buffers, reuses,
                                                alignment, assign, joins)
    if res is None:
        res = assign(buffers)
    for b, off in zip(buffers, res["offsets"].tolist()):
        b.offset = off
    return Plan(buffers, arena_bytes=res["arena"], lower_bound_bytes=res["bound"],
                naive_bytes=naive, alignment=alignment, strategy=strategy,
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


class _NoGC:
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


def plan_intervals(buffers, strategy="best", alignment=1, time_limit=10.0,
                   capacity=None):
    """Plan bare buffers (``Buffer`` objects, or ``(name, size, first, last)``
    tuples; lifetimes inclusive).  Returns a :class:`Plan` without a graph;
    the given Buffer objects are copied, not modified."""
    with _NoGC():
        return _plan_intervals(buffers, strategy, alignment, time_limit, capacity)


def _plan_intervals(buffers, strategy, alignment, time_limit, capacity):
    t0 = time.perf_counter()
    check_strategy(strategy)
    alignment = check_alignment(alignment)
    rows = [(b.name, b.size, b.first, b.last, b.tensors) if isinstance(b, Buffer)
            else (*b, None) for b in buffers]
    if any(len(r) != 5 for r in rows):
        bad = next(r for r in rows if len(r) != 5)
        raise InvalidArgumentError(f"an interval must be (name, size, first, last), "
                                   f"not {bad[:-1]!r}")
    n = len(rows)
    flat = [v for r in rows for v in r[1:4]]
    if not all(type(v) is int for v in flat):
        for r in rows:
            for v, what in zip(r[1:4], ("size", "first", "last")):
                if isinstance(v, bool) or not isinstance(v, (int, np.integer)):
                    raise InvalidArgumentError(f"buffer {r[0]!r}: {what} must be a "
                                               f"non-negative integer, not {v!r}")
        flat = [int(v) for v in flat]
    try:
        nums = np.array(flat, dtype=np.int64).reshape(n, 3)
    except OverflowError:
        raise InvalidArgumentError("an interval's size or step does not fit in "
                                   "64 bits") from None
    bad = np.flatnonzero((nums < 0).any(axis=1) | (nums[:, 2] < nums[:, 1]))
    if bad.size:
        name, size, first, last, _ = rows[int(bad[0])]
        raise InvalidArgumentError(f"buffer {name!r}: size {size}, lifetime [{first}, "
                                   f"{last}]: need size >= 0 and 0 <= first <= last "
                                   "(a lifetime that ends before it starts)")
    names = [str(r[0]) for r in rows]
    if len(set(names)) != n:
        seen = set()
        dup = next(x for x in names if x in seen or seen.add(x))
        raise InvalidArgumentError(f"buffer name {dup!r} is used twice")
    res = assign_offsets(nums[:, 0], nums[:, 1], nums[:, 2], strategy, alignment,
                         time_limit, capacity)
    offs = res["offsets"].tolist()
    bufs = [Buffer(name, size, first, last, off, list(r[4]) if r[4] else [name])
            for name, (size, first, last), off, r in zip(names, nums.tolist(), offs, rows)]
    padded_sizes = [padded_size(v, alignment) for v in nums[:, 0].tolist()] \
        if n and int(nums[:, 0].max()) > (1 << 40) else \
        ((nums[:, 0] + alignment - 1) // alignment * alignment).tolist()
    return Plan(bufs, arena_bytes=res["arena"], lower_bound_bytes=res["bound"],
                naive_bytes=sum(padded_sizes), alignment=alignment, strategy=strategy,
                chosen_strategy=res["chosen"], optimal=res["optimal"],
                plan_seconds=time.perf_counter() - t0,
                num_ops=int(nums[:, 2].max()) + 1 if n else 0, graph=None,
                inplace=False, c_seconds=res["seconds"])
