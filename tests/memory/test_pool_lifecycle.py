import copy
import gc
import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from pyarena import Pool, StateError, numpy_allocator
from pyarena._native import glue

def live_pools():
    return glue.live_handles(glue.POOL)


@pytest.fixture(autouse=True)
def _settled():
    # pools left to the cycle collector by earlier tests must not be
    # destroyed in the middle of a count
    gc.collect()
    yield


def test_arrays_keep_the_pool_alive_and_the_last_one_destroys_it():
    n0 = live_pools()
    pool = Pool()
    assert live_pools() == n0 + 1
    arrs = [pool.empty(n, np.uint8) for n in (10, 5000, 300_000, 3 << 20)]
    for i, a in enumerate(arrs):
        a.fill(i + 1)
    del a, pool
    gc.collect()
    assert live_pools() == n0 + 1  # the arrays hold it
    for i, a in enumerate(arrs):
        assert (a == i + 1).all()
        a[:] = 200
    del a
    view = arrs[2][100:200]
    del arrs
    gc.collect()
    assert live_pools() == n0 + 1  # the view holds its block, the block the pool
    assert (view == 200).all()
    del view
    assert live_pools() == n0


def test_close_twice_and_calls_after_close():
    n0 = live_pools()
    pool = Pool()
    a = pool.empty(100, np.int32)
    a[:] = 5
    pool.close()
    pool.close()
    assert "closed" in repr(pool)
    for call in (lambda: pool.empty(3), lambda: pool.stats(), lambda: pool.trim(),
                 lambda: pool.reclaim(), lambda: pool.check(), lambda: pool.walk(),
                 lambda: pool.set_limit(10), lambda: pool.free_all_blocks(),
                 lambda: pool.memory_stats(), lambda: pool.zeros(2)):
        with pytest.raises(StateError, match="closed"):
            call()
    assert not pool.owns(a)
    assert a.sum() == 500  # still valid
    assert live_pools() == n0 + 1
    del a
    assert live_pools() == n0


def test_context_manager_closes():
    with Pool() as pool:
        a = pool.full(4, 1.5)
    with pytest.raises(StateError):
        pool.empty(1)
    assert a.sum() == 6.0


def test_numpy_allocator_keeps_the_pool_alive():
    n0 = live_pools()
    pool = Pool()
    alloc = numpy_allocator(pool)
    del pool
    gc.collect()
    assert live_pools() == n0 + 1  # the handler holds it
    with alloc:
        x = np.ones(1000)
    del alloc
    gc.collect()
    assert live_pools() == n0 + 1  # x holds the handler, which holds the pool
    assert x.sum() == 1000
    del x
    gc.collect()
    assert live_pools() == n0


def test_pool_dropped_inside_the_allocator_block():
    n0 = live_pools()
    pool = Pool()
    with numpy_allocator(pool):
        del pool
        gc.collect()
        x = np.arange(10.0)
    assert x.sum() == 45.0
    del x
    gc.collect()
    assert live_pools() == n0


def test_pool_arrays_pickle_and_copy_as_plain_arrays():
    pool = Pool()
    a = pool.full((3, 4), 2, dtype=np.int16)
    b = pickle.loads(pickle.dumps(a))
    c = copy.deepcopy(a)
    d = a.copy()
    for x in (b, c, d):
        assert x.dtype == np.int16 and (x == 2).all() and not pool.owns(x)


def test_many_pools_come_and_go():
    n0 = live_pools()
    keep = []
    for i in range(50):
        p = Pool()
        keep.append(p.empty(1000, np.uint8))
        if i % 2:
            p.close()
    assert live_pools() == n0 + 50
    del keep, p
    gc.collect()
    assert live_pools() == n0


def _run(code, tmp_path):
    # the same pyarena as this process, whatever the working directory
    import os
    import pyarena
    root = os.path.dirname(os.path.dirname(os.path.abspath(pyarena.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=env)


def test_interpreter_exit_with_everything_alive(tmp_path):
    # Arrays, views, a closed and an open pool, NumPy arrays made through the
    # allocator, and the allocator still installed at exit: destructors must
    # neither crash nor print "Exception ignored".
    proc = _run("""
        import numpy as np, pyarena
        pool = pyarena.Pool(limit=64 << 20)
        keep = [pool.empty(n, np.uint8) for n in (1, 100, 70000, 3 << 20)]
        view = keep[2][10:]
        other = pyarena.Pool()
        orphan = other.zeros(10)
        other.close()
        alloc = pyarena.numpy_allocator(pool)
        alloc.__enter__()
        made = [np.ones(1000) * i for i in range(10)]
        print("ok", pool.used_bytes() > 0)
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok True"
    assert "Exception ignored" not in proc.stderr and "Error" not in proc.stderr


def test_interpreter_exit_with_arrays_in_module_globals_and_cycles(tmp_path):
    proc = _run("""
        import numpy as np, pyarena
        class Holder:
            pass
        h = Holder()
        h.self = h
        h.pool = pyarena.Pool()
        h.arr = h.pool.empty(1000)
        with pyarena.numpy_allocator(h.pool):
            h.np_arr = np.ones(100)
        print("ok")
    """, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "ok" and proc.stderr == ""


def test_no_reference_cycles_the_pool_goes_at_once():
    n0 = live_pools()
    gc.disable()
    try:
        pool = Pool()
        a = pool.empty(10)
        with pool.statistics():
            pool.empty(5)
        with numpy_allocator(pool):
            b = np.ones(3)
        pool.free(a)
        del pool, a, b
        assert live_pools() == n0  # by reference counting alone
    finally:
        gc.enable()
