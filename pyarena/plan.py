"""Static memory planning: one arena and fixed offsets for a whole graph.

``plan(graph)`` turns a :class:`pyarena.graph.Graph` into a :class:`Plan`:

1. Lifetimes (inclusive op indices).  An activation lives from the op that
   produces it to the last op that reads it; a graph input from op 0; a
   graph output to the last op; a tensor nobody reads only at its
   producer.  Constants belong to the weights arena and are not planned
   (their total is ``Plan.weights_bytes``).  An op's scratch
   (``Op.scratch_bytes``) is a virtual tensor ``"<op>::scratch"`` living
   exactly during its op.
2. Buffer sharing (``inplace=True``), op by op in execution order, using
   the rule table of :mod:`pyarena.inplace`: a pure view (Reshape, ...)
   joins its input's buffer; an element-wise op writes into an input's
   buffer only when no member of that buffer (the original or any view of
   it) is read by a later op and none is a graph input or output.  A
   buffer lives from its first member's birth to its last member's death.
3. Offsets from the C core (``pa_plan_assign``): aligned to the plan's
   granularity, sizes padded, and buffers live at the same time never
   overlap in bytes.

``plan_intervals`` plans bare intervals (e.g. a MiniMalloc CSV read by
:func:`load_intervals_csv`); :mod:`pyarena.validate` re-checks any plan
independently.
"""
import csv
import gc
import json
import os
import time
from dataclasses import dataclass, field

import numpy as np

from ._binding import check, ffi, lib
from .errors import InvalidArgumentError, PlanInfeasibleError
from .graph import Graph, GraphError
from .inplace import _same_layout, as_rule_table, reuse_candidates
from ._format import human_bytes

__all__ = ["plan", "plan_intervals", "Plan", "Buffer", "load_intervals_csv",
           "write_intervals_csv", "load_graph", "register_loader", "STRATEGIES",
           "scratch_name", "tensor_lifetimes"]

STRATEGIES = {
    "first-fit": lib.PA_PLAN_FIRST_FIT,
    "greedy-by-size": lib.PA_PLAN_GREEDY_BY_SIZE,
    "greedy-by-breadth": lib.PA_PLAN_GREEDY_BY_BREADTH,
    "best": lib.PA_PLAN_BEST,
    "exact": lib.PA_PLAN_EXACT,
}
_STRATEGY_NAMES = {v: k for k, v in STRATEGIES.items()}
_MAX_ALIGN = 1 << 30
SCRATCH_SUFFIX = "::scratch"

# The numpy twin of pa_plan_buffer_t (checked against cffi at import).
_CBUF_DTYPE = np.dtype([("size", "<u8"), ("first", "<i8"), ("last", "<i8"),
                        ("offset", "<u8")])
assert ffi.sizeof("pa_plan_buffer_t") == _CBUF_DTYPE.itemsize
assert [ffi.offsetof("pa_plan_buffer_t", f) for f in _CBUF_DTYPE.names] == \
    [_CBUF_DTYPE.fields[f][1] for f in _CBUF_DTYPE.names]


def scratch_name(op_name):
    """The virtual tensor name of an op's scratch buffer."""
    return op_name + SCRATCH_SUFFIX


@dataclass
class Buffer:
    """One region of the arena shared by ``tensors`` (a tensor and its
    in-place successors / views, or one op's scratch).  ``size`` is the
    largest member's byte size (unpadded); ``first``/``last`` the
    inclusive op range during which some member is live."""

    name: str
    size: int
    first: int
    last: int
    offset: int = None
    tensors: list = field(default_factory=list)

    def to_dict(self):
        return {"name": self.name, "size": int(self.size), "first": int(self.first),
                "last": int(self.last),
                "offset": None if self.offset is None else int(self.offset),
                "tensors": list(self.tensors)}


