"""Pool.step(): a pool that learns its loop and serves repeated steps at
planned offsets (csrc/pool_learn.c), from Python: the step API, the
statistics, NumPy's allocator under a learning pool, and a property test
of random repeated steps with random divergences."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarena
from helpers.pool_world import World, addr
from pyarena import Policy, Pool

#: slabs to 1 KiB: these steps' blocks are mostly above the slab sizes (a
#: step with at most one such block is left to the zones:
#: test_pool_learn_small.py)
SLAB_MAX = 1024


def step_of(pool, sizes, keep=()):
    """One step: allocate `sizes` (uint8 arrays), two live at a time;
    returns the addresses and the arrays listed in `keep` (by index)."""
    live, kept, addrs = [], [], []
    for i, n in enumerate(sizes):
        a = pool.empty(n, np.uint8)
        a.fill(i & 0xFF)
        addrs.append(addr(a))
        live.append((i, a))
        if len(live) > 2:
            j, old = live.pop(0)
            assert (old == (j & 0xFF)).all()
            if j in keep:
                kept.append(old)
            del old
    for j, a in live:
        if j in keep:
            kept.append(a)
    del live
    return addrs, kept


SIZES = [4000, 12000, 700, 30000, 2000, 9000]


def test_step_counts_and_stats_fields():
    pool = Pool(slab_max=SLAB_MAX)
    st0 = pool.stats()
    assert (st0.steps, st0.learned_sequences, st0.plan_hits, st0.planned_bytes) == (0, 0, 0, 0)
    pool.step()
    pool.step()
    assert pool.stats().steps == 2
    d = pool.memory_stats()
    assert d["num_steps"] == 2 and d["learned.sequences"] == 0


def test_a_repeated_step_is_served_from_one_plan():
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    for _ in range(2):                    # seen twice: planned
        step_of(pool, SIZES)
        pool.step()
    st = pool.stats()
    assert st.learned_sequences == 1 and st.planned_bytes > 0
    before = st.plan_hits
    seen = []
    for _ in range(3):
        addrs, _ = step_of(pool, SIZES)
        pool.step()
        seen.append(addrs)
    st = pool.stats()
    assert st.plan_hits - before == 3 * len(SIZES)
    assert st.plan_steps == 3 and st.plan_misses == 0
    assert seen[0] == seen[1] == seen[2]          # the plan's offsets
    assert max(seen[0]) - min(seen[0]) < st.planned_bytes
    # the plan packs tighter than every block side by side
    assert st.planned_bytes < sum(SIZES)
    assert st.live == 0 and st.planned_live == 0
    assert pool.check() == 0
    assert "learned" in pool.memory_summary()


def test_divergence_falls_back_and_keeps_the_plan():
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    for _ in range(3):
        step_of(pool, SIZES)
        pool.step()
    hits = pool.stats().plan_hits
    other = list(SIZES)
    other[3] = 31000
    step_of(pool, other)
    pool.step()
    st = pool.stats()
    assert st.plan_misses == 1 and st.plan_hits - hits == 3
    assert st.learned_sequences == 1
    step_of(pool, SIZES)
    pool.step()
    assert pool.stats().plan_hits - st.plan_hits == len(SIZES)
    assert pool.check() == 0


def test_a_planned_array_kept_across_steps_stays_intact():
    pool = Pool(slab_max=SLAB_MAX)
    pool.step()
    for _ in range(3):
        step_of(pool, SIZES)
        pool.step()
    _, kept = step_of(pool, SIZES, keep={3, 5})
    pool.step()
    assert pool.stats().planned_live > 0
    for _ in range(3):                     # the region is busy: zones serve
        step_of(pool, SIZES)
        pool.step()
    assert (kept[0] == 3).all() and (kept[1] == 5).all()
    hits = pool.stats().plan_hits
    pool.free(kept[0])
    pool.free(kept[1])
    assert pool.stats().planned_live == 0
    step_of(pool, SIZES)
    pool.step()
    step_of(pool, SIZES)
    pool.step()
    assert pool.stats().plan_hits > hits
    assert pool.check() == 0


def test_step_scope_ends_the_step_even_on_error():
    pool = Pool(slab_max=SLAB_MAX)
    with pool.step_scope() as p:
        assert p is pool
    with pytest.raises(RuntimeError):
        with pool.step_scope():
            raise RuntimeError("inside")
    assert pool.stats().steps == 2
    pool.close()
    with pytest.raises(pyarena.StateError):
        pool.step()


def test_learning_off_never_plans():
    pool = Pool(Policy(learn=False))
    pool.step()
    for _ in range(5):
        step_of(pool, SIZES)
        pool.step()
    st = pool.stats()
    assert st.steps == 6 and st.learned_sequences == 0 and st.plan_hits == 0
    assert st.planned_bytes == 0


def test_learn_repeats_and_auto_step():
    pool = Pool(Policy(learn_repeats=3, slab_max=SLAB_MAX))
    pool.step()
    for _ in range(2):
        step_of(pool, SIZES)
        pool.step()
    assert pool.stats().learned_sequences == 0
    step_of(pool, SIZES)
    pool.step()
    assert pool.stats().learned_sequences == 1

    auto = Pool(Policy(auto_step=True, slab_max=SLAB_MAX))
    for _ in range(5):
        step_of(auto, SIZES)      # live bytes back to 0: a step end
    st = auto.stats()
    assert st.steps == 5 and st.learned_sequences == 1
    assert st.plan_hits == 3 * len(SIZES)


def loop(pool, x, n):
    """A plain NumPy loop: every temporary comes from NumPy's allocator."""
    out = []
    for _ in range(n):
        with pyarena.numpy_allocator(pool) as na:
            before = na.allocations
            y = x * 2.0
            z = np.exp(y) + y
            w = z @ z.T
            s = float(w.sum())
            made = na.allocations - before
        pool.step()
        out.append((s, made))
    return out


