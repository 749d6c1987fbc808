"""An independent checker for memory plans.

Written apart from the planner (:mod:`pyarena.planning.planner`) on purpose (it shares no code with
the planner, only the rule table's data about which op types are views or
element-wise), so a planner bug cannot hide itself.  It checks:

* every offset is a multiple of the alignment and every padded buffer fits
  in ``arena_bytes``;
* buffers whose lifetimes overlap never overlap in bytes (a sweep over
  time keeping the live buffers ordered by offset: O(n log n) neighbour
  checks, not O(n^2) pairs);
* the reported lower bound is the peak of padded live bytes, and the
  arena is not below it; a plan made for a memory budget fits it;
* with a graph: every non-constant tensor that is used is in exactly one
  buffer, constants in none; each buffer is large enough and its lifetime
  covers every member's (recomputed here from the graph); each scratch
  buffer lives exactly during its op and holds nothing else;
* every pair of tensors sharing a buffer is legal: the newer one is
  written by an op that reads the buffer, as a pure view (an op type the
  rules call "alias"/"transpose", same byte size, data not moved) or as an
  element-wise overwrite ("unary"/"binary", same shape and dtype) after
  which no op reads any older member, none of which is a graph input,
  graph output or constant.

``validate(plan)`` returns a list of problem strings (empty = valid);
``validate(plan, raise_errors=True)`` raises :class:`PlanValidationError`.
"""
import bisect
import gc

from ..errors import PlanValidationError
from .inplace import as_rule_table

__all__ = ["validate", "PlanValidationError"]

_SCRATCH = "::scratch"


def _pad(n, a):
    return (n + a - 1) // a * a


