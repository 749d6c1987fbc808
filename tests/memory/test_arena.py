"""Tests for pyarena.Arena: alignment, errors, lifetimes, marks."""
import gc
import weakref

import numpy as np
import pytest

import pyarena
from pyarena import Arena


def addr(a):
    return a.__array_interface__["data"][0]


def test_empty_is_aligned_c_contiguous_view():
    a = Arena()
    x = a.empty((3, 5), np.float32)
    assert x.shape == (3, 5) and x.dtype == np.float32
    assert x.flags.c_contiguous and x.flags.writeable
    assert x.ctypes.data % 64 == 0
    assert type(x) is np.ndarray
    assert a.owns(x)
    assert not a.owns(np.empty(3))


@pytest.mark.parametrize("alignment", [8, 16, 64, 256, 4096, 1 << 16])
def test_granularity(alignment):
    a = Arena(alignment=alignment)
    arrays = [a.empty(n, np.uint8) for n in (1, 7, 100, 5000, 0)]
    for x in arrays:
        assert addr(x) % alignment == 0
    assert a.stats().alignment == alignment


@pytest.mark.parametrize("align", [128, 4096, 1 << 20])
def test_per_allocation_alignment(align):
    a = Arena()
    a.empty(3, np.uint8)
    x = a.empty((10,), np.float64, align=align)
    assert addr(x) % align == 0


def test_zeros_full_asarray():
    a = Arena()
    z = a.zeros((4, 4), np.int32)
    assert not z.any() and z.dtype == np.int32
    f = a.full((2, 3), 7.5)
    assert f.dtype == np.float64 and (f == 7.5).all()
    src = np.arange(12, dtype=np.int16).reshape(3, 4)[:, ::2]  # non-contiguous
    c = a.asarray(src)
    assert c.flags.c_contiguous and np.array_equal(c, src) and a.owns(c)
    assert a.asarray([1.0, 2.0], dtype=np.float32).dtype == np.float32


def test_every_dtype_and_zero_size():
    a = Arena()
    for dt in [np.bool_, np.int8, np.uint16, np.int32, np.int64, np.float16,
               np.float32, np.float64, np.complex64, np.complex128, "S5",
               np.dtype([("x", np.float32), ("y", np.int8)])]:
        x = a.empty((3, 2), dt)
        assert x.dtype == np.dtype(dt) and addr(x) % 64 == 0
    e = a.empty((0, 5))
    assert e.size == 0 and e.shape == (0, 5)
    s = a.empty(())
    assert s.shape == () and s.size == 1


def test_stats_account_for_padding():
    a = Arena()
    a.empty(10, np.uint8)
    a.empty(100, np.uint8)
    st = a.stats()
    assert st.requested == 110
    assert st.used == 64 + 128
    assert st.padding == st.used - st.requested
    assert st.count == 2 and st.peak >= st.used
    assert 0 < st.padding_ratio < 1
    assert st.as_dict()["requested"] == 110
    assert a.check() == 0


# -- errors ----------------------------------------------------------------
@pytest.mark.parametrize("bad", [3, 0, -64, 24, 2 ** 31, 1.5, "64"])
def test_bad_arena_alignment(bad):
    with pytest.raises(ValueError, match=repr(bad).replace("(", r"\(").replace(".", r"\.")):
        Arena(alignment=bad)


@pytest.mark.parametrize("bad", [3, 48, -8, 0, 2 ** 31])
def test_bad_allocation_alignment(bad):
    a = Arena()
    with pytest.raises(pyarena.AlignmentError, match=str(bad)):
        a.empty(4, align=bad)


def test_negative_and_overflowing_sizes():
    a = Arena()
    with pytest.raises(ValueError, match="negative"):
        a.empty((-1, 4))
    with pytest.raises(ValueError, match="negative"):
        a.empty((-2, -4))
    with pytest.raises(ValueError, match="bytes"):
        a.empty((2 ** 40, 2 ** 40))
    with pytest.raises(TypeError, match="shape"):
        a.empty("abc")
    with pytest.raises(TypeError, match="shape"):
        a.empty((2.5, 3))
    assert a.stats().count == 0