def _padded(n, a):
    return -(-n // a) * a


class Plan:
    """The result of :func:`plan` / :func:`plan_intervals`.

    Attributes: ``arena_bytes`` (the arena to allocate), ``lower_bound_bytes``
    (no plan of these buffers can use less), ``naive_bytes`` (every tensor
    in its own padded block), ``weights_bytes`` (constants, not planned),
    ``alignment``, ``strategy`` (requested), ``chosen_strategy`` (the
    heuristic whose answer was kept), ``optimal``, ``plan_seconds``,
    ``num_ops``, ``buffers``, ``offsets``, ``buffer_of``, ``scratch``,
    ``reuses`` (``(op, from_tensor, to_tensor, "alias"|"inplace")``),
    ``rules`` (the in-place rule table used) and ``graph`` (None for
    interval plans).
    """

    def __init__(self, buffers, *, arena_bytes, lower_bound_bytes, naive_bytes,
                 alignment, strategy, chosen_strategy=None, optimal=False,
                 plan_seconds=0.0, num_ops=0, weights_bytes=0, graph=None,
                 inplace=True, reuses=(), tensor_info=None, rules=None,
                 c_seconds=0.0):
        self.buffers = list(buffers)
        self.arena_bytes = int(arena_bytes)
        self.lower_bound_bytes = int(lower_bound_bytes)
        self.naive_bytes = int(naive_bytes)
        self.weights_bytes = int(weights_bytes)
        self.alignment = int(alignment)
        self.strategy = strategy
        self.chosen_strategy = chosen_strategy or strategy
        self.optimal = bool(optimal)
        self.plan_seconds = float(plan_seconds)
        self.c_seconds = float(c_seconds)   # of which in pa_plan_assign
        self.num_ops = int(num_ops)
        self.graph = graph
        self.inplace = bool(inplace)
        self.reuses = list(reuses)
        self.rules = rules      # the in-place RuleTable used (None: defaults)
        # name -> (shape or None, dtype, nbytes): what bind() hands out
        self._info = tensor_info or {}
        self.buffer_of = {}
        self.offsets = {}
        self.scratch = {}
        for b in self.buffers:
            for t in b.tensors:
                self.buffer_of[t] = b
                self.offsets[t] = b.offset
                info = self._info.get(t)
                if info is not None and info[3]:
                    self.scratch[t[:-len(SCRATCH_SUFFIX)]] = b

    # -- reports -------------------------------------------------------------
    @property
    def savings(self):
        """Fraction of the naive total saved (0 when nothing is planned)."""
        return 1.0 - self.arena_bytes / self.naive_bytes if self.naive_bytes else 0.0

    def summary(self):
        gap = (self.arena_bytes / self.lower_bound_bytes - 1.0
               if self.lower_bound_bytes else 0.0)
        n_alias = sum(1 for r in self.reuses if r[3] == "alias")
        n_inpl = sum(1 for r in self.reuses if r[3] == "inplace")
        name = f" {self.graph.name!r}" if self.graph is not None else ""
        head = (f"plan{name}: {self.num_ops} ops, {len(self.buffers)} buffers "
                f"({len(self.scratch)} scratch)" if self.graph is not None else
                f"plan: {len(self.buffers)} intervals over {self.num_ops} steps")
        lines = [
            f"{head}, alignment {self.alignment}",
            f"  arena        {self.arena_bytes:>14,} B  ({human_bytes(self.arena_bytes)})",
            f"  lower bound  {self.lower_bound_bytes:>14,} B  (arena is "
            f"{gap:+.2%} over; {'optimal' if self.optimal else 'not proven optimal'})",
            f"  naive sum    {self.naive_bytes:>14,} B  (planning saves "
            f"{self.savings:.1%})",
        ]
        if self.weights_bytes:
            lines.append(f"  weights      {self.weights_bytes:>14,} B  "
                         "(constants, not in the work arena)")
        if self.graph is not None:
            lines.append(f"  sharing      {n_inpl} in-place, {n_alias} alias"
                         + ("" if self.inplace else " (in-place disabled)"))
        lines.append(f"  strategy     {self.strategy} (kept: {self.chosen_strategy}), "
                     f"{self.plan_seconds * 1e3:.1f} ms")
        return "\n".join(lines)

    def __repr__(self):
        return (f"<Plan arena={self.arena_bytes:,} lower_bound="
                f"{self.lower_bound_bytes:,} buffers={len(self.buffers)} "
                f"strategy={self.strategy}>")

    def to_json(self):
        """A JSON-ready dict (see docs/planner.md for the format)."""
        return {
            "format": "pyarena-plan/1",
            "graph": self.graph.name if self.graph is not None else None,
            "arena_bytes": self.arena_bytes,
            "lower_bound_bytes": self.lower_bound_bytes,
            "naive_bytes": self.naive_bytes,
            "weights_bytes": self.weights_bytes,
            "alignment": self.alignment,
            "strategy": self.strategy,
            "chosen_strategy": self.chosen_strategy,
            "optimal": self.optimal,
            "plan_seconds": self.plan_seconds,
            "num_ops": self.num_ops,
            "inplace": self.inplace,
            "buffers": [b.to_dict() for b in self.buffers],
            "scratch": {op: b.name for op, b in self.scratch.items()},
            "offsets": {t: int(o) for t, o in self.offsets.items()},
            "reuses": [{"op": o, "from": a, "to": b_, "mode": m}
                       for o, a, b_, m in self.reuses],
        }

    @classmethod
    def from_json(cls, d, graph=None):
        """Rebuild a Plan from :meth:`to_json` output (``graph`` optional,
        needed for :meth:`bind` shapes and for validating against it)."""
        if not isinstance(d, dict) or "buffers" not in d:
            raise InvalidArgumentError("a plan JSON needs a 'buffers' list")
        try:
            bufs = [Buffer(str(b["name"]), int(b["size"]), int(b["first"]),
                           int(b["last"]), None if b.get("offset") is None
                           else int(b["offset"]), list(b.get("tensors", [b["name"]])))
                    for b in d["buffers"]]
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"bad buffer entry in plan JSON: {exc}") from None
        info = _tensor_info(graph) if graph is not None else {}
        for b in bufs:
            for t in b.tensors:
                if t.endswith(SCRATCH_SUFFIX) and t not in info:
                    info[t] = (None, "uint8", b.size, True)
        return cls(bufs, arena_bytes=d["arena_bytes"],
                   lower_bound_bytes=d.get("lower_bound_bytes", 0),
                   naive_bytes=d.get("naive_bytes", 0),
                   weights_bytes=d.get("weights_bytes", 0),
                   alignment=d.get("alignment", 1), strategy=d.get("strategy"),
                   chosen_strategy=d.get("chosen_strategy"),
                   optimal=d.get("optimal", False),
                   plan_seconds=d.get("plan_seconds", 0.0),
                   num_ops=d.get("num_ops", 0), graph=graph,
                   inplace=d.get("inplace", True),
                   reuses=[(r["op"], r["from"], r["to"], r["mode"])
                           for r in d.get("reuses", [])],
                   tensor_info=info)

    def save_json(self, path):
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)

    def plot(self, path, **kwargs):
        """Draw the plan (op index vs. offset) to a PNG or SVG file; needs
        matplotlib (``pip install pyarena[plot]``)."""
        from .plot import plot_plan
        return plot_plan(self, path, **kwargs)

    # -- binding -------------------------------------------------------------
    def bind(self, buffer_or_arena_or_pool=None):
        """NumPy views for every planned tensor (and scratch name) into one
        arena-sized block.

        ``None`` allocates the block from a new :class:`pyarena.Arena`; a
        writable buffer (NumPy array, bytearray, mmap) is used from its
        first address aligned to the plan's alignment; an object with an
        ``empty(shape, dtype, align=...)`` method (an ``Arena`` or a pool)
        is asked for the block.  Returns ``{name: ndarray}``; views of
        tensors whose lifetimes overlap never share bytes.
        InvalidArgumentError if the buffer is too small or read-only.
        """
        raw = self._raw_block(buffer_or_arena_or_pool)
        views = {}
        for b in self.buffers:
            for t in b.tensors:
                shape, dtype, nbytes, _ = self._info.get(t, (None, "uint8", b.size, False))
                region = raw[b.offset:b.offset + nbytes]
                if shape is None:
                    views[t] = region
                else:
                    views[t] = region.view(np.dtype(dtype)).reshape(shape)
        return views

    def _raw_block(self, target):
        need = self.arena_bytes
        align = max(self.alignment, 1)
        if target is None:
            from .arena import Arena
            arena = Arena(alignment=max(align, 64), chunk_size=max(need, 64))
            return arena.empty((need,), np.uint8)
        if hasattr(target, "empty") and not isinstance(target, np.ndarray):
            try:
                raw = target.empty((need,), np.uint8, align=align)
            except TypeError:       # no align keyword (a pool): over-allocate
                raw = target.empty((need + align - 1,), np.uint8).reshape(-1)
                shift = (-raw.ctypes.data) % align
                raw = raw[shift:shift + need]
            if raw.ctypes.data % align:
                raise InvalidArgumentError(
                    f"{type(target).__name__} returned a block aligned to less than "
                    f"the plan's {align} bytes")
            return raw
        try:
            mv = memoryview(target)
        except TypeError:
            raise TypeError(f"bind() needs None, a writable buffer, an Arena or a pool, "
                            f"not {type(target).__name__}") from None
        if mv.readonly:
            raise InvalidArgumentError("bind(): the buffer is read-only")
        if not mv.c_contiguous:
            raise InvalidArgumentError("bind(): the buffer is not contiguous")
        raw = np.frombuffer(target, dtype=np.uint8) if mv.ndim <= 1 and mv.itemsize == 1 \
            else np.asarray(target).reshape(-1).view(np.uint8)
        shift = (-raw.ctypes.data) % align
        if raw.size < shift + need:
            extra = f" (+{shift} to reach {align}-byte alignment)" if shift else ""
            raise InvalidArgumentError(
                f"bind(): buffer of {raw.size:,} bytes is too small for the plan's "
                f"arena of {need:,} bytes{extra}")
        return raw[shift:shift + need]




