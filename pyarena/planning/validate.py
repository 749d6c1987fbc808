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
* every pair of tensors sharing bytes of a buffer (each member sits at
  its buffer's offset plus ``Buffer.at``) is legal: the newer one is
  written by an op that reads the older, as a pure view (an op type the
  rules call "alias"/"transpose", same byte size and offset, data not
  moved), as an element-wise overwrite ("unary"/"binary", same shape,
  dtype and offset) after which no op reads any older member it
  overlaps, none of which is a graph input, graph output or constant, or
  as a Concat output (rule "concat") whose slices are contiguous blocks
  and each older member it overlaps lies inside one slice whose input is
  placed exactly there.

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
    # Sweep: at each position drop the buffers that died, then add the ones born,
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
            lifetime[name] = (0, n - 1 if name in graph.held_inputs else max(rd) if rd else 0)
        elif name in producer:
            p = producer[name]
            if t.role == "output":
                lifetime[name] = (p, n - 1)
            else:
                lifetime[name] = (p, max(rd) if rd else p)
    return producer, readers, lifetime


def _same_dtype_and_shape(a, b):
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


def _span(b, graph, t):
    lo = b.at.get(t, 0)
    return lo, lo + graph.tensors[t].nbytes


def _check_sharing(b, graph, producer, readers, table, problems):
    """Each member that overlaps the bytes of older members of ``b`` must
    be a view of one, an element-wise overwrite of one, or a Concat
    output whose inputs sit in their slices."""
    tensors = graph.tensors
    members = sorted(b.tensors, key=lambda t: producer.get(t, -2))
    for m in members:
        if tensors[m].role == "constant":
            problems.append(f"constant {m!r} is planned in the work arena")
    for pos in range(1, len(members)):
        m = members[pos]
        lo, hi = _span(b, graph, m)
        older = [o for o in members[:pos] if lo < _span(b, graph, o)[1]
                 and _span(b, graph, o)[0] < hi]
        if not older:
            continue        # bytes of the buffer no older member uses
        p = producer.get(m)
        if p is None or p < 0:
            problems.append(f"buffer {b.name!r}: {m!r} shares memory with {older[0]!r} "
                            "but is not produced by an op")
            continue
        op = graph.ops[p]
        if table.kind(op.op_type) == "concat" and op.outputs[0] == m:
            _check_concat(b, m, op, older, graph, problems)
        else:
            _check_reuse(b, m, op, p, older, graph, readers, table, problems)


def _check_reuse(b, m, op, p, older, graph, readers, table, problems):
    """``m`` (written by op ``p``) over the overlapping ``older`` members:
    legal as a view or an element-wise overwrite of an input."""
    tensors = graph.tensors
    src = [k for k, name in enumerate(op.inputs) if name in older]
    if not src:
        problems.append(f"buffer {b.name!r}: op {op.name!r} writes {m!r} into the "
                        f"memory of {older[0]!r}, which it does not read")
        return
    if op.outputs[0] != m:
        problems.append(f"buffer {b.name!r}: {m!r} is output "
                        f"{op.outputs.index(m)} of {op.name!r}; only output 0 may "
                        "reuse an input")
        return
    kind = table.kind(op.op_type)
    out = tensors[m]
    at = b.at.get(m, 0)
    allowed = None      # a custom rule's inputs it may overwrite (any index)
    if callable(kind):
        pairs = kind(op, graph)
        modes = {mode for k, mode in pairs if k in src}
        allowed = {k for k, mode in pairs if mode == "inplace"}
        if not modes:
            problems.append(f"buffer {b.name!r}: the custom rule of "
                            f"{op.op_type!r} allows no reuse for {op.name!r}")
            return
        kind = "alias" if modes == {"alias"} else "unary"
    if kind in ("alias", "transpose"):
        s = tensors[op.inputs[0]]
        if op.inputs[0] not in older or b.at.get(s.name, 0) != at:
            problems.append(f"buffer {b.name!r}: view {m!r} of {op.name!r} is not a "
                            "view of its data input 0 (at its offset)")
        elif s.nbytes != out.nbytes:
            problems.append(f"buffer {b.name!r}: view {m!r} has {out.nbytes} bytes, "
                            f"its source {s.name!r} {s.nbytes}")
        elif kind == "transpose" and _moves_data(s.shape, _perm(op, graph)):
            problems.append(f"buffer {b.name!r}: {op.name!r} transposes {s.name!r} "
                            f"with perm {op.attrs.get('perm')} which moves data; it "
                            "cannot be a view")
        return
    if kind in ("unary", "binary") and len(op.outputs) != 1:
        problems.append(f"buffer {b.name!r}: {op.name!r} has {len(op.outputs)} "
                        f"outputs; it may not overwrite its input {older[-1]!r}")
        return
    if kind not in ("unary", "binary"):
        problems.append(f"buffer {b.name!r}: op {op.name!r} of type "
                        f"{op.op_type!r} may not write in place (rule {kind!r})")
        return

    def same(k):
        return _same_dtype_and_shape(tensors[op.inputs[k]], out) and \
            b.at.get(op.inputs[k], 0) == at
    usable = [k for k in src if (k in allowed if allowed is not None else
                                 kind == "binary" or k == 0) and same(k)]
    if not usable:
        problems.append(f"buffer {b.name!r}: {op.name!r} ({kind}) writes {m!r} over "
                        f"{[op.inputs[k] for k in src]} whose shape/dtype/offset differ "
                        "from the output's (broadcast input or wrong operand)")
        return
    for k in src:
        if not same(k):
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


def _slices(op, graph):
    """[(input, byte offset, bytes)] of Concat ``op``'s inputs in its
    output, when each is one contiguous block of it; else None."""
    if op.attrs.get("activation") not in (None, "", "NONE"):
        return None
    out = graph.tensors[op.outputs[0]]
    if out.shape is None:
        return None
    shape = [int(d) for d in out.shape]
    axis = int(op.attrs.get("axis", 0))
    if not -len(shape) <= axis < len(shape):
        return None
    axis %= len(shape)
    lead = 1
    for d in shape[:axis]:
        lead *= d
    if lead != 1:
        return None
    rest = shape[:axis] + shape[axis + 1:]
    found, off = [], 0
    for name in op.inputs:
        if not name:
            continue
        t = graph.tensors[name]
        if t.dtype != out.dtype or t.shape is None or len(t.shape) != len(shape) or \
                [int(d) for j, d in enumerate(t.shape) if j != axis] != rest:
            return None
        found.append((name, off, t.nbytes))
        off += t.nbytes
    return found if off == out.nbytes else None


def _check_concat(b, m, op, older, graph, problems):
    """Concat output ``m`` over ``older``: each older member lies inside
    one slice, whose input is in the buffer exactly at that slice."""
    slices = _slices(op, graph)
    if slices is None:
        problems.append(f"buffer {b.name!r}: Concat {op.name!r} writes {m!r} over "
                        f"{older[0]!r}, but its slices are not contiguous blocks (or it "
                        "fuses an activation): its inputs cannot be written in place")
        return
    base = b.at.get(m, 0)
    for o in older:
        lo, hi = _span(b, graph, o)
        hit = [(name, base + off, base + off + n) for name, off, n in slices
               if lo < base + off + n and base + off < hi]
        if len(hit) != 1 or not hit[0][1] <= lo < hi <= hit[0][2]:
            problems.append(f"buffer {b.name!r}: {o!r} straddles slices of Concat "
                            f"{op.name!r}'s output {m!r}")
            continue
        name, start, _ = hit[0]
        if name not in b.tensors or b.at.get(name, 0) != start:
            problems.append(f"buffer {b.name!r}: Concat {op.name!r} writes {m!r} over "
                            f"{o!r}, but its input {name!r} is not in that slice")


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
    if budget is not None and "total_bytes" in budget:    # the split it records
        total, state = budget["total_bytes"], budget.get("kernel_state_bytes", 0)
        if budget.get("arena_bytes") != plan.arena_bytes or total != plan.arena_bytes + state:
            problems.append(f"budget total of {total} bytes is not the arena "
                            f"({plan.arena_bytes}) + kernel state ({state})")
        elif total > budget.get("memory_budget", 0):
            problems.append(f"arena + kernel state of {total} bytes is over the memory "
                            f"budget of {budget.get('memory_budget')} bytes")
    home = {}
    for b in bufs:
        if not b.tensors:
            problems.append(f"buffer {b.name!r} holds no tensor")
        for t in b.tensors:
            if t in home:
                problems.append(f"tensor {t!r} is in buffers {home[t].name!r} and "
                                f"{b.name!r}")
            home[t] = b
            at = b.at.get(t, 0)
            if b.offset is not None and plan.offsets.get(t) != b.offset + at:
                problems.append(f"offsets[{t!r}] = {plan.offsets.get(t)!r} but its "
                                f"buffer is at {b.offset} (+{at})")
        for t in b.at:
            if t not in b.tensors:
                problems.append(f"buffer {b.name!r} places {t!r}, which it does not hold")
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
        if b.size < b.at.get(name, 0) + graph.tensors[name].nbytes:
            problems.append(f"buffer {b.name!r} has {b.size} bytes, member {name!r} "
                            f"needs {graph.tensors[name].nbytes} at byte "
                            f"{b.at.get(name, 0)}")
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
