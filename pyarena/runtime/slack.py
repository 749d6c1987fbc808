"""Operator scratch sized from the slack at its position.

A kernel's workspace (im2col bands, pooling bands) lives only while its
op runs, but at the position where the activations peak, any workspace adds
to the arena: the plan's arena is then above the *activations-only*
bound (the largest sum of activation bytes live at one position, with the
planned in-place reuse).  :func:`plan_in_slack` plans once, measures for
every op the slack at its position (that bound minus the activations live
then), narrows the workspace of each op whose scratch does not fit its
slack (the op's own ``notes.scratch_budget``: narrower bands, same results),
and plans again.  Ops away from the peak keep their wide, fast bands.
The arena reaches the activations-only bound unless a kernel's narrowest
workspace (one output row) is still larger than its slack.

:func:`plan_to_run` is the one choice of the plan an executor runs when
it is not given one (``Executor``, ``pyarena run``, ``InferenceSession``):
the budget search for a memory budget, else the scratch within the slack.
"""
from itertools import accumulate

from ..planning import PlanOptions
from ..planning import plan as make_plan
from ..planning.result import padded_size
from .kernels.registry import scratch_bytes_for

__all__ = ["plan_in_slack", "plan_to_run", "activation_live"]

def activation_live(p, positions):
    """Bytes of planned activations (not scratch) live at each position of plan
    ``p`` (aligned sizes), and their maximum: the activations-only bound."""
    change = [0] * (positions + 1)      # +size at a buffer's first position, -size after its last
    for b in p.buffers:
        if any(t.endswith("::scratch") for t in b.tensors):
            continue
        first, last = max(b.first, 0), min(b.last, positions - 1)
        if first <= last:
            size = padded_size(b.size, p.alignment)
            change[first] += size
            change[last + 1] -= size
    live = list(accumulate(change[:positions]))
    return live, max(live, default=0)


def _restore(op, budget):
    op.notes.scratch_budget = budget


def plan_to_run(graph, options=None, slack=True, **kw):
    """The plan an executor runs, with ``options`` (a
    :class:`~pyarena.planning.PlanOptions`, changed by ``kw``): the
    fastest that fits ``options.memory_budget`` when there is one
    (:func:`pyarena.plan`, which sizes the scratch itself), else the
    scratch within the slack (:func:`plan_in_slack`; ``slack=False``: the
    kernels' own workspaces, a plain :func:`pyarena.plan`)."""
    options = PlanOptions.of(options, **kw)
    if options.memory_budget is None and slack:
        return plan_in_slack(graph, options)
    return make_plan(graph, options)


def plan_in_slack(graph, options=None, **kw):
    """A plan of ``graph`` whose operators' scratch fits the slack at their
    positions (see the module docstring).  ``options`` (a
    :class:`~pyarena.planning.PlanOptions`, changed by ``kw``) go to each
    :func:`pyarena.plan`.  Ops narrowed get ``notes.scratch_budget``
    (the executor builds the same kernels); ``plan.slack`` records
    ``{"activation_bound": bytes, "narrowed": {op name: budget}}``."""
    options = PlanOptions.of(options, **kw)
    p = make_plan(graph, options)
    live, bound = activation_live(p, len(graph.ops))
    narrowed = {}
    for i, op in enumerate(graph.ops):
        s = padded_size(op.scratch_bytes, p.alignment) if op.scratch_bytes else 0
        if s and live[i] + s > bound:
            narrowed[op.name] = max(1, bound - live[i])
    if narrowed:
        old = {op.name: op.notes.scratch_budget for op in graph.ops if op.name in narrowed}
        for op in graph.ops:
            if op.name in narrowed:
                op.notes.scratch_budget = narrowed[op.name]
                new = scratch_bytes_for(graph, op)        # only these change
                if new < op.scratch_bytes:
                    op.scratch_bytes = new
                else:                     # no narrower form: left as declared
                    _restore(op, old[op.name])
                    del narrowed[op.name]
        p2 = make_plan(graph, options) if narrowed else p
        if p2.arena_bytes <= p.arena_bytes:
            p = p2
        else:                            # never worse than the plan without it
            for op in graph.ops:
                if op.name in narrowed:
                    _restore(op, old[op.name])
                    op.scratch_bytes = scratch_bytes_for(graph, op)
            p = make_plan(graph, options)
            narrowed = {}
    p.slack = {"activation_bound": int(bound), "narrowed": narrowed}
    return p