def _check_alignment(alignment):
    if isinstance(alignment, bool) or not isinstance(alignment, (int, np.integer)):
        raise InvalidArgumentError(f"alignment must be an integer, not {alignment!r}")
    a = int(alignment)
    if a < 1 or a > _MAX_ALIGN or a & (a - 1):
        raise InvalidArgumentError(
            f"alignment {alignment!r} is not a power of two in [1, {_MAX_ALIGN}]")
    return a


def _check_strategy(strategy):
    if strategy not in STRATEGIES:
        raise InvalidArgumentError(f"unknown strategy {strategy!r}; choose one of "
                                   f"{', '.join(STRATEGIES)}")
    return STRATEGIES[strategy]


def _tensor_info(graph, nbytes=None):
    """name -> (shape, dtype, nbytes, is_scratch) for everything planned."""
    info = {}
    for t in graph.tensors.values():
        if t.role != "constant":
            n = nbytes.get(t.name) if nbytes is not None else None
            info[t.name] = (tuple(int(d) for d in t.shape) if t.shape is not None
                            else None, t.dtype, t.nbytes if n is None else n, False)
    for op in graph.ops:
        if op.scratch_bytes:
            info[scratch_name(op.name)] = (None, "uint8", op.scratch_bytes, True)
    return info


def tensor_lifetimes(graph):
    """``{tensor: (first, last)}`` for every planned (non-constant) tensor
    of a validated graph, per the rules in the module docstring; tensors
    declared but neither produced nor read are left out."""
    n = len(graph.ops)
    end = max(n - 1, 0)
    prod = {}
    last_read = {}
    for i, op in enumerate(graph.ops):
        for t in op.inputs:
            if t:
                last_read[t] = i
        for t in op.outputs:
            prod[t] = i
    life = {}
    for t in graph.tensors.values():
        if t.role == "constant":
            continue
        if t.role == "input":
            life[t.name] = (0, max(last_read.get(t.name, 0), 0))
        elif t.name in prod:
            p = prod[t.name]
            last = end if t.role == "output" else max(last_read.get(t.name, p), p)
            life[t.name] = (p, last)
    return life


