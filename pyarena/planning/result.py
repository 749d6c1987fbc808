"""The result of planning: :class:`Plan` and its :class:`Buffer` regions.

A plan is one arena and a fixed byte offset per buffer; a buffer holds one
tensor, a tensor and its in-place successors / views, or one op's scratch.
This module holds the plain data and what users do with it: reports
(``summary()``), JSON (``to_json`` / ``from_json``, format in
docs/planner.md), binding NumPy views into one block (``bind()``) and
drawing (``plot()``).  Plans are made by :mod:`pyarena.planning.planner`.
"""
import json
from dataclasses import dataclass, field

import numpy as np

from .._format import human_bytes
from ..errors import InvalidArgumentError
from ..memory import Arena
from .validate import validate

__all__ = ["Plan", "Buffer", "scratch_name", "padded_size", "SCRATCH_SUFFIX"]

SCRATCH_SUFFIX = "::scratch"


def scratch_name(op_name):
    """The virtual tensor name of an op's scratch buffer."""
    return op_name + SCRATCH_SUFFIX


@dataclass
class Buffer:
    """One region of the arena shared by ``tensors`` (a tensor and its
    in-place successors / views, a Concat output and the inputs written
    into its slices, or one op's scratch).  ``size`` is the byte extent of
    its members (unpadded); ``first``/``last`` the inclusive op range
    during which some member is live; ``at`` the byte offset inside the
    buffer of each member that does not start at its start (a Concat
    input in its slice)."""

    name: str
    size: int
    first: int
    last: int
    offset: int = None
    tensors: list = field(default_factory=list)
    at: dict = field(default_factory=dict)

    def to_dict(self):
        d = {"name": self.name, "size": int(self.size), "first": int(self.first),
             "last": int(self.last),
             "offset": None if self.offset is None else int(self.offset),
             "tensors": list(self.tensors)}
        if self.at:
            d["at"] = {t: int(v) for t, v in self.at.items()}
        return d


