"""Memory-aware operator scheduling: the op order with the smallest peak.

A static plan can get no lower than the largest sum of bytes live at one
position of the op order it is given (the fixed-order bound).  For graphs with
branches -- Inception modules, DenseNet blocks, detector necks, multi-head
outputs -- another valid order often has a lower peak: finish a branch
whose output is small before starting one that holds a large tensor, free
a tensor early by running its last reader first.  :func:`schedule` finds
that order (Serenity, MLSys 2020, in spirit):

1. **Cut** the graph at its articulation ops -- ops every other op either
   precedes or follows -- which every valid order runs in the same place;
   the segments between them are scheduled independently without loss.
2. **Exact search per segment**: a dynamic programme over the segment's
   executed-op sets (a state determines which tensors are live, so its
   bytes are known); each state keeps the smallest peak of any path to it.
   Bounded by ``max_states`` per segment and ``time_limit`` overall.
3. **Beyond the bounds**, a greedy order (the ready op whose run needs the
   fewest bytes, then the one leaving the fewest live) is tried and kept
   only if it beats the given order on that segment.

Bytes are counted as the planner counts them: every planned tensor padded
to ``alignment``, graph inputs live from the first position to their last
reader, graph outputs from their producer to the end, an op's scratch
while it runs.  The result never has a higher peak than the given
order.  :func:`pyarena.plan` applies it with ``schedule=True``.
"""
import time

from ..errors import InvalidArgumentError
from .result import padded_size

__all__ = ["schedule", "Schedule", "live_bytes"]


class Schedule:
    """``order`` (indices into the given ``graph.ops``), the fixed-order
    bound ``peak_before`` of the given order and ``peak_after`` of the new
    one (bytes), ``exact`` (every segment solved exactly), ``segments``,
    ``states`` explored and ``seconds``.  ``floor``: the bytes live at the
    fullest articulation op -- the same in every valid order (every other
    op runs before it or after it), so no order's bound is below it; where
    ``peak_before == floor`` no schedule can help."""

    def __init__(self, order, peak_before, peak_after, exact, segments, states, seconds,
                 floor=0):
        self.floor = floor
        self.order = order
        self.peak_before = peak_before
        self.peak_after = peak_after
        self.exact = exact
        self.segments = segments
        self.states = states
        self.seconds = seconds

    @property
    def reordered(self):
        return self.order != list(range(len(self.order)))

    def __repr__(self):
        return (f"Schedule(peak {self.peak_before:,} -> {self.peak_after:,} B, "
                f"{self.segments} segments, {'exact' if self.exact else 'heuristic'}, "
                f"{self.states:,} states, {self.seconds:.3f} s)")


class _Problem:
    """The graph as integer arrays: per op its planned input / output
    tensors and scratch; per tensor its size, consumers and kind."""

    def __init__(self, graph, alignment):
        ops = graph.ops
        tensors = graph.tensors
        self.n = len(ops)
        index = {}
        self.size, self.kind = [], []          # kind: 0 activation, 1 input, 2 output

        def tid(name):
            if name not in index:
                t = tensors[name]
                index[name] = len(self.size)
                self.size.append(padded_size(t.nbytes, alignment))
                self.kind.append({"input": 1, "output": 2}.get(t.role, 0))
            return index[name]
        self.ins, self.outs, self.scratch = [], [], []
        for op in ops:
            ins = []
            for name in op.inputs:
                if name and tensors[name].role != "constant":
                    t = tid(name)
                    if t not in ins:
                        ins.append(t)
            self.ins.append(ins)
            self.outs.append([tid(name) for name in op.outputs if name])
            self.scratch.append(padded_size(op.scratch_bytes, alignment)
                                if op.scratch_bytes else 0)
        nt = len(self.size)
        self.producer = [-1] * nt
        for i, outs in enumerate(self.outs):
            for t in outs:
                self.producer[t] = i
        self.consumers = [[] for _ in range(nt)]
        for i, ins in enumerate(self.ins):
            for t in ins:
                self.consumers[t].append(i)
        # op-level dependencies as bit masks
        self.pred = [0] * self.n
        for i, ins in enumerate(self.ins):
            for t in ins:
                p = self.producer[t]
                if p >= 0:
                    self.pred[i] |= 1 << p

    def peaks(self, order):
        """Live bytes at each position of ``order`` (a permutation of op indices)."""
        pos = [0] * self.n
        for k, i in enumerate(order):
            pos[i] = k
        n = len(order)
        delta = [0] * (n + 1)
        for t, size in enumerate(self.size):
            reads = [pos[c] for c in self.consumers[t]]
            if self.kind[t] == 1:
                first = 0
            elif self.producer[t] >= 0:
                first = pos[self.producer[t]]
            else:
                continue
            last = n - 1 if self.kind[t] == 2 else max(reads + [first])
            delta[first] += size
            delta[last + 1] -= size
        out, cur = [], 0
        for k in range(n):
            cur += delta[k]
            out.append(cur + self.scratch[order[k]])
        return out


