"""More than one patched stage under a memory budget.

Once a leading stage runs in bands, the peak of a network may sit
elsewhere: in a decoder whose upsampled maps live with the encoder's
skips, or in a later encoder block.  One stage cannot reach both, so
when no single stage fits the budget, :func:`multi_stage` chooses a set
of stages greedily and then thins their bands:

1. *cover the peak*: plan the graph with the stages chosen so far (each
   at one row per band, its smallest), find the op where the most bytes
   are live (:func:`peak_op`), and add the stage containing that op
   (:func:`~.patch.stages` with ``around``, both ways: row reuse and
   recompute) whose plan is smallest -- of those alike, the one with the
   fewest bytes live where it runs (the arena may be another hill's: the
   stage that flattens this one most is kept) -- while that makes the
   arena smaller and it is still over the budget;
2. *fewest bands*: then, stage by stage in graph order, the fewest bands
   (row reuse first, then recompute) with which the arena still fits,
   the other stages at the bands chosen so far -- found by bisection over
   the band counts (a plan each step; fewer bands never need less
   memory), so a stage costs a handful of plans, not one per count.

Stages are disjoint runs of the graph as given; they are patched last
first (``patch_graph`` replaces a run of ops by one, which leaves the
indices before it as they were).
"""
from .patch import band_rows, stages

__all__ = ["multi_stage", "peak_op", "live_bytes", "band_counts"]


def live_bytes(plan):
    """Per op: the bytes of the plan's buffers (tensors and scratch) live
    at it."""
    n = plan.num_ops
    delta = [0] * (n + 1)
    for b in plan.buffers:
        lo, hi = max(0, b.first), min(n - 1, b.last)
        if lo <= hi:
            delta[lo] += b.size
            delta[hi + 1] -= b.size
    out, live = [], 0
    for i in range(n):
        live += delta[i]
        out.append(live)
    return out


def peak_op(plan):
    """The index of the first op at which the plan's buffers hold the most
    bytes (None for a plan of no ops)."""
    live = live_bytes(plan)
    return live.index(max(live)) if live else None


def band_counts(rows):
    """The distinct numbers of bands of ``rows`` output rows, fewest first."""
    return sorted({len(band_rows(rows, -(-rows // r))) for r in range(1, rows + 1)})


def _disjoint(st, chosen):
    return all(st.last < o.first or o.last < st.first for o, _ in chosen)


def _cover(search, knob, level, max_stages, profile=False):
    """Step 1: [(stage, reuse)] at one row per band, the plan of that set.
    Of the candidate stages around the peak, the one giving the smallest
    arena; of equal ones, the one leaving the least live at its own op
    (``profile``: the lowest steps, all of them sorted highest first)."""
    graph, chosen = search.graph, []
    p, _ = search.set_attempt(knob, level, [])
    peak = graph.ops[peak_op(p)].name        # named now: the next attempt changes the graph
    index = {op.name: i for i, op in enumerate(search.saved.ops)}
    while not search.fits(p) and len(chosen) < max_stages:
        at = index.get(peak)
        if at is None or not all(at < o.first or o.last < at for o, _ in chosen):
            break                   # the peak is at a patched stage: nothing more here
        search.saved.restore()
        best = None
        for st in stages(graph, around=at):
            if not _disjoint(st, chosen):
                continue
            for reuse in (True, False):
                q, _ = search.set_attempt(knob, level, [(o, o.rows, r) for o, r in chosen]
                                          + [(st, st.rows, reuse)])
                live = live_bytes(q)
                names = [op.name for op in graph.ops]
                key = (q.arena_bytes, sorted(live, reverse=True) if profile else
                       live[names.index(f"patched[{st.key}]")])
                if best is None or key < best[0]:
                    best = (key, q, st, reuse, names[live.index(max(live))])
        if best is None or best[1].arena_bytes >= p.arena_bytes:
            break
        p, peak = best[1], best[4]
        chosen.append(best[2:4])
    return chosen, p


def multi_stage(search, knob, level, max_stages=8):
    """The fastest set of patched stages found whose arena fits the
    budget (see the module docstring): ``[(stage, bands, reuse)]`` in
    graph order (``search.set_attempt`` plans it); None when even every
    chosen stage at one row per band is over the budget."""
    for profile in (False, True):       # the second tie-break where the first falls short
        chosen, p = _cover(search, knob, level, max_stages, profile)
        if chosen and search.fits(p):
            break
    else:
        return None
    chosen.sort(key=lambda c: c[0].first)
    grid = [(st, st.rows, reuse) for st, reuse in chosen]
    for k in range(len(grid)):
        grid = _fewest(search, knob, level, grid, k)
    return grid


def _fewest(search, knob, level, grid, k):
    """``grid`` with stage ``k`` in the fewest bands that fit (row reuse
    first, then recompute), the others as they are: a bisection over the
    band counts, as fewer bands never need less memory (their windows
    only widen); ``grid`` itself, stage ``k`` at one row per band, fits."""
    st = grid[k][0]
    counts = band_counts(st.rows)
    lo, hi, best = 0, len(counts) - 1, grid
    while lo < hi:
        mid = (lo + hi) // 2
        for reuse in (True, False):
            trial = grid[:k] + [(st, counts[mid], reuse)] + grid[k + 1:]
            if search.fits(search.set_attempt(knob, level, trial)[0]):
                best, hi = trial, mid
                break
        else:
            lo = mid + 1
    return best