def padded_size(n, a):
    """``n`` rounded up to a multiple of ``a``."""
    return -(-n // a) * a


class Plan:
    """The result of :func:`plan` / :func:`plan_intervals`.

    Attributes: ``arena_bytes`` (the arena to allocate), ``lower_bound_bytes``
    (no plan of these buffers can use less), ``naive_bytes`` (every tensor
    in its own padded block), ``weights_bytes`` (constants, not planned),
    ``alignment``, ``strategy`` (requested), ``chosen_strategy`` (the
    heuristic whose answer was kept), ``optimal``, ``plan_seconds``,
    ``num_ops``, ``buffers``, ``offsets`` (each tensor's byte offset in
    the arena), ``buffer_of``, ``scratch``, ``reuses`` (``(op,
    from_tensor, to_tensor, "alias"|"inplace"|"concat")``; "concat": the
    input is written into its slice of the Concat's output),
    ``rules`` (the in-place rule table used), ``graph`` (None for
    interval plans), ``schedule`` (the op order applied, or None) and
    ``budget`` (None, or what ``plan(memory_budget=...)`` did: the
    ``memory_budget``, ``order_changed``, the ``scratch_budget`` chosen --
    None when the scratch was kept -- and every candidate ``tried``).
    """

    def __init__(self, buffers, *, arena_bytes, lower_bound_bytes, naive_bytes,
                 alignment, strategy, chosen_strategy=None, optimal=False,
                 plan_seconds=0.0, num_ops=0, weights_bytes=0, graph=None,
                 inplace=True, reuses=(), tensor_info=None, rules=None,
                 c_seconds=0.0, budget=None):
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
        self.schedule = None    # the Schedule applied (plan(schedule=True) / a budget)
        self.budget = budget    # what plan(memory_budget=...) did (None: no budget)
        # name -> (shape or None, dtype, nbytes): what bind() hands out
        self._info = tensor_info or {}
        self.buffer_of = {}
        self.offsets = {}
        self.scratch = {}
        for b in self.buffers:
            for t in b.tensors:
                self.buffer_of[t] = b
                self.offsets[t] = b.offset if b.offset is None else b.offset + b.at.get(t, 0)
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
        n_cat = sum(1 for r in self.reuses if r[3] == "concat")
        name = f" {self.graph.name!r}" if self.graph is not None else ""
        head = (f"plan{name}: {self.num_ops} ops, {len(self.buffers)} buffers "
                f"({len(self.scratch)} scratch)" if self.graph is not None else
                f"plan: {len(self.buffers)} intervals over {self.num_ops} op positions")
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
            lines.append(f"  sharing      {n_inpl} in-place, {n_alias} alias, {n_cat} "
                         "Concat inputs in place"
                         + ("" if self.inplace else " (in-place disabled)"))
        relaid = getattr(self.graph, "relaid", None)
        if relaid:
            lines.append(f"  layout       {layout_text(relaid)}")
        lines.append(f"  strategy     {self.strategy} (kept: {self.chosen_strategy}), "
                     f"{self.plan_seconds * 1e3:.1f} ms")
        if self.budget is not None:
            lines.append(budget_line(self.budget))
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
            **({} if self.budget is None else {"budget": self.budget}),
        }

    @classmethod
    def from_json(cls, d, graph=None):
        """Rebuild a Plan from :meth:`to_json` output.  With ``graph`` (needed
        for :meth:`bind` shapes) the plan is validated against it
        (:func:`~pyarena.planning.validate`): a plan from outside that breaks
        a rule raises PlanValidationError naming every problem.  A malformed
        document raises InvalidArgumentError."""
        if not isinstance(d, dict) or not isinstance(d.get("buffers"), list):
            raise InvalidArgumentError("a plan JSON needs a 'buffers' list")

        def num(v, what, kind=int):
            if isinstance(v, bool) or not isinstance(v, (int, float) if kind is float else int):
                raise InvalidArgumentError(f"plan JSON: {what} must be "
                                           f"{'a number' if kind is float else 'an integer'}, "
                                           f"not {v!r}")
            if kind is int and not 0 <= v < (1 << 63):
                raise InvalidArgumentError(f"plan JSON: {what} {v!r} is out of range "
                                           "[0, 2**63)")
            return kind(v)

        bufs = []
        for i, b in enumerate(d["buffers"]):
            if not isinstance(b, dict) or "name" not in b:
                raise InvalidArgumentError(f"plan JSON: buffer #{i} must be an object "
                                           f"with a name, not {b!r:.80}")
            where = f"buffer {b['name']!r}"
            tensors = b.get("tensors", [b["name"]])
            if not isinstance(tensors, list) or not all(isinstance(t, str) for t in tensors):
                raise InvalidArgumentError(f"plan JSON: {where}: 'tensors' must be a list "
                                           f"of names, not {tensors!r:.80}")
            at = b.get("at", {})
            if not isinstance(at, dict) or not all(isinstance(t, str) for t in at):
                raise InvalidArgumentError(f"plan JSON: {where}: 'at' must map tensor names "
                                           f"to byte offsets, not {at!r:.80}")
            try:
                bufs.append(Buffer(str(b["name"]), num(b["size"], f"{where} size"),
                                   num(b["first"], f"{where} first"),
                                   num(b["last"], f"{where} last"),
                                   None if b.get("offset") is None
                                   else num(b["offset"], f"{where} offset"), list(tensors),
                                   {t: num(v, f"{where} at[{t!r}]") for t, v in at.items()}))
            except KeyError as exc:
                raise InvalidArgumentError(f"plan JSON: {where} has no {exc}") from None
        info = tensor_info(graph) if graph is not None else {}
        for b in bufs:
            for t in b.tensors:
                if t.endswith(SCRATCH_SUFFIX) and t not in info:
                    info[t] = (None, "uint8", b.size, True)
        if "arena_bytes" not in d:
            raise InvalidArgumentError("plan JSON: no 'arena_bytes'")
        reuses = d.get("reuses", [])
        try:
            reuses = [(r["op"], r["from"], r["to"], r["mode"]) for r in reuses]
        except (KeyError, TypeError):
            raise InvalidArgumentError("plan JSON: 'reuses' must be a list of objects "
                                       "with op, from, to and mode") from None
        plan = cls(bufs, arena_bytes=num(d["arena_bytes"], "arena_bytes"),
                   lower_bound_bytes=num(d.get("lower_bound_bytes", 0), "lower_bound_bytes"),
                   naive_bytes=num(d.get("naive_bytes", 0), "naive_bytes"),
                   weights_bytes=num(d.get("weights_bytes", 0), "weights_bytes"),
                   alignment=num(d.get("alignment", 1), "alignment"),
                   strategy=d.get("strategy"),
                   chosen_strategy=d.get("chosen_strategy"),
                   optimal=bool(d.get("optimal", False)),
                   plan_seconds=num(d.get("plan_seconds", 0.0), "plan_seconds", float),
                   num_ops=num(d.get("num_ops", 0), "num_ops"), graph=graph,
                   inplace=bool(d.get("inplace", True)), reuses=reuses,
                   tensor_info=info, budget=_budget_from_json(d.get("budget")))
        if graph is not None:
            validate(plan, graph, raise_errors=True)
        return plan

    def save_json(self, path):
        with open(path, "w") as f:
            json.dump(self.to_json(), f, indent=1)

    def plot(self, path, **kwargs):
        """Draw the plan (op index vs. offset) to a PNG or SVG file; needs
        matplotlib (``pip install pyarena[plot]``)."""
        from .plot import plot_plan   # matplotlib only when drawing
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
        tensors whose lifetimes overlap never share bytes, except a
        Concat's output and the inputs written into its slices.
        InvalidArgumentError if the buffer is too small or read-only.
        """
        raw = self._raw_block(buffer_or_arena_or_pool)
        views = {}
        dtypes = {}
        for b in self.buffers:
            for t in b.tensors:
                shape, dtype, nbytes, _ = self._info.get(t, (None, "uint8", b.size, False))
                start = b.offset + b.at.get(t, 0)
                if shape is None:
                    views[t] = raw[start:start + nbytes]
                    continue
                dt = dtypes.get(dtype)
                if dt is None:
                    dt = dtypes[dtype] = np.dtype(dtype)
                # the tensor's view of its bytes, made at once (a view of raw)
                views[t] = np.ndarray(shape, dt, raw, start)
        return views

    def _raw_block(self, target):
        need = self.arena_bytes
        align = max(self.alignment, 1)
        if target is None:
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


def budget_line(budget):
    """The summary line of ``Plan.budget``."""
    return f"  budget       {budget_text(budget)}"


def layout_text(relaid):
    """What the NHWC pass converted (``graph.relaid``), in one line."""
    return (f"NHWC: {relaid['ops']} ops in {relaid['regions']} region(s) converted from "
            f"NCHW, {relaid['transposes']} Transposes at their edges")


def budget_text(budget):
    """``Plan.budget`` in words: the budget, what it holds (arena + the
    kernels' state), the order and scratch chosen."""
    scratch = budget.get("scratch_budget")
    split = "" if "total_bytes" not in budget else (
        f" holds {budget['total_bytes']:,} B = arena {budget['arena_bytes']:,} B + kernel "
        f"state {budget['kernel_state_bytes']:,} B;")
    return (f"{budget['memory_budget']:,} B:{split} fits with the "
            f"{'scheduled' if budget.get('order_changed') else 'given'} order, scratch "
            + ("as given" if scratch is None else f"budget {scratch:,} B per op")
            + "".join(_patch_text(r) for r in _records(budget))
            + f" ({_plans(len(budget.get('tried', [])))} tried)")


def _records(budget):
    """The patch records of ``Plan.budget``: every stage patched (plans
    written before more than one stage could be patched have only
    ``patch``)."""
    if budget.get("patches") is not None:
        return budget["patches"]
    return [budget["patch"]] if budget.get("patch") else []


def _patch_text(patch):
    """``Plan.budget["patch"]`` in words ('' when no stage was patched)."""
    if not patch:
        return ""
    return (f", stage {patch['input']} -> {patch['output']} ({len(patch['ops'])} ops) "
            f"in {patch['grid'][0]} x {patch['grid'][1]} patches, "
            + ("rows shared by two bands kept (row reuse)" if patch.get("reuse") else
               f"+{patch['recompute_macs']:,} MACs recomputed"))


def _plans(n):
    return f"{n} plan" + ("" if n == 1 else "s")


def _budget_from_json(b):
    if b is None:
        return None
    keys = ("memory_budget", "order_changed", "scratch_budget", "tried")
    if not isinstance(b, dict) or any(k not in b for k in keys) \
            or not isinstance(b["tried"], list) \
            or not all(isinstance(t, dict) for t in b["tried"]):
        raise InvalidArgumentError(f"plan JSON: 'budget' must be an object with "
                                   f"{', '.join(keys)} ('tried' a list), not {b!r:.80}")
    if isinstance(b["memory_budget"], bool) or not isinstance(b["memory_budget"], int):
        raise InvalidArgumentError(f"plan JSON: budget memory_budget must be an integer, "
                                   f"not {b['memory_budget']!r}")
    patch, patches = b.get("patch"), b.get("patches", [])
    if patch is not None and not isinstance(patch, dict):
        raise InvalidArgumentError(f"plan JSON: budget patch must be an object or null, "
                                   f"not {patch!r:.80}")
    if not isinstance(patches, list) or not all(isinstance(r, dict) for r in patches):
        raise InvalidArgumentError(f"plan JSON: budget patches must be a list of objects, "
                                   f"not {patches!r:.80}")
    out = {"memory_budget": b["memory_budget"], "order_changed": bool(b["order_changed"]),
           "scratch_budget": b["scratch_budget"], "tried": [dict(t) for t in b["tried"]]}
    if "fixed_order_bound_bytes" in b:       # absent from plans made before patching
        out["fixed_order_bound_bytes"] = b["fixed_order_bound_bytes"]
        out["patch"] = None if patch is None else dict(patch)
        out["patches"] = [dict(r) for r in patches] if "patches" in b else (
            [] if patch is None else [dict(patch)])
    for k in ("arena_bytes", "kernel_state_bytes", "total_bytes"):   # the split
        if k in b:
            out[k] = _nonneg_int(b[k], f"budget {k}")
    return out


def _nonneg_int(v, what):
    if isinstance(v, bool) or not isinstance(v, int) or v < 0:
        raise InvalidArgumentError(f"plan JSON: {what} must be a non-negative integer, "
                                   f"not {v!r:.40}")
    return v


def tensor_info(graph, nbytes=None):
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