def plan(graph, strategy="best", alignment=64, inplace=True, time_limit=10.0,
         rules=None, capacity=None):
    """Plan the work arena of ``graph`` (validated, and reordered if needed,
    inside).  See the module docstring for the rules.  ``capacity`` (bytes)
    asks for a plan within that size (PlanInfeasibleError if none is found).
    Returns a :class:`Plan`."""
    t0 = time.perf_counter()
    if not isinstance(graph, Graph):
        raise TypeError(f"plan() needs a pyarena.graph.Graph, not {type(graph).__name__}")
    _check_strategy(strategy)
    alignment = _check_alignment(alignment)
    graph.validate()
    with _NoGC():
        return _plan(graph, strategy, alignment, inplace, time_limit, rules, capacity, t0)


def _plan(graph, strategy, alignment, inplace, time_limit, rules, capacity, t0):
    table = as_rule_table(rules) if inplace else None
    life = tensor_lifetimes(graph)
    tensors = graph.tensors
    nbytes = {name: tensors[name].nbytes for name in life}

    # Union of buffers, built op by op.  group: [members, first, last, size,
    # pinned (holds a graph input or output)]
    group_of = {}
    groups = []

    def new_group(name, first, last, size, pinned):
        g = [[name], first, last, size, pinned]
        group_of[name] = g
        groups.append(g)
        return g

    for op in graph.ops:
        if op.scratch_bytes and scratch_name(op.name) in tensors:
            raise GraphError(f"tensor {scratch_name(op.name)!r} clashes with the scratch "
                             f"buffer name of operator {op.name!r}")
    for t in graph.inputs:
        f, l = life[t]
        new_group(t, f, l, nbytes[t], True)
    reuses = []
    for i, op in enumerate(graph.ops):
        joined = None
        if table is not None and op.outputs:
            out = op.outputs[0]
            for k, mode in reuse_candidates(op, graph, table):
                src = op.inputs[k] if 0 <= k < len(op.inputs) else ""
                g = group_of.get(src)
                if g is None:       # constant or omitted input
                    continue
                if mode == "inplace":
                    if g[4] or g[2] > i:
                        continue    # pinned, or the original is read later
                    if _other_views_conflict(op, k, g, graph, group_of):
                        continue
                elif mode != "alias":
                    raise InvalidArgumentError(
                        f"in-place rule for {op.op_type!r} returned mode {mode!r}")
                f, l = life[out]
                g[0].append(out)
                g[2] = max(g[2], l)
                g[3] = max(g[3], nbytes[out])
                g[4] = g[4] or tensors[out].role == "output"
                group_of[out] = g
                reuses.append((op.name, src, out, mode))
                joined = out
                break
        for t in op.outputs:
            if t != joined and t in life:
                f, l = life[t]
                new_group(t, f, l, nbytes[t], tensors[t].role == "output")
        if op.scratch_bytes:
            new_group(scratch_name(op.name), i, i, op.scratch_bytes, False)

    buffers = [Buffer(g[0][0], g[3], g[1], g[2], None, list(g[0])) for g in groups]
    naive = sum(_padded(v, alignment) for v in nbytes.values()) + \
        sum(_padded(op.scratch_bytes, alignment) for op in graph.ops if op.scratch_bytes)
    res = _assign(buffers, strategy, alignment, time_limit, capacity)
    weights = sum(t.nbytes for t in tensors.values() if t.role == "constant")
    return Plan(buffers, arena_bytes=res["arena"], lower_bound_bytes=res["bound"],
                naive_bytes=naive, alignment=alignment, strategy=strategy,
                chosen_strategy=res["chosen"], optimal=res["optimal"],
                plan_seconds=time.perf_counter() - t0, num_ops=len(graph.ops),
                weights_bytes=weights, graph=graph, inplace=inplace, reuses=reuses,
                tensor_info=_tensor_info(graph, nbytes), rules=table,
                c_seconds=res["seconds"])