def test_unknown_and_object_dtypes():
    a = Arena()
    with pytest.raises(TypeError, match="not_a_dtype"):
        a.empty(3, "not_a_dtype")
    with pytest.raises(TypeError, match="object"):
        a.empty(3, object)


def test_out_of_memory_carries_facts():
    a = Arena(1 << 20, growth="none")
    a.empty(1000, np.uint8)
    with pytest.raises(pyarena.OutOfMemoryError) as ei:
        a.empty(2 << 20, np.uint8)
    e = ei.value
    assert isinstance(e, MemoryError)
    assert e.size == 2 << 20
    assert e.used == 1024
    assert e.capacity is not None and e.capacity <= 1 << 20
    assert "2,097,152" in str(e)
    # the arena still works after the failure
    assert a.empty(10).size == 10
    assert a.check() == 0


def test_capacity_limits_growth():
    a = Arena(256 << 10, chunk_size=64 << 10)
    total = 0
    with pytest.raises(pyarena.OutOfMemoryError):
        while True:
            a.empty(10000, np.uint8)
            total += 10000
    assert a.stats().reserved <= 256 << 10
    assert total > 100 << 10


def test_bad_constructor_arguments():
    with pytest.raises(ValueError, match="growth"):
        Arena(growth="sideways")
    with pytest.raises(ValueError, match="capacity"):
        Arena(growth="none")
    with pytest.raises(ValueError, match="capacity"):
        Arena(-5)
    with pytest.raises(ValueError, match="chunk_size"):
        Arena(chunk_size=0)


def test_huge_allocation_fails_cleanly():
    a = Arena()
    with pytest.raises(MemoryError):
        a.empty(1 << 62, np.uint8)


# -- growth ----------------------------------------------------------------
@pytest.mark.parametrize("growth", ["pow2", "requested"])
def test_growth_policies(growth):
    a = Arena(chunk_size=64 << 10, growth=growth)
    arrays = [a.full(20000, i, np.uint8) for i in range(40)]
    st = a.stats()
    assert st.chunks > 1
    for i, x in enumerate(arrays):
        assert (x == i).all()
    if growth == "requested":
        assert st.reserved < 2 * 40 * 20480 + (64 << 10)
    assert a.check() == 0


# -- caller-provided memory --------------------------------------------------
def test_over_caller_buffer():
    mem = np.zeros(10000, np.uint8)
    a = Arena(buffer=mem)
    x = a.full(100, 3, np.uint8)
    lo = addr(mem)
    assert lo <= addr(x) < lo + mem.size
    assert (mem == 3).sum() == 100
    with pytest.raises(pyarena.OutOfMemoryError):
        a.empty(20000, np.uint8)
    with pytest.raises(TypeError, match="writable"):
        Arena(buffer=b"read-only bytes")
    with pytest.raises(ValueError):
        Arena(buffer=bytearray(10), alignment=64)


def test_caller_buffer_kept_alive():
    a = Arena(buffer=bytearray(4096))
    x = a.full(10, 1, np.uint8)
    del a
    gc.collect()
    assert (x == 1).all()


# -- marks, rewind, reset ------------------------------------------------------
def test_mark_context_manager_rewinds():
    a = Arena()
    w = a.full(10, 1.0)
    used = a.stats().used
    with a.mark():
        t = a.empty((100, 100))
        t.fill(2)
        assert a.stats().used > used
        del t
    assert a.stats().used == used
    assert (w == 1.0).all()


def test_rewind_refuses_while_referenced():
    a = Arena()
    m = a.mark()
    x = a.empty(100)
    with pytest.raises(pyarena.StateError, match="still referenced"):
        a.rewind(m)
    view = x[10:20]
    del x
    with pytest.raises(pyarena.StateError):
        a.rewind(m)  # a view keeps the block in use
    del view
    a.rewind(m)
    assert a.stats().count == 0