def _geometry(bufs, align, arena, bound, problems):
    for b in bufs:
        if b.offset is None or b.offset < 0:
            problems.append(f"buffer {b.name!r} has no valid offset ({b.offset!r})")
            continue
        if b.size < 0:
            problems.append(f"buffer {b.name!r} has negative size {b.size}")
        if b.first > b.last or b.first < 0:
            problems.append(f"buffer {b.name!r} has lifetime [{b.first}, {b.last}]")
        if b.offset % align:
            problems.append(f"buffer {b.name!r} at offset {b.offset} is not aligned "
                            f"to {align}")
        if b.offset + _pad(b.size, align) > arena:
            problems.append(f"buffer {b.name!r} [{b.offset}, {b.offset + b.size}) "
                            f"ends beyond the arena of {arena} bytes")
    good = [b for b in bufs if b.offset is not None and b.offset >= 0
            and b.first <= b.last and b.size > 0]
    # Sweep: at each step drop the buffers that died, then add the ones born,
    # checking each newcomer against its neighbours in offset order.  As long
    # as the live set is disjoint, neighbours are the only candidates.  Events
    # and live keys are packed into single ints (fast to sort and bisect).
    n = len(good)
    off = [b.offset for b in good]
    end = [b.offset + _pad(b.size, align) for b in good]
    events = [((b.first * 2 + 1) * n + i) for i, b in enumerate(good)]
    events += [(((b.last + 1) * 2) * n + i) for i, b in enumerate(good)]
    gc_was = gc.isenabled()
    gc.disable()
    try:
        events.sort()
        starts = []   # sorted offset * n + index of the live buffers
        live = 0
        peak = 0
        reported = 0
        insort = bisect.bisect_left
        for ev in events:
            i = ev % n
            key = off[i] * n + i
            size = end[i] - off[i]
            j = insort(starts, key)
            if not (ev // n) & 1:          # a death
                del starts[j]
                live -= size
                continue
            for nb in (j - 1, j):
                if 0 <= nb < len(starts):
                    k = starts[nb] % n
                    if max(off[k], off[i]) < min(end[k], end[i]) and reported < 50:
                        reported += 1
                        o, b = good[k], good[i]
                        problems.append(
                            f"buffers {o.name!r} (ops {o.first}-{o.last}, bytes "
                            f"{o.offset}-{o.offset + o.size}) and {b.name!r} (ops "
                            f"{b.first}-{b.last}, bytes {b.offset}-{b.offset + b.size}) "
                            f"are live together and overlap in bytes")
            starts.insert(j, key)
            live += size
            if live > peak:
                peak = live
    finally:
        if gc_was:
            gc.enable()
    if arena < peak:
        problems.append(f"arena of {arena} bytes is below the {peak} bytes live at once")
    if bound is not None and bound != peak:
        problems.append(f"reported lower bound {bound} differs from the peak of live "
                        f"padded bytes {peak}")


def _graph_facts(graph):
    """Per tensor: producer op index (-1 for graph inputs), reader op
    indices, and the lifetime the rules give it."""
    n = len(graph.ops)
    producer = {}
    readers = {}
    for i, op in enumerate(graph.ops):
        for name in op.outputs:
            if name:
                producer[name] = i
        for name in op.inputs:
            if name:
                readers.setdefault(name, []).append(i)
    lifetime = {}
    for name, t in graph.tensors.items():
        if t.role == "constant":
            continue
        rd = readers.get(name, [])
        if t.role == "input":
            producer[name] = -1
            lifetime[name] = (0, max(rd) if rd else 0)
        elif name in producer:
            p = producer[name]
            if t.role == "output":
                lifetime[name] = (p, n - 1)
            else:
                lifetime[name] = (p, max(rd) if rd else p)
    return producer, readers, lifetime


def _layout_equal(a, b):
    if a.dtype != b.dtype:
        return False
    if a.shape is not None and b.shape is not None:
        return list(a.shape) == list(b.shape)
    return a.nbytes == b.nbytes


def _moves_data(shape, perm):
    if shape is None:
        return True
    if perm is None:
        perm = list(range(len(shape)))[::-1]
    perm = list(perm)
    if sorted(perm) != list(range(len(shape))):
        return True
    big = [p for p in perm if shape[p] > 1]
    return any(x > y for x, y in zip(big, big[1:]))


def _perm(op, graph):
    perm = op.attrs.get("perm")
    if perm is None and len(op.inputs) > 1 and op.inputs[1]:
        t = graph.tensors[op.inputs[1]]
        if t.data is None:
            return [-1]     # unknown: treated as moving data
        perm = [int(v) for v in t.data.ravel()] if hasattr(t.data, "ravel") \
            else [int(v) for v in t.data]
    return perm


def _check_sharing(b, graph, producer, readers, table, problems):
    tensors = graph.tensors
    members = sorted(b.tensors, key=lambda t: producer.get(t, -2))
    for m in members:
        if tensors[m].role == "constant":
            problems.append(f"constant {m!r} is planned in the work arena")
    for pos in range(1, len(members)):
        m = members[pos]
        p = producer.get(m)
        older = members[:pos]
        if p is None or p < 0:
            problems.append(f"buffer {b.name!r}: {m!r} shares memory with {older[0]!r} "
                            "but is not produced by an op")
            continue
        op = graph.ops[p]
        src = [k for k, name in enumerate(op.inputs) if name in older]
        if not src:
            problems.append(f"buffer {b.name!r}: op {op.name!r} writes {m!r} into the "
                            f"memory of {older[0]!r}, which it does not read")
            continue
        if op.outputs[0] != m:
            problems.append(f"buffer {b.name!r}: {m!r} is output "
                            f"{op.outputs.index(m)} of {op.name!r}; only output 0 may "
                            "reuse an input")
            continue
        kind = table.kind(op.op_type)
        out = tensors[m]
        if callable(kind):
            modes = {mode for k, mode in kind(op, graph) if k in src}
            if not modes:
                problems.append(f"buffer {b.name!r}: the custom rule of "
                                f"{op.op_type!r} allows no reuse for {op.name!r}")
                continue
            kind = "alias" if modes == {"alias"} else "unary"
        if kind in ("alias", "transpose"):
            s = tensors[op.inputs[0]]
            if op.inputs[0] not in older:
                problems.append(f"buffer {b.name!r}: view {m!r} of {op.name!r} is not a "
                                "view of its data input 0")
            elif s.nbytes != out.nbytes:
                problems.append(f"buffer {b.name!r}: view {m!r} has {out.nbytes} bytes, "
                                f"its source {s.name!r} {s.nbytes}")
            elif kind == "transpose" and _moves_data(s.shape, _perm(op, graph)):
                problems.append(f"buffer {b.name!r}: {op.name!r} transposes {s.name!r} "
                                f"with perm {op.attrs.get('perm')} which moves data; it "
                                "cannot be a view")
            continue
        if kind in ("unary", "binary") and len(op.outputs) != 1:
            problems.append(f"buffer {b.name!r}: {op.name!r} has {len(op.outputs)} "
                            f"outputs; it may not overwrite its input {older[-1]!r}")
            continue
        if kind not in ("unary", "binary"):
            problems.append(f"buffer {b.name!r}: op {op.name!r} of type "
                            f"{op.op_type!r} may not write in place (rule {kind!r})")
            continue
        usable = [k for k in src if (kind == "binary" or k == 0)
                  and _layout_equal(tensors[op.inputs[k]], out)]
        if not usable:
            problems.append(f"buffer {b.name!r}: {op.name!r} ({kind}) writes {m!r} over "
                            f"{[op.inputs[k] for k in src]} whose shape/dtype differ "
                            "from the output's (broadcast input or wrong operand)")
            continue
        for k in src:
            if not _layout_equal(tensors[op.inputs[k]], out):
                problems.append(f"buffer {b.name!r}: {op.name!r} also reads "
                                f"{op.inputs[k]!r}, a differently shaped view of the "
                                "memory it overwrites")
        for o in older:
            role = tensors[o].role
            if role in ("input", "output", "constant"):
                problems.append(f"illegal in-place: {op.name!r} overwrites {o!r}, a "
                                f"graph {role}")
            later = [r for r in readers.get(o, []) if r > p]
            if later:
                problems.append(f"illegal in-place: {op.name!r} (op {p}) overwrites "
                                f"{o!r}, which op {graph.ops[later[0]].name!r} (op "
                                f"{later[0]}) reads later")


def validate(plan, graph=None, rules=None, raise_errors=False):
    """Check ``plan`` (against ``graph``, default ``plan.graph``; in-place
    kinds from ``rules``, default the table the plan was made with).  Returns
    the list of problems; raises PlanValidationError instead when
    ``raise_errors`` is true and there are any."""
    problems = []
    align = plan.alignment
    if not isinstance(align, int) or align < 1 or align & (align - 1):
        problems.append(f"alignment {align!r} is not a power of two")
        align = 1
    bufs = list(plan.buffers)
    _geometry(bufs, align, plan.arena_bytes, plan.lower_bound_bytes, problems)
    budget = getattr(plan, "budget", None)
    if budget is not None and plan.arena_bytes > budget.get("memory_budget", 0):
        problems.append(f"arena of {plan.arena_bytes} bytes is over the memory budget of "
                        f"{budget.get('memory_budget')} bytes the plan says it fits")
    home = {}
    for b in bufs:
        if not b.tensors:
            problems.append(f"buffer {b.name!r} holds no tensor")
        for t in b.tensors:
            if t in home:
                problems.append(f"tensor {t!r} is in buffers {home[t].name!r} and "
                                f"{b.name!r}")
            home[t] = b
            if plan.offsets.get(t) != b.offset:
                problems.append(f"offsets[{t!r}] = {plan.offsets.get(t)!r} but its "
                                f"buffer is at {b.offset}")
    graph = graph if graph is not None else plan.graph
    if graph is not None:
        if rules is None:
            rules = getattr(plan, "rules", None)
        _check_graph(plan, graph, bufs, home, as_rule_table(rules), problems)
    if problems and raise_errors:
        raise PlanValidationError(problems)
    return problems


def _check_graph(plan, graph, bufs, home, table, problems):
    producer, readers, lifetime = _graph_facts(graph)
    ops = {op.name: (i, op) for i, op in enumerate(graph.ops)}
    for name, (first, last) in lifetime.items():
        b = home.get(name)
        if b is None:
            problems.append(f"tensor {name!r} ({graph.tensors[name].role}, live ops "
                            f"{first}-{last}) has no buffer")
            continue
        if b.first > first or b.last < last:
            problems.append(f"buffer {b.name!r} lives ops {b.first}-{b.last} but its "
                            f"member {name!r} lives {first}-{last}")
        if b.size < graph.tensors[name].nbytes:
            problems.append(f"buffer {b.name!r} has {b.size} bytes, member {name!r} "
                            f"needs {graph.tensors[name].nbytes}")
    for name, b in home.items():
        if name.endswith(_SCRATCH) and name not in graph.tensors:
            op_name = name[:-len(_SCRATCH)]
            if op_name not in ops:
                problems.append(f"scratch {name!r} names no operator")
                continue
            i, op = ops[op_name]
            if (b.first, b.last) != (i, i):
                problems.append(f"scratch of {op_name!r} (op {i}) lives ops "
                                f"{b.first}-{b.last}, not exactly its op")
            if len(b.tensors) != 1:
                problems.append(f"scratch of {op_name!r} shares its buffer with "
                                f"{[t for t in b.tensors if t != name]}")
            if b.size < op.scratch_bytes:
                problems.append(f"scratch of {op_name!r} has {b.size} bytes, needs "
                                f"{op.scratch_bytes}")
        elif name not in graph.tensors:
            problems.append(f"buffer {b.name!r} holds {name!r}, not a tensor of the graph")
        elif name not in lifetime:
            role = graph.tensors[name].role
            problems.append(f"{role} {name!r} is planned but needs no work memory")
    for i, op in enumerate(graph.ops):
        if op.scratch_bytes and op.name + _SCRATCH not in home:
            problems.append(f"op {op.name!r} needs {op.scratch_bytes} scratch bytes "
                            "but has no scratch buffer")
    for b in bufs:
        ts = [t for t in b.tensors if t in graph.tensors]
        if len(ts) > 1:
            _check_sharing(b, graph, producer, readers, table, problems)