def _other_views_conflict(op, k, g, graph, group_of):
    """True if ``op`` also reads the group through another input whose
    layout differs from the output's: writing the output over input k
    would then clobber elements it has yet to read."""
    out = graph.tensors[op.outputs[0]]
    return any(j != k and group_of.get(name) is g
               and not _same_layout(graph.tensors[name], out)
               for j, name in enumerate(op.inputs))


def _assign(buffers, strategy, alignment, time_limit, capacity):
    """Run pa_plan_assign over ``buffers``; fills their offsets."""
    res = _assign_arrays([b.size for b in buffers], [b.first for b in buffers],
                         [b.last for b in buffers], strategy, alignment, time_limit,
                         capacity)
    for b, off in zip(buffers, res["offsets"].tolist()):
        b.offset = off
    return res


def _assign_arrays(sizes, firsts, lasts, strategy, alignment, time_limit, capacity):
    """pa_plan_assign over parallel size/first/last sequences; returns the
    result dict with an ``offsets`` array."""
    code = _check_strategy(strategy)
    n = len(sizes)
    if time_limit is None:
        time_limit = 10.0
    try:
        time_limit = float(time_limit)
    except (TypeError, ValueError):
        raise InvalidArgumentError(f"time_limit must be a number of seconds, "
                                   f"not {time_limit!r}") from None
    if not time_limit > 0:
        raise InvalidArgumentError(f"time_limit must be > 0 seconds, not {time_limit!r}")
    if capacity is not None and (isinstance(capacity, bool) or int(capacity) != capacity
                                 or capacity <= 0):
        raise InvalidArgumentError(f"capacity must be a positive number of bytes, "
                                   f"not {capacity!r}")
    if n == 0:
        return {"arena": 0, "bound": 0, "optimal": True, "chosen": strategy,
                "seconds": 0.0, "offsets": np.zeros(0, np.uint64)}
    arr = np.empty(n, _CBUF_DTYPE)
    arr["size"] = sizes
    arr["first"] = firsts
    arr["last"] = lasts
    arr["offset"] = 0
    cbufs = ffi.new("pa_plan_buffer_t[]", n)
    cview = ffi.buffer(cbufs)
    cview[:] = arr.tobytes()
    opt = ffi.new("pa_plan_options_t *")
    lib.pa_plan_options_default(opt)
    opt.strategy = code
    opt.alignment = alignment
    opt.time_limit = time_limit
    opt.capacity = int(capacity or 0)
    result = ffi.new("pa_plan_result_t *")
    status = lib.pa_plan_assign(cbufs, n, opt, result)
    if status in (lib.PA_ERR_INFEASIBLE, lib.PA_ERR_TIMEOUT):
        why = "no plan found within the time limit" if status == lib.PA_ERR_TIMEOUT \
            else "no plan fits"
        lb = int(lib.pa_plan_lower_bound(cbufs, n, alignment))
        best = int(result.arena_bytes)
        found = f", best plan found {best:,} bytes" if best > (capacity or 0) else ""
        raise PlanInfeasibleError(f"{why}: capacity {int(capacity or 0):,} bytes "
                                  f"(lower bound {lb:,} bytes{found}, strategy {strategy})")
    check(status, f"planning {n} buffers with strategy {strategy!r}")
    offsets = np.frombuffer(cview, _CBUF_DTYPE)["offset"].copy()
    chosen = _STRATEGY_NAMES.get(result.strategy, strategy)
    arena = int(result.arena_bytes)
    bound = int(result.lower_bound)
    return {"arena": arena, "bound": bound, "optimal": bool(result.optimal) or
            arena == bound, "chosen": chosen, "seconds": float(result.seconds),
            "offsets": offsets}


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
    _check_strategy(strategy)
    alignment = _check_alignment(alignment)
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
    res = _assign_arrays(nums[:, 0], nums[:, 1], nums[:, 2], strategy, alignment,
                         time_limit, capacity)
    offs = res["offsets"].tolist()
    bufs = [Buffer(name, size, first, last, off, list(r[4]) if r[4] else [name])
            for name, (size, first, last), off, r in zip(names, nums.tolist(), offs, rows)]
    padded_sizes = [_padded(v, alignment) for v in nums[:, 0].tolist()] \
        if n and int(nums[:, 0].max()) > (1 << 40) else \
        ((nums[:, 0] + alignment - 1) // alignment * alignment).tolist()
    return Plan(bufs, arena_bytes=res["arena"], lower_bound_bytes=res["bound"],
                naive_bytes=sum(padded_sizes), alignment=alignment, strategy=strategy,
                chosen_strategy=res["chosen"], optimal=res["optimal"],
                plan_seconds=time.perf_counter() - t0,
                num_ops=int(nums[:, 2].max()) + 1 if n else 0, graph=None,
                inplace=False, c_seconds=res["seconds"])


# -- files -------------------------------------------------------------------
def load_intervals_csv(path):
    """Read a MiniMalloc-style CSV (``id,lower,upper,size`` with ``upper``
    exclusive; an ``offset`` column is read if present) into a list of
    :class:`Buffer` with inclusive lifetimes ``[lower, upper - 1]``."""
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise InvalidArgumentError(f"{path}: empty CSV (expected a header "
                                   "id,lower,upper,size)")
    header = [h.strip().lower() for h in rows[0]]
    need = ("id", "lower", "upper", "size")
    missing = [h for h in need if h not in header]
    if missing:
        raise InvalidArgumentError(f"{path}: CSV header {rows[0]} lacks column(s) "
                                   f"{missing} (expected id,lower,upper,size)")
    col = {h: header.index(h) for h in header}
    out = []
    for lineno, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        try:
            vals = {h: row[col[h]].strip() for h in need}
            lower, upper, size = (int(vals["lower"]), int(vals["upper"]),
                                  int(vals["size"]))
            offset = None
            if "offset" in col and col["offset"] < len(row) and row[col["offset"]].strip():
                offset = int(row[col["offset"]])
        except (IndexError, ValueError):
            raise InvalidArgumentError(f"{path}:{lineno}: bad row {row!r} (need "
                                       "integers lower, upper, size)") from None
        if lower < 0 or size < 0 or upper <= lower:
            raise InvalidArgumentError(
                f"{path}:{lineno}: buffer {vals['id']!r} has lower={lower}, "
                f"upper={upper}, size={size} (need 0 <= lower < upper, size >= 0)")
        out.append(Buffer(vals["id"], size, lower, upper - 1, offset, [vals["id"]]))
    return out


def write_intervals_csv(p, path):
    """Write a plan's buffers as ``id,lower,upper,size,offset`` (upper
    exclusive), the MiniMalloc solution format."""
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "lower", "upper", "size", "offset"])
        for b in p.buffers:
            w.writerow([b.name, b.first, b.last + 1, b.size, b.offset])