def test_reset_refuses_while_referenced_unless_forced():
    a = Arena()
    x = a.empty(100)
    with pytest.raises(pyarena.StateError):
        a.reset()
    a.reset(force=True)
    y = a.full(100, 9.0)  # reuses x's memory: documented for force=True
    assert addr(y) == addr(x)
    assert (x == 9.0).all()
    with pytest.raises(pyarena.StateError, match="trim"):
        a.trim()
    del x
    a.trim()


def test_marks_are_a_stack():
    a = Arena()
    m1 = a.mark()
    a.empty(10)
    m2 = a.mark()
    gc.collect()
    a.rewind(m1)
    with pytest.raises(pyarena.StateError, match="stale"):
        a.rewind(m2)
    a.rewind(m1)  # rewinding to the same mark again is fine
    a.reset()
    with pytest.raises(pyarena.StateError, match="stale"):
        a.rewind(m1)
    with pytest.raises(ValueError):
        a.rewind("not a mark")
    b = Arena()
    with pytest.raises(ValueError, match="belong"):
        b.rewind(a.mark())


def test_a_forgotten_mark_keeps_what_followed_it_and_cannot_be_rewound_to():
    a = Arena()
    m = a.mark()
    x = a.full((16,), 3.0)
    used = a.stats().used
    a.forget(m)
    with pytest.raises(pyarena.StateError, match="stale"):
        a.rewind(m)
    assert a.stats().used == used and (x == 3.0).all()
    a.forget(m)                 # forgetting twice, or another arena's mark: no-op
    Arena().forget(a.mark())


def test_exception_inside_mark_block_still_rewinds():
    a = Arena()
    with pytest.raises(KeyError):
        with a.mark():
            a.empty(1000)
            raise KeyError("boom")
    assert a.stats().count == 0


def test_rewind_keeps_spare_chunk_and_trim_releases_it():
    a = Arena(chunk_size=64 << 10)
    with a.mark():
        a.empty(1 << 20, np.uint8)
    st = a.stats()
    assert st.spare > 0 and st.chunks == 1
    with a.mark():
        a.empty(1 << 20, np.uint8)  # served from the spare
    assert a.stats().reserved == st.reserved
    freed = a.trim()
    assert freed == st.spare
    assert a.stats().spare == 0


# -- lifetimes ---------------------------------------------------------------
def test_array_keeps_arena_alive():
    a = Arena()
    x = a.full(1000, 5, np.int64)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None
    assert (x == 5).all()
    x[:] = 6
    assert x.sum() == 6000


def test_close_twice_and_use_after_close():
    a = Arena()
    x = a.full(10, 1.0)
    a.close()
    a.close()
    assert (x == 1.0).all()
    with pytest.raises(pyarena.StateError, match="closed"):
        a.empty(3)
    with pytest.raises(pyarena.StateError):
        a.stats()
    assert "closed" in repr(a)


def test_context_manager_closes():
    with Arena() as a:
        x = a.full(3, 2.0)
    assert (x == 2.0).all()
    with pytest.raises(pyarena.StateError):
        a.mark()


def test_reference_cycle_is_collected():
    a = Arena()
    x = a.empty(10)
    a.cycle = a
    x_ref = weakref.ref(a)
    del a
    gc.collect()
    assert x_ref() is None
    x[:] = 1
    assert x.sum() == 10


def test_repr_mentions_usage():
    a = Arena()
    a.empty(100, np.uint8)
    assert "used=128" in repr(a)


# -- the native hot path -------------------------------------------------------
def test_fast_path_is_built_and_used():
    from pyarena._native import glue
    a = Arena()
    assert type(a.empty.__self__).__name__ == "Empty"        # the native call
    assert type(a.empty.__self__).__module__ == glue.__name__
    assert a.empty is not Arena.empty
    # the documented method and the native one agree
    x = Arena.empty(a, (2, 3), np.float32, 128)
    assert x.shape == (2, 3) and x.ctypes.data % 128 == 0 and a._records[-1] is x


