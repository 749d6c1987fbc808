"""The native glue (pyarena/_native/glue.c): one shape parser and one
lifetime scheme for the Arena and the Pool, so both answer alike."""
import gc

import numpy as np
import pytest

from pyarena import AlignmentError, Arena, InvalidArgumentError, Pool, StateError
from pyarena._native import glue


@pytest.fixture(params=["arena", "pool"])
def alloc(request):
    a = Arena() if request.param == "arena" else Pool()
    yield a
    a.close()


@pytest.mark.parametrize("shape, expect", [
    (5, (5,)), ((), ()), ((2, 3), (2, 3)), ([2, 3], (2, 3)), ((np.int64(2), 3), (2, 3)),
    (np.int32(4), (4,)), (range(1, 4), (1, 2, 3)), ((0, 1 << 62), (0, 1 << 62)),
])
def test_shapes_both_allocators_accept(alloc, shape, expect):
    x = alloc.empty(shape, np.uint8)
    assert x.shape == expect and x.dtype == np.uint8 and x.flags.c_contiguous


@pytest.mark.parametrize("shape, error, match", [
    (2.0, TypeError, "sequence of ints"),
    ((2, 3.5), TypeError, "sequence of ints"),
    ("ab", TypeError, "sequence of ints"),
    (None, TypeError, "sequence of ints"),
    ((2, -1), InvalidArgumentError, "negative dimension"),
    (-3, InvalidArgumentError, "negative dimension"),
    ((1,) * 65, InvalidArgumentError, "dimensions"),
    ((1 << 40, 1 << 40), InvalidArgumentError, "bytes"),
    # the product wraps before the last dimension, which multiplies cleanly
    ((1 << 40, 1 << 40, 1), InvalidArgumentError, "more bytes"),
    ((1 << 70,), InvalidArgumentError, "bytes"),
])
def test_bad_shapes_get_the_same_error_from_both(alloc, shape, error, match):
    before = alloc.stats()
    with pytest.raises(error, match=match):
        alloc.empty(shape, np.float32)
    after = alloc.stats()
    # nothing was allocated on the way to the error
    used = (lambda s: s.used) if isinstance(alloc, Arena) else (lambda s: s.allocated)
    assert used(after) == used(before)


@pytest.mark.parametrize("align, error", [
    (3, AlignmentError), (0, AlignmentError), (-64, AlignmentError), (1 << 31, AlignmentError),
    ("64", InvalidArgumentError), (63.5, AlignmentError),
])
def test_bad_alignments(alloc, align, error):
    with pytest.raises(error):
        alloc.empty(8, np.uint8, align=align)


@pytest.mark.parametrize("align", [None, 1, 64, 256, 4096, 1 << 16])
def test_alignment_is_honoured_by_both(alloc, align):
    # a block of the same size first: the first block of a fresh slab or
    # chunk is page aligned anyway and would pass without the alignment
    fillers = [alloc.empty(n, np.uint8) for n in (1, 100, 5000)]
    xs = [alloc.empty(n, np.uint8, align=align) for n in (1, 100, 5000)]
    assert not {x.ctypes.data for x in xs} & {f.ctypes.data for f in fillers}
    for x in xs:
        assert x.ctypes.data % (align or alloc.alignment) == 0
        x[:] = 7
    assert all((x == 7).all() for x in xs)


def test_pool_aligned_block_is_freed_whole():
    pool = Pool()
    x = pool.empty(1000, np.uint8, align=1 << 16)
    assert x.ctypes.data % (1 << 16) == 0
    live = pool.stats().live
    pool.free(x)
    assert pool.stats().live == live - 1 and pool.check() == 0


def test_unknown_and_object_dtypes(alloc):
    with pytest.raises(TypeError, match="unknown dtype"):
        alloc.empty(3, "float33")
    with pytest.raises(TypeError, match="Python objects"):
        alloc.empty(3, object)
    with pytest.raises(TypeError, match="Python objects"):
        alloc.empty(3, np.dtype(object))
    x = alloc.empty(2, [("a", "<i4"), ("b", "<f8")])     # an unhashable spec
    assert x.dtype.names == ("a", "b")


def test_arrays_hold_their_allocator_until_the_last_one_dies():
    for make, kind in ((Arena, glue.ARENA), (Pool, glue.POOL)):
        gc.collect()
        n0 = glue.live_handles(kind)
        a = make()
        x = a.empty(10, np.float32)
        v = x[2:5]
        del x
        a.close()
        del a
        gc.collect()
        assert glue.live_handles(kind) == n0 + 1, make   # the view holds it
        v[:] = 1.0
        del v
        assert glue.live_handles(kind) == n0, make


def test_kept_bound_empty_refuses_after_close(alloc):
    e = alloc.empty
    assert e(3).shape == (3,)
    alloc.close()
    with pytest.raises(StateError, match="closed"):
        e(3)


def test_handles_reject_bad_arguments():
    with pytest.raises(ValueError):
        glue.handle(7, 1234)
    with pytest.raises(TypeError):
        glue.pool_counters(object())
    with pytest.raises(TypeError):
        glue.handler_new(Arena()._hcap)      # NumPy's allocator needs a pool


def test_each_c_status_maps_to_its_documented_error():
    # the hierarchy of pyarena/errors.py's docstring, one C status each;
    # the message names the call and the C library's text for the status
    from pyarena import errors
    from pyarena._native import lib, status_error, status_name
    expect = {
        lib.PA_ERR_INVALID: errors.InvalidArgumentError,
        lib.PA_ERR_ALIGN: errors.AlignmentError,
        lib.PA_ERR_OVERFLOW: errors.InvalidArgumentError,
        lib.PA_ERR_NOMEM: MemoryError,
        lib.PA_ERR_STATE: errors.StateError,
        lib.PA_ERR_DOUBLE_FREE: errors.DoubleFreeError,
        lib.PA_ERR_FOREIGN: errors.ForeignPointerError,
        lib.PA_ERR_INFEASIBLE: errors.PlanInfeasibleError,
        lib.PA_ERR_TIMEOUT: errors.PlanInfeasibleError,
    }
    for status, cls in expect.items():
        exc = status_error(status, "the call")
        assert type(exc) is cls, (status, type(exc), cls)
        assert str(exc) == f"the call: {status_name(status)}"
    assert type(status_error(12345, "x")) is errors.PyArenaError