def test_numpy_temporaries_come_from_the_plan_after_warm_up():
    pool = Pool(slab_max=SLAB_MAX)
    x = np.linspace(0, 1, 48 * 48).reshape(48, 48)
    pool.step()
    loop(pool, x, 4)                          # warm-up
    st = pool.stats()
    assert st.learned_sequences >= 1
    res = loop(pool, x, 5)
    st2 = pool.stats()
    made = sum(m for _, m in res)
    assert made > 0
    # every NumPy allocation of the served steps was a plan hit
    assert st2.plan_hits - st.plan_hits == made
    assert st2.plan_steps - st.plan_steps == 5
    expect = float(((np.exp(x * 2.0) + x * 2.0) @ (np.exp(x * 2.0) + x * 2.0).T).sum())
    assert all(s == pytest.approx(expect) for s, _ in res)
    assert pool.check() == 0


# -- property: random repeated steps with random divergences ----------------------

@st.composite
def programs(draw):
    """A few step shapes (alloc sizes and how long each block lives, in
    allocations) and a schedule of which shape runs each step, with
    occasional divergences (a size changed, an extra block, a block kept
    past the step)."""
    nshapes = draw(st.integers(1, 3))
    shapes = []
    for _ in range(nshapes):
        n = draw(st.integers(1, 8))
        sizes = draw(st.lists(st.integers(0, 40000), min_size=n, max_size=n))
        lives = draw(st.lists(st.integers(0, 3), min_size=n, max_size=n))
        shapes.append((sizes, lives))
    steps = draw(st.lists(
        st.tuples(st.integers(0, nshapes - 1),
                  st.sampled_from(["same"] * 4 + ["size", "extra", "keep"]),
                  st.integers(0, 7)),
        min_size=4, max_size=24))
    return shapes, steps


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=programs(), repeats=st.integers(1, 3))
def test_random_steps_keep_every_block_intact(prog, repeats):
    shapes, steps = prog
    pool = Pool(Policy(learn_repeats=repeats, slab_max=SLAB_MAX))
    w = World(pool)
    kept = []
    pool.step()
    # warm-up: each shape a few times as is, so plans exist
    schedule = [(k, "same", 0) for k in range(len(shapes)) for _ in range(repeats + 1)]
    for k, how, at in schedule + steps:
        sizes, lives = shapes[k]
        pending = []   # (free after this many more allocations, key)
        for i, n in enumerate(sizes):
            if how == "size" and i == at % len(sizes):
                n += 64
            key = w.alloc(n)
            if how == "extra" and i == at % len(sizes):
                kept.append(w.alloc(1000))
            pending = [(d - 1, q) for d, q in pending]
            for d, q in [p for p in pending if p[0] < 0]:
                w.free(q)
            pending = [p for p in pending if p[0] >= 0]
            pending.append((lives[i], key))
        for d, q in pending:
            if how == "keep" and d == max(p[0] for p in pending):
                kept.append(q)
            else:
                w.free(q)
        while len(kept) > 2:
            w.free(kept.pop(0))
        pool.step()
        w.invariants()
    for q in kept:
        w.free(q)
    st = pool.stats()
    assert st.live == 0 and st.requested == 0 and st.planned_live == 0
    assert pool.check() == 0