def live_bytes(graph, order=None, alignment=64):
    """Bytes live at each position of ``graph`` run in ``order`` (default: the
    graph's own), as the planner counts them; ``max()`` of it is the
    fixed-order lower bound of that order."""
    p = _Problem(graph, alignment)
    return p.peaks(list(range(p.n)) if order is None else list(order))


def _bits(mask):
    """The indices of the set bits of ``mask``, lowest first."""
    while mask:
        low = mask & -mask
        yield low.bit_length() - 1
        mask ^= low


def _articulations(p):
    """Ops comparable with every other op (their position is fixed)."""
    n = p.n
    anc = [0] * n
    for i in range(n):                      # the given order is topological
        a = p.pred[i]
        for k in _bits(p.pred[i]):
            a |= anc[k]
        anc[i] = a
    desc = [0] * n
    for i in range(n - 1, -1, -1):
        for k in _bits(p.pred[i]):
            desc[k] |= desc[i] | (1 << i)
    everything = (1 << n) - 1
    return [i for i in range(n) if anc[i] | desc[i] | (1 << i) == everything]


class _Segment:
    """Ops ``seg`` (given order) scheduled after every op before it ran."""

    def __init__(self, p, seg, done_before):
        self.p = p
        self.seg = seg
        self.local = {op: k for k, op in enumerate(seg)}
        self.full = (1 << len(seg)) - 1
        self.pred = []
        for op in seg:
            m = 0
            for k in _bits(p.pred[op]):
                if k in self.local:
                    m |= 1 << self.local[k]
            self.pred.append(m)
        # per tensor read in the segment: the segment's readers (mask) and
        # whether anything later (or the graph's end) still needs it
        after = set(range(p.n)) - done_before - set(seg)
        self.cons = {}
        self.keep = {}
        for op in seg:
            for t in p.ins[op] + p.outs[op]:
                if t in self.cons:
                    continue
                m = 0
                later = p.kind[t] == 2
                for c in p.consumers[t]:
                    if c in self.local:
                        m |= 1 << self.local[c]
                    elif c in after:
                        later = True
                self.cons[t] = m
                self.keep[t] = later

    def advance(self, mask, k):
        """(bytes during op k, change of the live bytes after it) from state
        ``mask``."""
        p, op = self.p, self.seg[k]
        done = mask | (1 << k)
        new = 0
        transient = 0
        for t in p.outs[op]:
            if self.keep[t] or self.cons[t]:
                new += p.size[t]
            else:
                transient += p.size[t]         # nobody reads it: lives one position
        freed = 0
        for t in p.ins[op]:
            if not self.keep[t] and self.cons[t] & ~done == 0:
                freed += p.size[t]
        return new + transient + p.scratch[op], new - freed

    def ready(self, mask):
        for k in range(len(self.seg)):
            if not mask >> k & 1 and self.pred[k] & ~mask == 0:
                yield k

    def exact(self, base, max_states, deadline):
        """The order of least peak (local indices), its peak and the states
        explored; None if a bound was hit.  A state holds its path as a
        chain ``(path before, op)`` shared with the states after it: only the
        paths still extended stay alive, not one record per state explored
        (a search that runs to its time limit made megabytes of them, and
        the pymalloc arenas they filled stayed resident after it)."""
        level = {0: (0, base, ())}     # mask -> (peak, live, path)
        states = 1
        for _ in range(len(self.seg)):
            nxt = {}
            for mask, (peak, live, path) in level.items():
                for k in self.ready(mask):
                    during, change = self.advance(mask, k)
                    cand = max(peak, live + during)
                    m2 = mask | (1 << k)
                    old = nxt.get(m2)
                    if old is None or cand < old[0]:
                        nxt[m2] = (cand, live + change, (path, k))
            states += len(nxt)
            if states > max_states or time.perf_counter() > deadline:
                return None
            level = nxt
        peak, _, chain = level[self.full]
        order = []
        while chain:
            chain, k = chain
            order.append(k)
        return order[::-1], peak, states

    def beam(self, base, width, deadline):
        """The dynamic programme of :meth:`exact` keeping only the ``width``
        states of least (peak, live) at each level: an order (local
        indices), not proven best; None past ``deadline``."""
        level = {0: (0, base, ())}
        for _ in range(len(self.seg)):
            nxt = {}
            for mask, (peak, live, order) in level.items():
                for k in self.ready(mask):
                    during, change = self.advance(mask, k)
                    cand = max(peak, live + during)
                    m2 = mask | (1 << k)
                    old = nxt.get(m2)
                    if old is None or (cand, live + change) < old[:2]:
                        nxt[m2] = (cand, live + change, (order, k))
            if time.perf_counter() > deadline:
                return None
            if len(nxt) > width:
                nxt = dict(sorted(nxt.items(), key=lambda kv: kv[1][:2])[:width])
            level = nxt
        chain, order = level[self.full][2], []
        while chain:
            chain, k = chain
            order.append(k)
        return order[::-1]

    def walk(self, order, base):
        """Peak and final live bytes of ``order`` (local indices)."""
        mask, live, peak = 0, base, 0
        for k in order:
            during, change = self.advance(mask, k)
            peak = max(peak, live + during)
            live += change
            mask |= 1 << k
        return peak, live

    def greedy(self, base):
        mask, live, order = 0, base, []
        while mask != self.full:
            best = None
            for k in self.ready(mask):
                during, change = self.advance(mask, k)
                key = (live + during, change, k)
                if best is None or key < best:
                    best = key
            k = best[2]
            order.append(k)
            live += best[1]
            mask |= 1 << k
        return order