_LOADERS = {}


def register_loader(ext, fn):
    """Make :func:`load_graph` read files ending in ``ext`` with
    ``fn(path, inputs) -> Graph`` (``inputs``: ``{name: shape}`` or None)."""
    _LOADERS[ext.lower()] = fn


def _load_json(path, inputs):
    g = Graph.load(path)
    if inputs:
        g.bind_inputs(inputs)
    return g


def _load_model(path, inputs):
    try:
        from .importers import load_model
    except ImportError as exc:
        raise InvalidArgumentError(
            f"{path}: reading {os.path.splitext(path)[1]} models needs the "
            f"pyarena.importers module, which is not available ({exc})") from None
    g = load_model(path, inputs=inputs or None)
    if not isinstance(g, Graph):
        raise InvalidArgumentError(f"{path}: the importer returned "
                                   f"{type(g).__name__}, not a Graph")
    return g


register_loader(".json", _load_json)
register_loader(".onnx", _load_model)
register_loader(".tflite", _load_model)


def load_graph(path, inputs=None):
    """A :class:`Graph` from a file, dispatched on its extension (.json;
    .onnx / .tflite through ``pyarena.importers.load_model``; more with
    :func:`register_loader`).  ``inputs`` binds graph-input shapes."""
    ext = os.path.splitext(str(path))[1].lower()
    fn = _LOADERS.get(ext)
    if fn is None:
        raise InvalidArgumentError(
            f"{path}: unknown graph file type {ext or '(none)'!r}; expected one of "
            f"{', '.join(sorted(_LOADERS))} (or .csv intervals for the CLI)")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: no such file")
    try:
        return fn(path, inputs)
    except GraphError:
        raise
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"{path}: not a text file ({exc.reason})") from None
