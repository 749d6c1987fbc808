"""A learning pool never costs more than the plain pool (csrc/alloc/
pool_learn.c): plans that keep missing are dropped and the pool runs plain
for a while (``learn_fallbacks``), the plans of several step signatures
share one region sized to the largest, and a property test of random loops
whose batch varies, with phases of traffic that never repeats."""
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pyarena
from helpers.pool_world import World, addr
from pyarena import Pool

JUDGE = 64   # step marks per judgement (PA_LEARN_JUDGE)
PAGE = 4096


def run_step(pool, sizes):
    """Allocate `sizes` (uint8), two live at a time, all freed; data checked."""
    live = []
    for i, n in enumerate(sizes):
        live.append(pool.empty(n, np.uint8))
        live[-1].fill(i & 0xFF)
        if len(live) > 2:
            assert (live[0] == ((i - 2) & 0xFF)).all()
            del live[0]                   # the last reference: the block goes back
    for j, a in enumerate(live, len(sizes) - len(live)):
        assert (a == (j & 0xFF)).all()
    del live, a
    pool.step()


def test_plans_that_keep_missing_fall_back_to_the_plain_pool():
    pool = Pool(slab_max=4096)      # two of its three blocks above the slab sizes
    pool.step()
    for _ in range(2):
        run_step(pool, [4000, 9000, 5000])
    assert pool.stats().learned_sequences == 1
    i = 0
    while pool.stats().learn_fallbacks == 0 and i < 2 * JUDGE:
        run_step(pool, [4000, 9000, 6000 + 64 * i])   # starts alike, then diverges
        i += 1
    st = pool.stats()
    assert st.learn_fallbacks == 1 and i <= JUDGE
    assert st.learned_sequences == 0 and st.planned_bytes == 0
    assert pool.memory_stats()["learned.fallbacks"] == 1
    hits = st.plan_hits
    for _ in range(JUDGE - 4):                      # the plain pool's turn
        run_step(pool, [4000, 9000, 5000])
    assert pool.stats().plan_hits == hits
    for _ in range(8):                              # then learning again
        run_step(pool, [4000, 9000, 5000])
    assert pool.stats().plan_hits > hits
    assert pool.check() == 0


def test_a_paying_loop_never_falls_back():
    pool = Pool()
    pool.step()
    for i in range(4 * JUDGE):
        b = 1 + i % 8
        run_step(pool, [24576 * b, 65536 * b, 32768 * b, 2048 * b])
    st = pool.stats()
    assert st.learn_fallbacks == 0 and st.learned_sequences == 8
    # one region sized to the largest plan (batch 8), not the sum of the eight
    assert st.planned_bytes <= (24576 + 65536 + 32768) * 8 + PAGE   # three live at once


def landmarks(x, w1, w2):
    h = np.maximum(x @ w1, 0)
    h = np.tanh(h @ w2)
    return float((h * 2.0 + 1.0).sum())


def test_batch_varying_numpy_loop_footprint():
    """A NumPy loop whose batch cycles 1..8 under numpy_allocator(Pool()):
    after warm-up every step is served, and the pool's peak reserved bytes
    stay within 1.10x its peak live bytes (the plain pool: its zones'
    rounding on top)."""
    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((256, 512)).astype(np.float32)
    w2 = rng.standard_normal((512, 64)).astype(np.float32)
    xs = rng.standard_normal((8, 64, 256)).astype(np.float32)
    pool = Pool()
    alloc = pyarena.numpy_allocator(pool)
    pool.step()
    for i in range(48):
        with alloc:
            landmarks(xs[: 1 + i % 8].reshape(-1, 256), w1, w2)
        pool.step()
    pool.reset_peak()
    before = pool.stats()
    for i in range(64):
        with alloc:
            landmarks(xs[: 1 + i % 8].reshape(-1, 256), w1, w2)
        pool.step()
    st = pool.stats()
    assert st.learn_fallbacks == 0 and st.learned_sequences == 8
    assert st.plan_steps - before.plan_steps == 64
    assert st.peak_reserved <= 1.10 * st.peak_requested, (st.peak_reserved, st.peak_requested)
    assert pool.check() == 0


# -- property: loops of varying batch, with phases that never repeat ---------

@st.composite
def loops(draw):
    """A step shape (base sizes), the batch sizes it cycles through, and a
    schedule: ("loop", n) runs n steps of the cycle, ("noise", n) n steps
    of sizes that never repeat."""
    n = draw(st.integers(1, 6))
    base = draw(st.lists(st.integers(1, 6000), min_size=n, max_size=n))
    batches = draw(st.lists(st.integers(1, 8), min_size=1, max_size=5, unique=True))
    phases = draw(st.lists(st.tuples(st.sampled_from(["loop", "loop", "noise"]),
                                     st.integers(1, 80)), min_size=1, max_size=4))
    return base, batches, phases


def rounded(n, align):
    return (max(n, 1) + align - 1) // align * align


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(prog=loops(), seed=st.integers(0, 2**16))
def test_varying_batch_loops_keep_blocks_intact_in_one_region(prog, seed):
    base, batches, phases = prog
    rng = np.random.default_rng(seed)
    pool = Pool()
    w = World(pool)
    align = pool.alignment
    largest = 0        # the largest step's bytes: a bound on any one plan
    carried = None     # a block kept into the next step (a loop variable)
    pool.step()
    k = 0
    for kind, n in phases:
        for _ in range(n):
            if kind == "loop":
                b = batches[k % len(batches)]
                k += 1
                sizes = [s * b for s in base]
            else:
                sizes = [int(v) for v in rng.integers(1, 40000, size=len(base) + 1)]
            keys = []
            for s in sizes:
                keys.append(w.alloc(s))
                if len(keys) > 2:
                    w.free(keys.pop(0))
            if carried is not None:
                w.free(carried)                     # last step's, freed in this one
            carried = keys.pop()
            for q in keys:
                w.free(q)
            if kind == "loop":
                # every block of the step, plus the carry of the step before
                step_bytes = sum(rounded(s, align) for s in sizes) + rounded(max(sizes), align)
                largest = max(largest, step_bytes)
            pool.step()
            w.invariants()
            st = pool.stats()
            # one region, sized to the largest plan: never the sum of them
            assert st.planned_bytes <= rounded(largest, PAGE), (st.planned_bytes, largest)
    if carried is not None:
        w.free(carried)
    st = pool.stats()
    assert st.live == 0 and st.requested == 0 and st.planned_live == 0
    assert pool.check() == 0
