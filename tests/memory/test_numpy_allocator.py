import gc
import threading

import numpy as np
import pytest

import pyarena
from pyarena import Pool, StateError, DoubleFreeError, numpy_allocator

try:
    from numpy._core.multiarray import get_handler_name
except ImportError:  # NumPy 1.x
    from numpy.core.multiarray import get_handler_name

MiB = 1 << 20
DEFAULT = get_handler_name()


def test_every_kind_of_allocation_is_routed():
    pool = Pool()
    a0 = np.ones(1000)
    with numpy_allocator(pool) as alloc:
        assert get_handler_name() == "pyarena_pool"
        made = {
            "empty": np.empty((10, 10)),
            "zeros": np.zeros(100, np.int32),
            "ufunc": a0 * 2.0,
            "concatenate": np.concatenate([a0, a0]),
            "matmul": np.ones((8, 4)) @ np.ones((4, 8)),
            "copy": a0.copy(),
            "astype": a0.astype(np.float32),
        }
    assert get_handler_name() == DEFAULT
    for name, x in made.items():
        assert pool.owns(x), name
        assert get_handler_name(x) == "pyarena_pool", name
    assert not pool.owns(a0)
    assert (made["ufunc"] == 2.0).all() and made["matmul"][0, 0] == 4.0
    assert alloc.allocations >= len(made)
    assert pool.stats().live >= len(made)


def test_counters_are_exact_and_in_place_work_allocates_nothing():
    pool = Pool()
    with numpy_allocator(pool) as alloc:
        n0, b0 = alloc.allocations, alloc.bytes
        x = np.empty(1000, np.uint8)
        assert alloc.allocations == n0 + 1 and alloc.bytes == b0 + 1000
        a = np.ones(256, np.float32)
        b = np.ones(256, np.float32)
        half = np.full(256, 0.5, np.float32)
        out = np.empty(256, np.float32)
        n1 = alloc.allocations
        for _ in range(10):
            np.add(a, b, out=out)
            np.multiply(out, half, out=out)
        assert alloc.allocations == n1  # zero data allocations per "inference"
    frees0 = alloc.frees
    del x
    assert alloc.frees == frees0 + 1
    assert set(alloc.counts()) == {"allocations", "bytes", "reallocations", "frees",
                                   "failures"}


def test_arrays_outlive_the_context_and_return_to_the_pool():
    pool = Pool()
    with numpy_allocator(pool) as alloc:
        x = np.arange(100_000, dtype=np.float64)
        v = x[10:20]
    live = pool.stats().live
    assert live >= 1
    del x
    assert v.sum() == sum(range(10, 20))  # the view keeps the block
    frees = alloc.frees
    del v
    assert alloc.frees == frees + 1
    assert pool.stats().live == live - 1


def test_views_outlive_the_pool_and_the_allocator():
    pool = Pool()
    with numpy_allocator(pool):
        x = np.full(5000, 3.0)
    v = x[::2]
    del x
    pool.close()
    del pool
    gc.collect()
    assert v.shape == (2500,) and (v == 3.0).all()
    v[:] = 4.0
    assert v.sum() == 4.0 * 2500
    del v  # the handler frees into the C pool, which is then destroyed


@pytest.mark.parametrize("code", [c for c in np.typecodes["All"] if c not in "O"])
def test_every_dtype(code):
    pool = Pool()
    dt = np.dtype(code)
    if dt.itemsize == 0 and dt.kind in "SUV":
        dt = np.dtype(code + "3")
    elif dt.kind in "mM":
        dt = np.dtype(code + "8[s]")
    with numpy_allocator(pool):
        z = np.zeros(7, dt)
        e = np.empty((3, 4), dt)
    assert pool.owns(z) and pool.owns(e)
    assert z.tobytes() == bytes(z.nbytes)
    src = np.zeros((3, 4), dt)
    e[...] = src
    assert e.tobytes() == src.tobytes()


