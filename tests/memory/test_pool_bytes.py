"""The pool's bytes by definition: the block a request gets, what a trim
releases, which caches a span request flushes.  ``Pool.check()`` sees
none of these (a pool that wastes, keeps or flushes too much is still
consistent), so each test states the expected bytes from the policy's
definition, not from what the pool did."""
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from pyarena.memory import Pool

PAGE = 4096


def _block(pool, nbytes):
    a = pool.empty(nbytes, np.uint8)
    return a, pool.block_size(a)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 512 * 1024), min_size=1, max_size=12))
def test_slab_only_block_is_the_smallest_class_that_fits(sizes):
    """Slab-only: a request gets the smallest size class that holds it.
    A class size asked for exactly gets that class (not the next one), and
    a request one byte above the next smaller class gets the same class."""
    pool = Pool(mode="slab-only")
    keep = []
    for n in sizes:
        a, b = _block(pool, n)
        keep.append(a)
        assert b >= n
        exact, b2 = _block(pool, b)          # the class size itself
        keep.append(exact)
        assert b2 == b, f"a request of exactly {b} B (a class) got a {b2} B block"
        if n > 1:
            below, b3 = _block(pool, n - 1)  # a smaller request never gets more
            keep.append(below)
            assert b3 <= b
    assert pool.check() == 0


def test_slab_only_quarter_steps_are_classes():
    """The default spacing is 4 classes per doubling: 64, 80, 96, 112 KiB
    (and so on for every power of two), each served exactly."""
    pool = Pool(mode="slab-only")
    keep = []
    for shift in range(10, 19):
        for k in (4, 5, 6, 7):
            n = (k << shift) // 4
            a, b = _block(pool, n)
            keep.append(a)
            assert b == n, f"{n} B got a {b} B block"
            a, b = _block(pool, n + 1)          # one byte more: the next class
            keep.append(a)
            assert b == ((k + 1) << shift) // 4


def test_trim_releases_down_to_the_target():
    """After 8 MiB is freed, trim(t) leaves at most t bytes reserved and
    releases all the rest but for less than a page (it gives back whole
    pages, rounding what it must release up)."""
    for target in (0, 1, PAGE, 1_000_001, 3 * 1024 * 1024 + 17):
        pool = Pool()
        a = pool.empty(8 << 20, np.uint8)
        a[::4096] = 1
        del a
        pool.reclaim()
        before = pool.total_bytes()
        assert pool.used_bytes() == 0
        released = pool.trim(target)
        after = pool.total_bytes()
        assert after <= target, (target, after)
        assert after > target - PAGE, (target, after)
        assert released == before - after


def test_trim_keeps_live_blocks_and_their_data():
    pool = Pool()
    live = pool.empty(1 << 20, np.uint8)
    live[:] = 7
    b = pool.empty(6 << 20, np.uint8)
    del b
    pool.reclaim()
    pool.trim(0)
    assert pool.used_bytes() >= live.nbytes
    assert (live == 7).all()
    assert pool.check() == 0


def test_a_span_request_keeps_the_slab_caches():
    """A large request flushes the cached large (and buddy) blocks so the
    heap sees every free span; the slab caches stay (they are flushed
    only if the heap still cannot serve)."""
    pool = Pool()
    small = [pool.empty(224, np.uint8) for _ in range(100)]
    big = [pool.empty(1 << 20, np.uint8) for _ in range(3)]
    del small, big
    s = pool.stats()
    slab_cached, large_cached = s.zones[0].cached, s.zones[2].cached
    assert slab_cached >= 100 * 224 and large_cached == 3 << 20
    y = pool.empty(3 << 20, np.uint8)      # served from the flushed spans
    s = pool.stats()
    assert s.zones[2].cached == 0
    assert s.zones[0].cached == slab_cached
    assert pool.total_bytes() <= (3 << 20) + (1 << 20)   # no growth for y
    del y


def _learned_with_a_hole(limit):
    """A learning pool whose heap cannot shrink: a 1.5 MiB hole under a
    2 MiB block live throughout, then a repeating step of 1.5 MiB (three
    512 KiB blocks) that the hole serves."""
    pool = Pool(limit=limit, learn=True)
    first = pool.empty(3 * (512 << 10), np.uint8)
    keep = pool.empty(2 << 20, np.uint8)
    del first
    for _ in range(10):
        xs = [pool.empty(512 << 10, np.uint8) for _ in range(3)]
        del xs
        pool.step()
    return pool, keep


def test_a_learned_region_never_takes_the_pool_past_its_limit():
    """The learned step's region (1.5 MiB) is mapped beside the heap (3.5
    MiB it cannot give back): under a 4 MiB limit it must not be (the
    steps then run from the heap), without a limit it is."""
    pool, keep = _learned_with_a_hole(4 << 20)
    s = pool.stats()
    assert s.peak_reserved <= 4 << 20
    assert s.planned_bytes == 0 and keep.nbytes == 2 << 20
    pool, keep = _learned_with_a_hole(100 << 20)
    s = pool.stats()
    assert s.planned_bytes >= 3 * (512 << 10) and s.plan_hits > 0
    assert s.peak_reserved > 4 << 20