def schedule(graph, alignment=64, time_limit=2.0, max_states=200_000):
    """The op order of ``graph`` (validated) with the smallest fixed-order
    peak that the search finds within ``max_states`` states per segment and
    ``time_limit`` seconds; never worse than the graph's own order.
    Returns a :class:`Schedule`; the graph is not changed."""
    if time_limit <= 0 or max_states < 1:
        raise InvalidArgumentError("time_limit and max_states must be positive")
    t0 = time.perf_counter()
    deadline = t0 + time_limit
    graph.validate()
    p = _Problem(graph, alignment)
    given = list(range(p.n))
    positions = p.peaks(given)
    before = max(positions, default=0)
    cuts = _articulations(p)
    floor = max((positions[i] for i in cuts), default=0)
    order, done, exact, states, segments = [], set(), True, 0, 0
    # live bytes when a segment starts: walk the new order so far
    bounds = [-1] + cuts + [p.n]
    left = p.n - len(cuts)          # ops of the segments not scheduled yet
    for a, b in zip(bounds, bounds[1:]):
        seg = list(range(a + 1, b))
        if seg:
            segments += 1
            base = _live_after(p, order)
            s = _Segment(p, seg, done)
            # this segment's share of the time left: half for the exact
            # search, the rest (and what it leaves) for the beams
            now = time.perf_counter()
            share = max(0.0, deadline - now) * len(seg) / max(left, 1)
            left -= len(seg)
            got = s.exact(base, max_states, now + share / 2) if len(seg) > 1 else ([0], 0, 1)
            if got is None:
                exact = False
                local = _best_of(s, base, [list(range(len(seg))), s.greedy(base)] + [
                    s.beam(base, w, now + share) for w in (16, 128)])
            else:
                local, _, n_states = got
                states += n_states
            order += [seg[k] for k in local]
            done.update(seg)
        if b < p.n:
            order.append(b)
            done.add(b)
    after = max(p.peaks(order), default=0)
    if after > before:           # cannot happen when exact; keep the given order
        order, after = given, before
    return Schedule(order, before, after, exact, segments, states, time.perf_counter() - t0,
                    floor)


def _best_of(s, base, orders):
    """The order of least peak among ``orders`` (None: not found), the
    first of equal ones."""
    return min((o for o in orders if o is not None), key=lambda o: s.walk(o, base)[0])


def _live_after(p, order):
    """Live bytes once ``order`` (a prefix of a schedule) has run."""
    done = set(order)
    live = 0
    for t, size in enumerate(p.size):
        made = p.kind[t] == 1 or (p.producer[t] >= 0 and p.producer[t] in done)
        if not made:
            continue
        if p.kind[t] == 2 or any(c not in done for c in p.consumers[t]):
            live += size
    return live
