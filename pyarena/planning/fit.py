"""A memory budget as the interface: the fastest plan whose arena fits.

``plan(graph, memory_budget=B)`` returns the fastest plan whose work arena
(``arena_bytes``) is at most ``B`` bytes.  The knobs that trade speed for
memory are tried from the fastest candidate to the smallest, and the first
that fits wins:

1. the given op order with the graph's scratch sizes (the plan made
   without a budget);
2. the memory-minimising op order (:mod:`.schedule`), same scratch;
3. smaller operator scratch: the per-op workspace budget halved from the
   graph's (``graph.scratch_budget``, by default the kernels'
   ``SCRATCH_BUDGET``) down to 1 byte -- narrower im2col / pooling bands,
   more and slower steps -- each with the given order, then the
   scheduled one.  A halving that leaves every op's scratch as it was is
   not planned again (its plan would be the same).
4. patch-based execution of a leading stage (:mod:`.patch`): the stage's
   ops run one band of output rows at a time, so its intermediate
   tensors exist one band at a time.  Candidates (stage, number of bands,
   row reuse or recompute) are tried in order of fewest bands, then of
   least recompute (multiply-accumulates computed twice at band edges;
   none with row reuse, where a band keeps the rows it shares with the
   next), with the graph's scratch; a stage whose finest banding does not
   fit (either way) is not tried further that way.
5. more than one patched stage, wherever the plan peaks
   (:mod:`.patch_search`): a decoder's upsampling chain, a later block.

Each candidate is planned as usual (:func:`~.single.plan_once`, with the
caller's :class:`~.options.PlanOptions`); one whose arena is over ``B`` while
its lower bound is not is planned again with ``capacity=B``, so the
planner's search aims at the target.  When none fits,
:class:`~pyarena.errors.PlanInfeasibleError` names the smallest arena any
candidate reached (``exc.smallest_bytes``) and the graph is left as it was.
When one fits, the graph is left as its plan needs it: ops in the plan's
order, scratch sizes and ``graph.scratch_budget`` from the chosen budget
(the executor builds its kernels with the same budget).
``plan.budget`` records what was done.

Layering: scratch sizes come from the kernels (the runtime layer, above
this one), so the scratch knob is a callable ``rescratch(graph,
scratch_budget)`` that refills ``Op.scratch_bytes`` and records the
budget.  The kernel registry declares the runtime's ``set_scratch`` (with
``SCRATCH_BUDGET``) as the default (:func:`.op_facts.scratch_rule`);
``plan(..., rescratch=False)`` searches the order only.  A graph whose
ops the runtime cannot size (custom op types in a JSON graph) keeps its
scratch; the error then says so.
"""
import ctypes
import gc
import time

from ..errors import GraphError, PlanInfeasibleError
from ..graph import Graph
from . import fit_child, op_facts
from .options import check_memory_budget
from .patch import band_rows, patch_op, splice, stage_macs, stages
from .patch_search import multi_stage
from .schedule import schedule as find_schedule
from .single import plan_once

__all__ = ["fit_plan", "check_memory_budget"]

#: seconds of offset search per plan while more than one stage is chosen
#: (the plan kept is made again with the caller's limit): a set of stages
#: whose heuristics miss its lower bound would otherwise search for up to
#: ``time_limit`` each -- 10 s and 20 s of pose landmark's 43 s search
QUICK_LIMIT = 0.25

def _default_knob():
    return op_facts.scratch_rule() or (None, None)


class _Saved:
    """The graph's order and scratch as given, to restore on failure."""

    def __init__(self, graph):
        self.graph = graph
        self.ops = list(graph.ops)
        self.scratch = [op.scratch_bytes for op in graph.ops]
        self.budget = graph.scratch_budget
        self.tensors = dict(graph.tensors)

    def restore(self):
        self.graph.ops = list(self.ops)
        self.graph.tensors = dict(self.tensors)
        for op, n in zip(self.ops, self.scratch):
            op.scratch_bytes = n
        self.graph.scratch_budget = self.budget


def _scratch_levels(graph, base):
    """The scratch budgets to try after the graph's own: halvings to 1."""
    b = graph.scratch_budget if graph.scratch_budget is not None else base
    out = []
    while b > 1:
        b //= 2
        out.append(b)
    return out


