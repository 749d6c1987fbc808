"""A learning pool pays for a plan only where the plan can serve
(csrc/alloc/pool_learn.c): a step kind that comes back only after more
kinds than the pool keeps plans is not planned, long steps are judged
sooner, falling back keeps the zones' memory, and the plans are the same
every run.  Property tests of cycles of many step kinds: blocks intact,
aligned, never overlapping, after every step."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from helpers.pool_world import World
from pyarena import Pool

PLANS = 16   # plans a pool keeps by default (learn_sequences)

#: slabs to 1 KiB: these steps' blocks are mostly above the slab sizes (a
#: step with at most one such block is left to the zones:
#: test_pool_learn_small.py)
SLAB_MAX = 1024


def kind_sizes(k, n=3):
    """The allocation sizes of step kind k: distinct per kind."""
    return [1000 + 4096 * k + 64 * i for i in range(n)]


def run_kind(pool, k, n=3):
    live = []
    for i, s in enumerate(kind_sizes(k, n)):
        a = pool.empty(s, np.uint8)
        a.fill((k + i) & 0xFF)
        live.append((a, (k + i) & 0xFF))
    for a, tag in live:
        assert (a == tag).all()
    del live, a
    pool.step()


def test_kinds_coming_back_farther_than_the_plans_kept_are_not_planned():
    """24 step kinds in a cycle, 16 plans kept: each kind would be evicted
    before it came back (the recorded irregular NumPy program replayed),
    so none is planned and no region is mapped."""
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    for i in range(40 * 24):
        run_kind(pool, i % 24)
        st = pool.stats()
        assert st.learned_sequences == 0 and st.planned_bytes == 0, i
    assert pool.check() == 0


def test_kinds_coming_back_within_the_plans_kept_are_planned():
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    for i in range(6 * 12):
        run_kind(pool, i % 12)
    st = pool.stats()
    assert st.learned_sequences == 12 and st.learn_fallbacks == 0
    hits = st.plan_hits
    for i in range(24):
        run_kind(pool, i % 12)
    assert pool.stats().plan_hits == hits + 24 * 3
    assert pool.check() == 0


def test_long_unrepeated_steps_are_judged_after_sixteen_marks():
    """Steps of 300 allocations that never repeat: the window closes after
    16 marks (4,096 allocations seen), not 64, and learning falls back."""
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    rng = np.random.default_rng(0)
    marks = 0
    while pool.stats().learn_fallbacks == 0 and marks < 64:
        for s in rng.integers(1, 3000, size=300):
            pool.free(pool.empty(int(s), np.uint8))
        pool.step()
        marks += 1
    assert pool.stats().learn_fallbacks == 1
    assert marks == 16


def test_the_plain_pools_turns_grow_fourfold():
    """Long steps that never repeat: each learning turn closes after 16
    marks and falls back; the plain pool's turn after the k-th fallback in
    a row is 64 << 2k marks (64, 256, ...), so the losing turns thin out."""
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    rng = np.random.default_rng(2)
    at = []
    mark = 0
    while len(at) < 3:
        for s in rng.integers(1, 3000, size=260):
            pool.free(pool.empty(int(s), np.uint8))
        pool.step()
        mark += 1
        if pool.stats().learn_fallbacks > len(at):
            at.append(mark)
    assert at[1] - at[0] == 64 + 16
    assert at[2] - at[1] == 256 + 16


def test_falling_back_keeps_the_zones_memory():
    """The plain pool keeps the memory its zones hold; a fallback gives the
    learned region back but trims nothing else."""
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    rng = np.random.default_rng(1)
    keep = [pool.empty(1 << 20, np.uint8) for _ in range(3)]
    del keep                          # 3 MiB free in the zones
    before = pool.stats().reserved
    while pool.stats().learn_fallbacks == 0:
        for s in rng.integers(1, 3000, size=300):
            pool.free(pool.empty(int(s), np.uint8))
        pool.step()
    assert pool.stats().reserved >= before


def test_a_small_plan_does_not_trim_the_zones():
    """A plan much smaller than the zones' memory trims nothing (the zones
    still serve nearly everything; a trim would only fault it back in); a
    plan as large as what the zones hold trims them (the warm-up memory
    goes back)."""
    pool = Pool(slab_max=512)         # both ~1 KiB blocks above the slab sizes
    pool.step()
    keep = [pool.empty(1 << 20, np.uint8) for _ in range(3)]
    del keep                          # 3 MiB free in the zones
    before = pool.stats().reserved
    for _ in range(4):
        run_kind(pool, 0, n=2)        # two blocks of ~1 KiB
    st = pool.stats()
    assert st.learned_sequences == 1 and st.plan_hits > 0
    assert st.reserved >= before
    big = Pool(slab_max=SLAB_MAX)
    big.step()
    for _ in range(4):
        for n in (1 << 20, 1 << 20):
            big.empty(n, np.uint8).fill(1)
        big.step()
    st = big.stats()
    assert st.learned_sequences == 1 and st.trims >= 1


def plans_of(cycle, steps):
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    addrs = []
    for i in range(steps):
        a = pool.empty(kind_sizes(cycle[i % len(cycle)])[0] * 3, np.uint8)
        b = pool.empty(5000 + 64 * (i % len(cycle)), np.uint8)
        addrs.append((a.__array_interface__["data"][0] - b.__array_interface__["data"][0]))
        del a, b
        pool.step()
    st = pool.stats()
    return addrs[-len(cycle):], st.planned_bytes, st.learned_sequences


def test_the_same_program_gets_the_same_plans():
    """Plans come from the planner's greedy heuristic, not a timed search:
    the same steps give the same offsets and region in every run."""
    first = plans_of([0, 3, 1, 2], 64)
    assert first[2] == 4
    for _ in range(3):
        assert plans_of([0, 3, 1, 2], 64) == first


# -- property: cycles of step kinds, within and beyond the plans kept ------------

@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.integers(1, 30), n=st.integers(1, 5), rounds=st.integers(2, 8),
       carry=st.booleans())
def test_cycles_of_step_kinds_keep_blocks_intact(kinds, n, rounds, carry):
    pool = Pool(slab_max=SLAB_MAX)
    w = World(pool)
    carried = None
    pool.step()
    for i in range(kinds * rounds):
        keys = [w.alloc(s) for s in kind_sizes(i % kinds, n)]
        if carried is not None:
            w.free(carried)
        carried = keys.pop() if carry else None
        for q in keys:
            w.free(q)
        pool.step()
        w.invariants()
        st = pool.stats()
        if kinds > PLANS:
            assert st.learned_sequences == 0
        assert st.learned_sequences <= min(kinds, PLANS)
    if carried is not None:
        w.free(carried)
    st = pool.stats()
    assert st.live == 0 and st.requested == 0 and st.planned_live == 0
    assert pool.check() == 0
