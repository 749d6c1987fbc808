"""``CallList`` (``pa_calls_run``): block copies between NumPy views of any
layout give ``np.copyto``'s result, views that are no equally spaced
blocks are refused (None: the caller copies them itself), and a failing
call raises an error naming the call and leaves the calls after it
unrun.  Records packed as their ``pa_call_t`` bytes (``pack_call``, a
patched stage's) make the same list as the tuples."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from pyarena._native import ffi
from pyarena._native.kernels import CallList, _blocks, act_params, copy_call, fptr, pack_call
from pyarena.errors import InvalidArgumentError


def _slice(draw, shape):
    sl = []
    for d in shape:
        a = draw(st.integers(0, d - 1))
        b = draw(st.integers(a + 1, d))
        sl.append(slice(a, b))
    return tuple(sl)


@settings(max_examples=200, deadline=None)
@given(st.data())
def test_a_copy_call_gives_copyto(data):
    shape = tuple(data.draw(st.lists(st.integers(1, 5), min_size=1, max_size=4)))
    src_base = np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    dst_base = np.full(shape, -1.0, np.float32)
    sl = _slice(data.draw, shape)
    src = src_base[sl]
    dst = dst_base[sl] if data.draw(st.booleans()) else np.full(src.shape, -1.0, np.float32)
    rec = copy_call(dst, src)
    expect = dst_base.copy() if dst.base is dst_base else None
    if rec is None:     # refused only where a slice has two strides
        assert any(s.start or s.stop < d for s, d in zip(sl[:-1], shape[:-1]))
        return
    CallList([rec]).run(None, "copy")
    np.testing.assert_array_equal(dst, src)
    if expect is not None:      # nothing outside the slice was written
        expect[sl] = src
        np.testing.assert_array_equal(dst_base, expect)


def test_row_slices_of_nchw_are_one_strided_copy():
    """The staging copy of a patched NCHW band: channels x (rows x W)."""
    x = np.arange(2 * 3 * 10 * 4, dtype=np.float32).reshape(1, 6, 10, 4)
    assert _blocks(x[:, :, 2:5]) == (6, 3 * 4 * 4, 10 * 4 * 4)
    assert _blocks(x) == (1, x.nbytes, 0)
    assert _blocks(x[..., 1:3]) == (60, 8, 16)
    assert _blocks(x[:, :, 2:5, 1:3]) is None       # two strides: not one call
    # a contiguous side is split as the other side is: rows x W per channel
    rec = copy_call(np.empty((1, 6, 3, 4), np.float32), x[:, :, 2:5])
    assert rec[-1] == (6, 3 * 4 * 4, 10 * 4 * 4, 3 * 4 * 4)
    assert copy_call(np.empty((2, 2), np.float32), np.empty((2, 3), np.float32)) is None
    assert copy_call(np.empty(3, np.float64), np.empty(3, np.float32)) is None


def test_a_failing_call_raises_and_stops_the_list():
    x = np.linspace(-1, 1, 16, dtype=np.float32)
    y, z = np.zeros_like(x), np.full_like(x, 5.0)
    relu = act_params("RELU")
    ok = ("act", relu, None, fptr(x), None, fptr(y), (16,))
    bad = ("act", relu, None, None, None, fptr(y), (16,))       # NULL input
    after = ("act", relu, None, fptr(x), None, fptr(z), (16,))
    with pytest.raises(InvalidArgumentError, match=r"call 1 \(act\)"):
        CallList([ok, bad, after]).run(None, "the list")
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    np.testing.assert_array_equal(z, 5.0)


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_packed_records_make_the_same_list_as_tuples(data):
    """``pack_call`` then ``CallList``: the same ``pa_call_t`` bytes, kinds
    and results as the records given as tuples (copies, and an activation
    with a descriptor, addresses as ints)."""
    x = np.linspace(-1, 1, 24, dtype=np.float32).reshape(2, 3, 4)
    y, z = np.empty((2, 3, 4), np.float32), np.empty(24, np.float32)
    recs = []
    for _ in range(data.draw(st.integers(1, 4), label="copies")):
        a, b = sorted(data.draw(st.lists(st.integers(0, 3), min_size=2, max_size=2),
                                label="rows"))
        recs.append(copy_call(y[:, :, a:b + 1], x[:, :, a:b + 1]))
    relu = act_params("RELU")
    recs.append(("act", relu, None, x.__array_interface__["data"][0], None, z, (24,)))
    out = {}
    for packed in (False, True):
        y.fill(7.0)
        z.fill(0.0)
        calls = CallList([pack_call(r) for r in recs] if packed else recs, hold=(x, z))
        calls.run(None, "the list")
        out[packed] = (bytes(ffi.buffer(calls.arr)), calls.kinds, y.copy(), z.copy())
    assert out[True][0] == out[False][0]
    assert out[True][1] == out[False][1] == ["copy"] * (len(out[True][1]) - 1) + ["act"]
    for k in (2, 3):
        np.testing.assert_array_equal(out[True][k], out[False][k])
    np.testing.assert_array_equal(out[True][3], np.maximum(x.ravel(), 0))