def fit_plan(graph, options, weights=None):
    """The first candidate plan (see the module docstring) whose arena is
    at most ``options.memory_budget`` (a :class:`~.options.PlanOptions`;
    the graph validated and its budget checked by the caller).  Each
    candidate is planned as the graph then stands by
    :func:`~.single.plan_once` with ``options`` (``weights``: the bytes of
    the graph's constants, if summed).  ``options.schedule`` tries the
    scheduled order only; ``options.patch=False`` never patches a stage.
    Sets ``plan.budget`` and ``plan.schedule``; raises PlanInfeasibleError
    (graph restored) when nothing fits."""
    t0 = time.perf_counter()
    budget = options.memory_budget
    knob, base = _knob(options.rescratch)
    saved = _Saved(graph)
    search = _Search(graph, saved, options, weights)
    try:
        _size_state(graph, saved)
        found = _search_once(search, knob, base, options.patch)
    except BaseException:
        saved.restore()
        raise
    if found is None:
        saved.restore()
        raise search.infeasible()
    p, sched, scratch = found
    p.schedule = sched
    state = p.kernel_state_bytes
    p.budget = {"memory_budget": budget, "order_changed": sched is not None and
                sched.reordered, "scratch_budget": scratch, "tried": search.tried,
                "fixed_order_bound_bytes": search.tried[0]["lower_bound_bytes"],
                "patch": search.patches[0] if search.patches else None,
                "patches": search.patches, "arena_bytes": p.arena_bytes,
                "kernel_state_bytes": state, "total_bytes": p.arena_bytes + state}
    _give_back()
    p.plan_seconds = time.perf_counter() - t0
    return p


def _search(search, knob, base, patch):
    """The candidates in order (see the module docstring): the first
    that fits, as (plan, schedule, scratch budget), or None."""
    found = search.run(knob, base)
    if found is None and patch and knob is not None:
        found = search.patched(knob)
    if found is None and patch and knob is not None:
        found = search.multi(knob)
    return found


def _search_once(search, knob, base, patch):
    """:func:`_search` in a forked child where one can run
    (:mod:`.fit_child`: its transient heap stays out of this process),
    the child's choice planned again here; else here."""
    def run():
        found = _search(search, knob, base, patch)
        if found is None:
            return {"found": False, "tried": search.tried, "note": search.note}
        return dict(fit_child.choice_of(search, found), found=True)
    answer = fit_child.search_in_child(run)
    if answer is not None and not answer["found"]:
        search.tried, search.note = answer["tried"], answer["note"]
        return None
    if answer is not None:
        found = fit_child.replay(search, knob, answer)
        if found is not None:
            return found
        search.tried = []
    search.saved.restore()
    return _search(search, knob, base, patch)


def _give_back():
    """Return the heap the search freed to the system: its candidates
    and sized kernels are gone, but the pages they used stay resident
    until trimmed -- on a budget set because memory is short, a search
    that leaves them would cost more than the arena it saved.  (glibc's
    ``malloc_trim``; elsewhere the collector only.)"""
    gc.collect()
    trim = _malloc_trim()
    if trim is not None:
        trim(0)


def _malloc_trim():
    global _TRIM
    if _TRIM is False:
        try:
            _TRIM = ctypes.CDLL(None).malloc_trim      # the process's own libc
        except (OSError, AttributeError, TypeError):
            _TRIM = None
    return _TRIM


_TRIM = False       # libc's malloc_trim, looked up on first use (None: none)


def kernel_state(graph):
    """Bytes the kernels of ``graph`` lay out beyond its constants, as
    their scratch sizing recorded it (``op.notes.state_bytes``; an op not
    sized counts 0): what a memory budget counts besides the arena."""
    return sum(op.notes.state_bytes or 0 for op in graph.ops)


def _size_state(graph, saved):
    """Record each op's kernel state by sizing the graph once by the
    kernels' rules with its own scratch budget (what an earlier sizing
    recorded may be of other shapes: a retargeted graph's); the scratch
    sizes stay as given (a graph of op types the runtime cannot size
    counts no state, and so does one without the runtime's rules)."""
    knob = _default_knob()[0]
    if knob is None:
        return
    try:
        knob(graph, graph.scratch_budget)
    except GraphError:
        pass
    for op, n in zip(saved.ops, saved.scratch):
        op.scratch_bytes = n
    graph.scratch_budget = saved.budget


def _knob(rescratch):
    """(scratch knob, default scratch budget) for ``rescratch`` as
    PlanOptions checked it."""
    if rescratch is False:
        return None, None
    default, base = _default_knob()
    if rescratch is None:
        return default, base
    return rescratch, base


