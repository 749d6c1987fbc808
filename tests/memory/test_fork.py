"""fork() while other threads are inside pool calls (issue 9, item 1).

Before the pthread_atfork handlers in csrc/pool.c, 1-2 in every 40-60
children spun for ever in spin_lock_slow: a thread of the parent held the
pool lock at the fork and does not exist in the child.  Each child here
allocates and frees from the pool and from NumPy under numpy_allocator;
a child still running after its deadline is a hang and fails the test.
"""
import multiprocessing
import os
import sys
import threading
import time

import numpy as np
import pytest

import pyarena

pytestmark = pytest.mark.skipif(
    not hasattr(os, "fork") or sys.platform == "darwin",
    reason="needs fork() (POSIX; macOS forks unsafely with threads)")

CHILDREN = 30
CHILD_DEADLINE = 10.0      # seconds for one child (a healthy one needs ~0.1)


def _child_work(pools, q):
    try:
        for pool in pools:
            for n in (1, 1000, 70000, 300000):
                a = pool.empty((n,), np.float32)
                a.fill(1.5)
                assert float(a.sum()) == 1.5 * n
                pool.free(a)
            with pyarena.numpy_allocator(pool) as alloc:
                x = np.ones((300, 300)) @ np.ones((300, 300))
                y = np.concatenate([x, x])
            assert alloc.allocations >= 2 and y[0, 0] == 300.0
            del x, y
            pool.trim()
            with pool.statistics():
                pool.reset_peak()
            assert pool.check() == 0
        q.put("ok")
    except BaseException as e:          # reported, not raised in the child
        q.put(f"{type(e).__name__}: {e}")


def _hammer(pool, stop):
    while not stop.is_set():
        a = pool.empty((50000,), np.float32)
        pool.free(a)


def _janitor(pools, stop):
    # check() walks every block under the pool lock with the GIL released:
    # with thousands of live blocks most of this thread's time is spent
    # holding a pool lock, where a fork used to catch it
    n = 0
    while not stop.is_set():
        pool = pools[n % len(pools)]
        (pool.check, pool.stats, pool.check, pool.trim)[n % 4]()
        if n % 7 == 0:
            with pool.statistics():
                pass
        n += 1


def test_children_use_every_pool_whatever_threads_were_doing():
    ctx = multiprocessing.get_context("fork")
    pools = [pyarena.Pool(mode=m) for m in ("hybrid", "slab", "buddy")]
    kept = [pool.empty((n % 3000 + 1,), np.uint8) for pool in pools for n in range(4000)]
    stop = threading.Event()
    threads = [threading.Thread(target=_janitor, args=(pools, stop)) for _ in range(2)]
    threads += [threading.Thread(target=_hammer, args=(p, stop)) for p in pools]
    for t in threads:
        t.start()
    results, hung = [], 0
    try:
        for _ in range(CHILDREN):
            q = ctx.SimpleQueue()
            proc = ctx.Process(target=_child_work, args=(pools, q))
            proc.start()
            proc.join(CHILD_DEADLINE)
            if proc.is_alive():
                proc.kill()
                proc.join()
                hung += 1
                break               # one hang is enough: do not wait 40 times
            results.append(q.get() if not q.empty() else f"exit {proc.exitcode}")
            time.sleep(0.002)
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert hung == 0, "a forked child hung in a pool call"
    assert results == ["ok"] * CHILDREN
    for pool in pools:
        assert pool.check() == 0
