"""What the planner knows of each operator, told by the operators themselves.

Each operator's facts are declared once, on its kernel class
(:mod:`pyarena.runtime.kernels`).  The planning layer never imports the
runtime: registering a kernel pushes down the facts the planner reads,

* its in-place kind -- :data:`pyarena.planning.inplace.DECLARED_RULES`;
* its *row kind* -- how a patched stage runs it one band of rows at a time
  (:mod:`.patch`, :mod:`.geometry`): :data:`ROW_KINDS`;
* and, once, the *scratch rule*: the function that sizes every op's
  workspace within a scratch budget, and the default budget
  (:mod:`.fit` narrows scratch through it to fit a memory budget).

Nothing is loaded until a fact is first read: the package root names the
loader of the kernel registry once (:func:`add_source`), so
``from pyarena.planning import plan`` stays light.
"""
from ..errors import InvalidArgumentError

__all__ = ["ROW_KINDS", "SPATIAL_ROWS", "add_source", "load", "declare_rows",
           "declare_scratch", "rows_kind", "ops_with_rows", "scratch_rule"]

#: How a patched stage runs an op band by band:
#:
#: ``"local"``      element-wise on one stage tensor (other inputs constants):
#:                  output rows are the same input rows;
#: ``"broadcast"``  element-wise on several operands (stage tensors of the
#:                  output's shape, or constants broadcast along H);
#: ``"concat"``     joins stage tensors along another axis, row for row;
#: ``"conv"``, ``"pool"``  a window along H (stride, dilation, pads);
#: ``"pad"``        rows of padding above and below;
#: ``"slice"``      a one-row window of stride ``step``;
#: ``"transpose"``  the stage input's NCHW -> NHWC Transpose, row for row;
#: ``"resize"``     rows from source coordinates (:mod:`.resize_rows`).
ROW_KINDS = ("local", "broadcast", "concat", "conv", "pool", "pad", "slice", "transpose",
             "resize")
#: the kinds with a receptive field along H (a geometry of their own)
SPATIAL_ROWS = ("conv", "pool", "pad", "slice", "transpose", "resize")

_rows = {}          # op type -> row kind
_scratch = []       # [(size_scratch, default_budget)] once declared
_sources = []       # loaders still to run
_by_kinds = {}      # (kinds) -> frozenset of op types (reset on each declaration)


def add_source(load):
    """Have ``load()`` run (once) before the facts are first read: the
    package root uses it to load the kernel registry on demand."""
    _sources.append(load)


def load():
    """Run the loaders not run yet (every reader calls this first)."""
    while _sources:
        _sources.pop(0)()


def declare_rows(op_type, kind):
    """Record how a patched stage bands ``op_type`` (a kernel's ``rows``)."""
    if kind not in ROW_KINDS:
        raise InvalidArgumentError(f"row kind for {op_type!r} must be one of {ROW_KINDS}, "
                                   f"not {kind!r}")
    _rows[op_type] = kind
    _by_kinds.clear()


def declare_scratch(size_scratch, default_budget):
    """Record the scratch rule: ``size_scratch(graph, budget)`` sets every
    op's ``scratch_bytes`` from its kernel's rule within ``budget`` bytes
    per op; ``default_budget`` is the budget kernels get by default."""
    _scratch[:] = [(size_scratch, int(default_budget))]


def rows_kind(op_type):
    """The row kind of ``op_type``, or None (a patched stage cannot run it)."""
    if _sources:
        load()
    return _rows.get(op_type)


def ops_with_rows(*kinds):
    """The op types whose row kind is one of ``kinds`` (a frozenset)."""
    if _sources:
        load()
    got = _by_kinds.get(kinds)
    if got is None:
        got = _by_kinds[kinds] = frozenset(t for t, k in _rows.items() if k in kinds)
    return got


def scratch_rule():
    """``(size_scratch, default_budget)``, or None when no kernel registry
    declared one (planning used without the runtime)."""
    if _sources:
        load()
    return _scratch[0] if _scratch else None
