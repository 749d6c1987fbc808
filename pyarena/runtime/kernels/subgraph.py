"""A body subgraph (of a ``Loop`` or ``Scan``) planned on its own and run
inside its operator's scratch.

The outer plan reserves the operator's scratch while it runs, so no
tensor the outer graph keeps alive overlaps it: the body's own plan is
bound inside that region (one more level of the same arena, nested bodies
one more again).  The body's kernels are pyarena's own, built once with
the outer executor's ``keep`` (the constants they read go to its weights
arena); their views are bound when the region is first seen and again
only if it moves (the unplanned memory modes allocate scratch per run).
Binding also prepares what an iteration calls: each kernel's ``run`` with
its views and its scratch already carved, and, in a region that stays
(``stable``: the outer op's views are planned), the kernels bound to their
views (native pointers kept) and those with nothing to do left out, so an
iteration is one Python call per working kernel.
Plans are kept per body graph and scratch setting, since a kernel's
``setup`` runs more than once (set_scratch, the executor).

A body may hold pool tensors (sizes that depend on data: a NonZero, a
TopK whose K is computed in the body): they are not planned, the ops
touching them are :class:`~.pool_op.PoolOp` s drawing
from the outer op's pool (the outer op is then a pool op itself, run
through its ``produce``, which hands the pool over with ``use_pool``),
and each is freed after its last reader in the iteration.
"""
import weakref

import numpy as np

from ...planning import plan as make_plan
from .pool_op import PoolOp, pool_frees
from .registry import _carve, graph_kernel, set_scratch

__all__ = ["Body"]

#: body Graph -> {(scratch budget, native): Plan}
_PLANS = weakref.WeakKeyDictionary()
#: slack for aligning the region's start to the body plan's alignment
_ALIGN = 64


def _body_plan(graph, budget, native):
    key = (budget, bool(native))
    plans = _PLANS.setdefault(graph, {})
    if (graph.scratch_budget, graph.native) != key or key not in plans:
        set_scratch(graph, budget, native)
        plans.clear()
        plans[key] = make_plan(graph)
    return plans[key]


class Body:
    """``graph`` (a pyarena Graph) with its formal input names ``inputs``
    and output names ``outputs`` (any role: an output may be an input or a
    constant); ``nbytes`` is the region it needs.  ``bind(region)`` then
    ``run()``; ``ins`` / ``outs`` are the views of the inputs (None for one
    the body does not read) and outputs."""

    def __init__(self, graph, inputs, outputs, keep, budget, native):
        self.graph, self.names_in, self.names_out = graph, list(inputs), list(outputs)
        self.plan = _body_plan(graph, None if budget is None else int(budget), native)
        self.nbytes = self.plan.arena_bytes + _ALIGN
        self.pooled, self.pool_ops = {}, []
        self.kernels = self._kernels(keep)
        self.constants = {}
        for op, k in zip(graph.ops, self.kernels):
            for i, name in enumerate(op.inputs):
                t = graph.tensors.get(name) if name else None
                if t is not None and t.role == "constant" and \
                        (k.runtime is None or i in k.runtime):
                    self.constants[name] = keep(np.asarray(t.data, dtype=t.dtype)
                                                .reshape(t.shape))
        for name in self.names_out:     # an output that is a constant of the body
            t = graph.tensors[name]
            if t.role == "constant" and name not in self.constants:
                self.constants[name] = np.asarray(t.data, dtype=t.dtype).reshape(t.shape)
        self._addr = None
        self.bound, self.ins, self.outs, self.calls = [], [], [], []

    def _kernels(self, keep):
        """The body's kernels: a :class:`~.pool_op.PoolOp`
        for an op reading or writing a pool tensor (its pool given by
        ``use_pool`` before a run), the op's own kernel for the rest."""
        g = self.graph
        pool_ops = g.pool_ops()
        if not pool_ops:
            return [graph_kernel(g, op, keep) for op in g.ops]
        frees = pool_frees(g)
        out = []
        for op in g.ops:
            if op.name in pool_ops:
                self.pool_ops.append(PoolOp(g, op, keep, None, self.pooled,
                                                frees.get(op.name, ())))
                out.append(self.pool_ops[-1])
            else:
                out.append(graph_kernel(g, op, keep))
        return out

    def use_pool(self, pool):
        """The pool (``empty`` / ``free``) the body's pool tensors come from
        in the runs that follow: the outer op's, given to its ``produce``."""
        for s in self.pool_ops:
            s.pool = pool

    def bind(self, region, stable=False):
        """Bind the body's plan inside ``region`` (uint8, ``nbytes``);
        ``stable``: the region stays there for every run."""
        addr = region.__array_interface__["data"][0]
        if addr == self._addr:
            return
        views = self.plan.bind(region)
        g = self.graph
        arrays = dict(self.constants)
        for name, t in g.tensors.items():
            if t.role != "constant" and not t.dynamic and name in views:
                arrays[name] = views[name].reshape(-1).view(np.uint8)[:t.nbytes] \
                    .view(t.dtype).reshape(t.shape)
        bound = []
        for op, k in zip(g.ops, self.kernels):
            xs = [arrays.get(n) if n else None for n in op.inputs]
            ys = [arrays.get(n) for n in op.outputs if n]     # None: a pool tensor
            sc = views[f"{op.name}::scratch"].reshape(-1).view(np.uint8) \
                if k.scratch_bytes else None
            bound.append((k, xs, ys, sc))
        self.bound = bound
        self.calls = self.prepare(bound, stable)
        self.ins = [arrays.get(n) for n in self.names_in]
        self.outs = [arrays[n] for n in self.names_out]
        self._addr = addr

    @staticmethod
    def prepare(bound, stable):
        """(function, xs, ys, scratch views) per kernel an iteration runs."""
        calls = []
        for k, xs, ys, sc in bound:
            if stable:
                k.bind(xs, ys)
                if k.idle:
                    continue
            if getattr(k, "_act", 0) is None:  # Kernel.__call__ without its carving
                calls.append((k.run, xs, ys, _carve(sc, k.scratch) if k.scratch else ()))
            else:
                calls.append((k, xs, ys, sc))
        return calls

    def unbind(self):
        """Drop every view of the region (it is freed after the op when the
        executor allocates scratch per run)."""
        self._addr = None
        self.bound, self.ins, self.outs, self.calls = [], [], [], []

    def run(self):
        for f, xs, ys, sc in self.calls:
            f(xs, ys, sc)