@pytest.mark.parametrize("call", [
    lambda a: a.empty((2, 3)),
    lambda a: a.empty((2, 3), np.float32),
    lambda a: a.empty((2, 3), "float32"),
    lambda a: a.empty([2, 3], np.float32),
    lambda a: a.empty((np.int64(2), 3), np.float32),
    lambda a: a.empty(6, dtype=np.float32),
    lambda a: a.empty((2, 3), np.float32, 256),
    lambda a: a.empty(shape=(2, 3), dtype=np.float32, align=128),
])
def test_fast_and_slow_paths_agree(call):
    a = Arena()
    x = call(a)
    assert x.size == 6 and x.flags.c_contiguous
    assert x.ctypes.data % 64 == 0 and a.owns(x)
    assert a.stats().count == 1
    m = a._records[-1]
    assert m is x


def test_fast_path_errors_come_from_the_slow_path():
    a = Arena()
    with pytest.raises(ValueError, match="negative"):
        a.empty((3, -1))
    with pytest.raises(ValueError, match="negative"):
        a.empty(-1)
    with pytest.raises(TypeError, match="object"):
        a.empty(3, object)
    with pytest.raises(ValueError, match="bytes"):
        a.empty((1 << 40, 1 << 40), np.uint8)
    with pytest.raises(TypeError, match="unknown dtype"):
        a.empty(3, "float33")
    assert a.stats().count == 0


def test_fast_path_follows_new_chunks():
    a = Arena(chunk_size=64 << 10, growth="requested")
    arrays = [a.full(3000 + i, i % 250, np.uint8) for i in range(300)]
    assert a.stats().chunks > 5
    for i, x in enumerate(arrays):
        assert a.owns(x) and x.ctypes.data % 64 == 0
        assert (x == i % 250).all()
    a.trim()
    y = a.empty(10)
    assert a.owns(y)


def test_temporary_arena_method_keeps_the_arena_alive():
    # `Arena().empty` drops the last reference to the Arena before the call:
    # the bound fast path must keep it (and its C memory) alive.
    x = Arena().empty(3)
    x[:] = 1.0
    e = Arena().empty
    gc.collect()
    y = e((4, 4), np.float32)
    y.fill(2)
    z = e(1 << 20, np.uint8)   # forces a new chunk through the callback
    z[:] = 3
    assert x.sum() == 3 and y.sum() == 32 and int(z.sum()) == 3 << 20


def test_dropped_arena_is_collected_with_its_fast_path():
    from pyarena._native import glue
    n0 = glue.live_handles(glue.ARENA)
    a = Arena()
    x = a.empty(10)
    ref = weakref.ref(a)
    del a
    gc.collect()
    assert ref() is None
    assert glue.live_handles(glue.ARENA) == n0 + 1    # x holds the C arena
    del x
    assert glue.live_handles(glue.ARENA) == n0        # destroyed with its last array


def test_marks_in_later_chunks():
    """A mark taken in the second chunk, the arena grown to five chunks:
    rewinding returns to the mark's chunk and position (used bytes, block
    count, the next address), twice."""
    a = Arena(chunk_size=8192, growth="requested")
    while a.stats().chunks < 2:
        a.empty(1024, np.uint8)
    m = a.mark()
    at_mark = a.stats()
    x = a.empty(1024, np.uint8)
    where = x.ctypes.data
    del x
    blocks = []
    while a.stats().chunks < 5:
        blocks.append(a.empty(1024, np.uint8))
    assert a.stats().used == at_mark.used + 1024 * (len(blocks) + 1)
    del blocks
    for _ in range(2):
        a.rewind(m)
        st = a.stats()
        assert (st.chunks, st.used, st.count) == (2, at_mark.used, at_mark.count)
        y = a.empty(1024, np.uint8)
        assert y.ctypes.data == where
        del y
    assert a.check() == 0
