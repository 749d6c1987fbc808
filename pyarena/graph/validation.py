"""Graph validation: :meth:`Graph.validate` names the culprit of every
structural mistake and puts the ops in a valid execution order
(:class:`Validation`, part of :class:`~pyarena.graph.graph.Graph`), with
the one stable topological sort (:func:`stable_toposort`) that the ONNX
importer uses too.
"""
import heapq
import math

from ..errors import GraphError
from .binding import unbound_message
from .tensor import _check_size, _itemsize

__all__ = ["Validation", "stable_toposort"]


class Validation:
    """Mixed into ``Graph``: reads its ``tensors`` and ``ops`` and its
    ``unbound_inputs()``, and reorders ``ops``."""

    def validate(self):
        """Check the graph and put the ops in a valid execution order.

        Raises GraphError for: an op reading or writing an undeclared
        tensor, a tensor produced twice, a graph input or constant written by
        an op, an activation or output that no op produces, a cycle, and a
        tensor whose size is unknown or absurd.  If the ops are acyclic but
        out of order they are reordered (stable topological sort).
        Returns self.
        """
        tensors = self.tensors
        names, prod, twice = set(), {}, None
        for op in self.ops:
            if op.name in names:
                raise GraphError(f"operator name {op.name!r} is used twice")
            names.add(op.name)
            for t in op.inputs:
                if t and t not in tensors:
                    raise GraphError(f"operator {op.name!r} reads unknown tensor {t!r}")
            if not any(op.outputs):
                raise GraphError(f"operator {op.name!r} has no outputs")
            for t in op.outputs:
                if not t:                               # an omitted optional output
                    continue
                tt = tensors.get(t)
                if tt is None:
                    raise GraphError(f"operator {op.name!r} writes unknown tensor {t!r}")
                if tt.role in ("input", "constant"):
                    raise GraphError(f"operator {op.name!r} writes {tt.role} tensor {t!r}")
                if t in prod:           # reported after every op's own checks
                    twice = twice or (t, prod[t], op.name)
                else:
                    prod[t] = op.name
            if op.scratch_bytes < 0:
                raise GraphError(f"operator {op.name!r}: negative scratch_bytes")
        if twice:
            raise GraphError(f"tensor {twice[0]!r} is produced twice: by {twice[1]!r} "
                             f"and {twice[2]!r}")
        for t in self.tensors.values():
            if t.role in ("activation", "output") and t.name not in prod:
                used = any(t.name in op.inputs for op in self.ops)
                if used or t.role == "output":
                    raise GraphError(f"tensor {t.name!r} ({t.role}) is read but no "
                                     f"operator produces it")
            shape = t.shape
            c = t._nb
            if c is not None and c[0] is shape and c[1] is t.dtype:
                n = c[2]                                        # sized already
            elif shape is not None and all(type(d) is int for d in shape):
                n = math.prod(shape) * _itemsize(t.dtype)      # the common case
            elif t.is_symbolic:
                unbound = self.unbound_inputs()
                syms = [d for d in t.shape if isinstance(d, str)]
                raise GraphError(f"tensor {t.name!r} has unknown dimension(s) {syms} in "
                                 f"shape {list(t.shape)}; " + unbound_message(unbound),
                                 unbound_inputs=unbound)
            else:
                n = t.nbytes  # raises for missing sizes
            _check_size(t, n)
        self.ops = self._toposort(prod)
        return self

    def _toposort(self, prod):
        done = set()
        for op in self.ops:     # already in order (the common case): nothing to do
            for t in op.inputs:
                if t and t in prod and t not in done:
                    break
            else:
                done.update(op.outputs)
                continue
            break
        else:
            return self.ops
        index = {op.name: i for i, op in enumerate(self.ops)}
        deps = []
        for op in self.ops:
            d = {index[prod[t]] for t in op.inputs if t and t in prod}
            deps.append(d)
        if all(max(d, default=-1) < i for i, d in enumerate(deps)):
            return self.ops  # already in order: the common case
        users = [[] for _ in self.ops]
        indeg = [0] * len(self.ops)
        for i, d in enumerate(deps):
            for j in d:
                if j == i:
                    raise GraphError(f"operator {self.ops[i].name!r} reads its own output")
                users[j].append(i)
                indeg[i] += 1
        order, stuck = stable_toposort(users, indeg)
        if stuck:
            names = [self.ops[i].name for i in stuck]
            raise GraphError(f"the graph has a cycle through operator(s) {names[:5]}")
        return [self.ops[i] for i in order]


def stable_toposort(users, indeg):
    """Kahn's algorithm, always taking the lowest index that is ready, so an
    order that is already valid is kept.  ``users[i]``: the nodes that read
    node i; ``indeg[i]``: how many nodes node i reads (consumed).  Returns
    ``(order, stuck)``: ``stuck`` lists the nodes on or behind a cycle."""
    ready = [i for i, n in enumerate(indeg) if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        i = heapq.heappop(ready)
        order.append(i)
        for u in users[i]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    stuck = [i for i, n in enumerate(indeg) if n > 0] if len(order) != len(indeg) else []
    return order, stuck
