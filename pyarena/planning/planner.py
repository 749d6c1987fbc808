"""Static memory planning: one arena and fixed offsets for a whole graph.

``plan(graph)`` turns a :class:`~pyarena.graph.Graph` into a
:class:`~pyarena.planning.result.Plan`: lifetimes and buffer sharing
(:mod:`pyarena.planning.sharing`, using the in-place rule table; Concat
inputs written into their slices, :mod:`pyarena.planning.concat`), then
aligned offsets from the C core (:mod:`pyarena.planning.assign`), so that
buffers live at the same time never overlap in bytes.  Here the options
(:class:`~pyarena.planning.options.PlanOptions`) are read, the graph is
validated and checked against ``max_memory``, and the plan is made once
(:mod:`pyarena.planning.single`, after scheduling if asked) or by the
budget search (:mod:`pyarena.planning.fit`, which plans with the same
module).

``plan_intervals`` plans bare intervals (e.g. a MiniMalloc CSV read by
:func:`~pyarena.planning.intervals.load_intervals_csv`);
:mod:`pyarena.planning.validate` re-checks any plan independently.
"""
import time

import numpy as np

from ..errors import InvalidArgumentError
from ..graph import Graph
from .assign import assign_offsets, check_alignment, check_strategy
from .limit import check_graph_limit, check_plan_limit, graph_weights, resolve_max_memory
from .fit import fit_plan
from .options import PlanOptions
from .result import Buffer, Plan, padded_size
from .schedule import schedule as find_schedule
from .single import NoGC, plan_once

__all__ = ["plan", "plan_intervals"]


def plan(graph, options=None, **kw):
    """Plan the work arena of ``graph`` (validated, and reordered if needed,
    inside) with ``options``, a :class:`~.options.PlanOptions` (None: the
    defaults), changed by the keywords ``kw`` (its fields: ``plan(g,
    strategy="greedy-by-size")`` is ``plan(g, PlanOptions(strategy=...))``).
    ``strategy`` is one of :data:`~pyarena.planning.assign.STRATEGIES`;
    ``inplace`` allows buffer sharing under ``rules`` (the default table:
    what the kernels declare, plus :func:`register_rule`); with it,
    ``inplace_concat`` lets the producers of a Concat's inputs write into
    their slices of its output (:mod:`.concat`; kept only when the arena
    is not larger than without).  ``capacity`` (bytes)
    asks for a plan within that size (PlanInfeasibleError if none is found).
    ``max_memory`` (bytes; None: the physical memory) bounds weights + arena:
    a plan over it raises MemoryLimitError (:mod:`.limit`).
    ``schedule=True`` first puts the graph's ops in the order of least peak
    (:func:`pyarena.planning.schedule.schedule`; ``graph.ops`` is reordered,
    and ``plan.schedule`` says what was done).  ``memory_budget`` (bytes)
    asks for the fastest plan whose arena fits it: the given order, then
    the scheduled one, then smaller operator scratch through ``rescratch``
    (None: the kernels' rules; False: keep the scratch), then (``patch``)
    a leading stage run in row bands (:mod:`.patch`) -- see :mod:`.fit`;
    ``plan.budget`` says what was done, PlanInfeasibleError (with
    ``smallest_bytes``) when nothing fits.  ``retargeted``: the graph is a
    :meth:`~pyarena.graph.Graph.retargeted` copy of a validated graph, its ops
    and tensors not added, removed or reordered since (only their scratch
    sizes set): valid as that one was, so not validated again (the retarget
    checked every new shape).  Returns a :class:`Plan`."""
    t0 = time.perf_counter()
    if not isinstance(graph, Graph):
        raise TypeError(f"plan() needs a pyarena.graph.Graph, not {type(graph).__name__}")
    options = PlanOptions.of(options, **kw)
    budget = resolve_max_memory(options.max_memory)
    if not options.retargeted:
        graph.validate()
    weights = graph_weights(graph)      # (the constants do not change while planning)
    check_graph_limit(graph, budget, weights)  # a tensor alone over the budget: no planning
    if options.memory_budget is not None:
        result = fit_plan(graph, options, weights)
    else:
        result = _plan_in_order(graph, options, weights, t0)
    check_plan_limit(result, graph, budget, weights)
    return result


def _plan_in_order(graph, options, weights, t0):
    """The plan without a memory budget: the graph scheduled first if
    asked, then planned once."""
    order = None
    if options.schedule:
        order = find_schedule(graph, options.alignment,
                              time_limit=min(options.time_limit, 5.0))
        graph.ops = [graph.ops[i] for i in order.order]
    result = plan_once(graph, options, weights)
    result.schedule = order
    result.plan_seconds = time.perf_counter() - t0
    return result


def plan_intervals(buffers, strategy="best", alignment=1, time_limit=10.0,
                   capacity=None):
    """Plan bare buffers (``Buffer`` objects, or ``(name, size, first, last)``
    tuples; lifetimes inclusive).  Returns a :class:`Plan` without a graph;
    the given Buffer objects are copied, not modified."""
    with NoGC():
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