def test_zero_size_arrays():
    pool = Pool()
    with numpy_allocator(pool):
        a = np.empty(0)
        b = np.zeros((3, 0, 2), np.int8)
        c = np.concatenate([a, a])
    for x in (a, b, c):
        assert x.size == 0 and pool.owns(x)
    assert pool.check() == 0


def test_calloc_zeroes_recycled_blocks():
    pool = Pool()
    with numpy_allocator(pool):
        for _ in range(3):
            d = np.empty(4096, np.uint8)
            d.fill(255)
            del d
            z = np.zeros(4096, np.uint8)
            assert not z.any()
            del z


def test_resize_goes_through_realloc():
    pool = Pool()
    with numpy_allocator(pool) as alloc:
        a = np.arange(10, dtype=np.int64)
        r0 = alloc.reallocations
        a.resize(100_000, refcheck=False)
        assert alloc.reallocations == r0 + 1
        a.resize(5, refcheck=False)
    assert a.tolist() == [0, 1, 2, 3, 4]
    assert pool.owns(a) and pool.check() == 0


def test_big_arrays():
    pool = Pool()
    with numpy_allocator(pool) as alloc:
        big = np.ones(64 * MiB // 8)
        s = big.sum()
    assert s == big.size and pool.owns(big)
    assert alloc.bytes >= 64 * MiB
    assert pool.used_bytes() >= 64 * MiB
    del big
    assert pool.used_bytes() < MiB


def test_absurd_sizes_fail_cleanly():
    pool = Pool()
    with numpy_allocator(pool) as alloc:
        with pytest.raises(MemoryError):
            np.empty(2 ** 62, np.uint8)
        assert alloc.failures >= 1
        # float64: NumPy's own size check or our NULL, never a crash
        with pytest.raises((MemoryError, ValueError)):
            np.empty(2 ** 62)
        with pytest.raises((MemoryError, ValueError)):
            np.empty((2 ** 31, 2 ** 31, 4), np.uint8)
        ok = np.ones(10)
    assert ok.sum() == 10 and pool.check() == 0


def test_limit_makes_numpy_raise_memory_error():
    pool = Pool(limit=2 * MiB)
    with numpy_allocator(pool) as alloc:
        a = np.empty(MiB, np.uint8)
        with pytest.raises(MemoryError):
            np.empty(3 * MiB, np.uint8)
    assert alloc.failures == 1
    ms = pool.memory_stats()
    assert ms["num_ooms"] == 1 and ms["num_alloc_retries"] == 1
    del a


def test_other_threads_do_not_see_the_handler():
    pool = Pool()
    seen = {}

    def other():
        seen["name"] = get_handler_name()
        x = np.empty(100)
        seen["owned"] = pool.owns(x)

    with numpy_allocator(pool):
        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert get_handler_name() == "pyarena_pool"
    assert seen == {"name": DEFAULT, "owned": False}


def test_a_threads_handler_does_not_leak_out():
    pool = Pool()
    inside = threading.Event()
    leave = threading.Event()
    seen = {}

    def worker():
        with numpy_allocator(pool):
            seen["thread"] = pool.owns(np.empty(10))
            inside.set()
            leave.wait(5)

    t = threading.Thread(target=worker)
    t.start()
    inside.wait(5)
    seen["main_name"] = get_handler_name()
    seen["main"] = pool.owns(np.empty(10))
    leave.set()
    t.join()
    assert seen == {"thread": True, "main_name": DEFAULT, "main": False}


def test_nesting_restores_each_level():
    p1, p2 = Pool(), Pool()
    al1 = numpy_allocator(p1)
    with al1:
        a = np.empty(10)
        with numpy_allocator(p2):
            b = np.empty(10)
            with al1:  # re-entering the same allocator object
                c = np.empty(10)
            d = np.empty(10)
        e = np.empty(10)
    f = np.empty(10)
    assert [p1.owns(x) for x in (a, b, c, d, e, f)] == [1, 0, 1, 0, 1, 0]
    assert [p2.owns(x) for x in (a, b, c, d, e, f)] == [0, 1, 0, 1, 0, 0]
    assert get_handler_name() == DEFAULT


def test_restored_after_an_exception():
    pool = Pool()
    with pytest.raises(KeyError):
        with numpy_allocator(pool):
            raise KeyError("boom")
    assert get_handler_name() == DEFAULT


def test_pool_free_of_numpy_made_arrays():
    pool = Pool()
    with numpy_allocator(pool):
        x = np.ones(1000)
        y = x[5:]
    with pytest.raises(StateError):
        pool.free(x)
    del y
    live = pool.stats().live
    pool.free(x)
    assert x.shape == (0,)
    assert pool.stats().live == live - 1
    with pytest.raises(DoubleFreeError):
        pool.free(x)
    other = Pool()
    with numpy_allocator(other):
        z = np.ones(3)
    with pytest.raises(pyarena.ForeignPointerError):
        pool.free(z)


def test_bad_arguments():
    with pytest.raises(TypeError):
        numpy_allocator("pool")
    pool = Pool()
    pool.close()
    with pytest.raises(StateError):
        numpy_allocator(pool)


def test_allocator_made_before_close_keeps_the_pool_alive():
    pool = Pool()
    alloc = numpy_allocator(pool)
    pool.close()
    with alloc:
        x = np.arange(1000.0)
    assert x.sum() == 499500.0 and alloc.allocations >= 1


def test_the_setting_is_a_context_variable():
    import contextvars
    pool = Pool()
    outside = contextvars.copy_context()
    with numpy_allocator(pool):
        inside = contextvars.copy_context()  # what an asyncio task started here gets
        assert not pool.owns(outside.run(np.empty, 10))
    assert pool.owns(inside.run(np.empty, 10))
    assert not pool.owns(np.empty(10))


@pytest.mark.slow
@pytest.mark.timeout(600)     # ~10 s here
def test_numpys_own_tests_pass_with_every_allocation_in_a_pool(tmp_path):
    import os
    import subprocess
    import sys
    import textwrap
    mods = ["test_regression", "test_numeric"]
    pkg = "numpy._core.tests" if hasattr(np, "_core") else "numpy.core.tests"
    code = textwrap.dedent(f"""
        import sys, numpy as np, pyarena, pytest
        pool = pyarena.Pool()
        alloc = pyarena.numpy_allocator(pool)
        alloc.__enter__()
        rc = pytest.main(["--pyargs", *{[pkg + "." + m for m in mods]!r}, "-q",
                          "-p", "no:cacheprovider", "-x"])
        print("ROUTED", alloc.allocations, "CHECK", pool.check())
        sys.exit(int(rc))
    """)
    # the same pyarena as this process, run outside the source tree
    root = os.path.dirname(os.path.dirname(os.path.abspath(pyarena.__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=540, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    routed = int(proc.stdout.split("ROUTED")[1].split()[0])
    assert routed > 100_000
    assert "CHECK 0" in proc.stdout


def test_exiting_out_of_order_is_refused_and_changes_nothing():
    """An outer block exited while an inner one is active: StateError, the
    inner pool still in force; after both exit in order NumPy is back on
    its own allocator (nothing more comes from either pool)."""
    import numpy as np

    from pyarena import Pool, numpy_allocator
    from pyarena.errors import StateError
    p1, p2 = Pool(), Pool()
    a, b = numpy_allocator(p1), numpy_allocator(p2)
    a.__enter__()
    b.__enter__()
    with pytest.raises(StateError, match="reverse order"):
        a.__exit__(None, None, None)
    before = b.allocations
    x = np.empty(1000)
    assert b.allocations == before + 1               # still the inner pool
    del x
    b.__exit__(None, None, None)
    a.__exit__(None, None, None)
    n1, n2 = a.allocations, b.allocations
    y = np.empty(1000)
    assert (a.allocations, b.allocations) == (n1, n2)
    del y
    with pytest.raises(StateError, match="exit without enter"):
        a.__exit__(None, None, None)