class _Search:
    """The candidates in order, each recorded in ``tried``; the graph is
    changed in place (``_Saved`` puts it back)."""

    def __init__(self, graph, saved, options, weights=None):
        self.graph, self.saved, self.budget = graph, saved, options.memory_budget
        # what each candidate is planned with: the caller's options, no budget
        self.options = options.replace(memory_budget=None)
        self.weights = weights
        self.orders = ("scheduled",) if options.schedule else ("given", "scheduled")
        self.alignment = options.alignment
        time_limit = options.time_limit
        # the scheduler's share, as plan(schedule=True) gives it
        self.time_limit = 5.0 if time_limit is None else min(time_limit, 5.0)
        self.limit = time_limit
        self.tried = []
        self.note = ""
        self.patches = []     # the records of the stages patched (patch_graph)
        self.chosen = []      # ...the (stage, bands, reuse) they were made of
        self.made = {}        # (stage, bands, reuse) -> (patched op, sized; record)
        self.quick = None     # the offset search's time limit while screening stage sets

    def run(self, knob, base):
        found = self.level(None)
        if found is not None:
            return found
        if knob is None:
            self.note = "; the operator scratch was kept as given"
            return None
        if base is None and self.graph.scratch_budget is None:
            self.note = "; no default scratch budget to halve"
            return None
        last = [op.scratch_bytes for op in self.graph.ops]
        for level in _scratch_levels(self.graph, base):
            self.graph.ops = list(self.saved.ops)
            try:
                knob(self.graph, level)
            except GraphError as exc:    # op types the runtime cannot size
                self.saved.restore()
                why = str(exc) if len(str(exc)) <= 160 else str(exc)[:157] + "..."
                self.note = f"; the operator scratch cannot be narrowed ({why})"
                return None
            sizes = [op.scratch_bytes for op in self.graph.ops]
            if sizes == last:            # the same plan as the level before
                continue
            last = sizes
            found = self.level(level)
            if found is not None:
                return found
        return None

    def level(self, scratch):
        """Try each order at the current scratch; (plan, schedule, scratch)
        for the first that fits, else None."""
        for order in self.orders:
            self.graph.ops = list(self.saved.ops)
            sched = None
            if order == "scheduled":
                sched = find_schedule(self.graph, self.alignment, time_limit=self.time_limit)
                if not sched.reordered and "given" in self.orders:
                    continue             # the given order again: planned already
                self.graph.ops = [self.saved.ops[i] for i in sched.order]
            p = self.attempt()
            self.tried.append(self.entry({"order": order, "scratch_budget": scratch}, p))
            if self.fits(p):
                return p, sched, scratch
        return None

    def patched(self, knob, max_stages=24):
        """Attempt 4: the patched candidates, fewest bands first (each band
        runs every op of the stage once: thin bands are slow), then least
        recompute (row reuse: none); (plan, None, scratch budget) for the
        first that fits, else None."""
        self.saved.restore()
        level = self.saved.budget
        found = stages(self.graph)[:max_stages]
        cands = []
        for st in found:
            for reuse in (True, False):
                self.saved.restore()
                mine = []
                for n in sorted({-(-st.rows // r) for r in range(1, st.rows)}):
                    whole, banded = stage_macs(self.graph, st, band_rows(st.rows, n), reuse)
                    mine.append((banded - whole, n, st, reuse))
                finest = self.patch_attempt(knob, level, st, st.rows, reuse)[0]
                if self.fits(finest):
                    cands += mine
        cands.sort(key=lambda c: (c[1], c[0], c[2].last - c[2].first, not c[3]))
        for extra, n, st, reuse in cands:
            p, record = self.patch_attempt(knob, level, st, n, reuse)
            if self.fits(p):
                self.patches = [record]
                self.chosen = [(st, n, reuse)]
                return p, None, level
        if not found:
            self.note += "; no stage of the graph can run in row bands"
        return None

    def patch_attempt(self, knob, level, st, n, reuse=True):
        """Plan with ``st`` patched into ``n`` row bands (recorded in
        ``tried``); (plan, patch record)."""
        p, records = self.set_attempt(knob, level, [(st, n, reuse)])
        return p, records[0]

    def multi(self, knob):
        """Attempt 5: more than one patched stage (:mod:`.patch_search`)."""
        self.quick = QUICK_LIMIT if self.limit is None else min(self.limit, QUICK_LIMIT)
        try:
            found = multi_stage(self, knob, self.saved.budget)
        finally:
            self.quick = None
        if found is None:
            return None
        p, records = self.set_attempt(knob, self.saved.budget, found)   # the full search
        if not self.fits(p):     # no worse than the quick one: kept as a guard
            return None
        self.patches = records
        self.chosen = list(found)
        return p, None, self.saved.budget

    def set_attempt(self, knob, level, chosen):
        """Plan with each ``(stage, bands, reuse)`` of ``chosen`` (disjoint
        stages of the graph as given) patched, recorded in ``tried``;
        (plan, the patch records in graph order)."""
        self.saved.restore()
        records = []
        for st, n, reuse in sorted(chosen, key=lambda c: -c[0].first):
            key = (st.first, st.last, st.hoisted, n, bool(reuse), level)
            op, record = patch_op(self.graph, st, n, reuse)
            if key not in self.made:      # sized once per search (the op made again:
                self.size_patched(knob, level, op)      # kept, hundreds hold megabytes)
                self.made[key] = op.scratch_bytes, op.notes.state_bytes
            op.scratch_bytes, op.notes.state_bytes = self.made[key]
            splice(self.graph, st, op)
            records.insert(0, record)
        p = self.attempt()
        entry = {"order": "given", "scratch_budget": level}
        marks = [{"op": r["op"], "grid": r["grid"], "reuse": r["reuse"]} for r in records]
        if marks:
            entry["patch"] = marks[0]
        if len(marks) > 1:
            entry["patches"] = marks
        if marks:                       # without: the given plan, tried first
            self.tried.append(self.entry(entry, p))
        return p, records

    def entry(self, what, p):
        """The record in ``tried`` of plan ``p`` of the graph as it stands."""
        state = p.kernel_state_bytes
        return dict(what, arena_bytes=p.arena_bytes, lower_bound_bytes=p.lower_bound_bytes,
                    kernel_state_bytes=state, total_bytes=p.arena_bytes + state)

    def fits(self, p):
        """Plan ``p`` meets the budget: its arena and the state its
        kernels lay out (``p.kernel_state_bytes``, set when planned)
        together."""
        return p.arena_bytes + p.kernel_state_bytes <= self.budget

    def size_patched(self, knob, level, op):
        """The patched op's scratch from ``knob``, given a graph of that op
        alone (every other op keeps the scratch it had)."""
        g = self.graph
        one = Graph(g.name)
        one.tensors = {n: g.tensors[n] for n in op.inputs + op.outputs if n}
        one.ops = [op]
        one.native = getattr(g, "native", True)
        one.scratch_budget = g.scratch_budget
        knob(one, level)

    def plan_now(self, capacity):
        """The graph as it stands planned at ``capacity``, with the quick
        time limit while screening."""
        options = self.options.replace(capacity=capacity)
        if self.quick is not None:
            options = options.replace(time_limit=self.quick)
        p = plan_once(self.graph, options, self.weights)
        p.kernel_state_bytes = kernel_state(self.graph)
        return p

    def attempt(self):
        p = self.plan_now(None)
        room = self.budget - kernel_state(self.graph)     # what the arena may take
        if 0 < room and p.lower_bound_bytes <= room < p.arena_bytes:
            try:
                return self.plan_now(room)
            except PlanInfeasibleError:
                pass
        return p

    def infeasible(self):
        best = min(self.tried, key=lambda t: t["total_bytes"])
        scratch = ("scratch as given" if best["scratch_budget"] is None
                   else f"scratch budget {best['scratch_budget']:,} bytes")
        for mark in best.get("patches", [best["patch"]] if "patch" in best else []):
            scratch += (f", {mark['op']} in {mark['grid'][0]} x "
                        f"{mark['grid'][1]} patches")
        n = len(self.tried)
        return PlanInfeasibleError(
            f"no plan fits the memory budget of {self.budget:,} bytes: the smallest total "
            f"reached is {best['total_bytes']:,} bytes (arena {best['arena_bytes']:,} + "
            f"kernel state {best['kernel_state_bytes']:,}; {best['order']} order, {scratch}; "
            f"arena lower bound {best['lower_bound_bytes']:,} bytes; {n} plan"
            f"{'s' * (n != 1)} tried{self.note})", smallest_bytes=best["total_bytes"],
            limit=self.budget, tried=self.tried)
