"""A float32 Add of rows broadcast against a matrix in C
(runtime/kernels/row_add.py): NumPy's bits, the shapes it takes and
those it leaves to NumPy, and the Add kernel against onnxruntime."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor
from pyarena.runtime.kernels.row_add import RowAdd, row_plan


@pytest.mark.parametrize("a, b, y, plan", [
    ((4, 1, 8), (1, 3, 8), (4, 3, 8), (False, 4, 3, 8)),
    ((1, 3, 8), (4, 1, 8), (4, 3, 8), (True, 4, 3, 8)),
    ((1, 4, 1, 8), (1, 1, 3, 8), (1, 4, 3, 8), (False, 4, 3, 8)),
    ((8,), (5, 8), (5, 8), (False, 1, 5, 8)),
    ((5, 8), (8,), (5, 8), (True, 1, 5, 8)),
    ((2, 1, 1, 8), (3, 4, 8), (2, 3, 4, 8), (False, 2, 12, 8)),
])
def test_plans_of_row_shapes(a, b, y, plan):
    assert row_plan(a, b, y) == plan


@pytest.mark.parametrize("a, b, y", [
    ((4, 3, 8), (4, 3, 8), (4, 3, 8)),      # one shape: pa_add's case
    ((4, 1, 1), (1, 3, 8), (4, 3, 8)),      # rows broadcast on the last axis
    ((4, 3, 1), (1, 3, 8), (4, 3, 8)),
    ((1, 3, 8), (4, 3, 1), (4, 3, 8)),
    ((4, 1, 8), (1, 3, 1), (4, 3, 8)),
    ((4, 3, 8), (4, 1, 8), (4, 3, 8)),      # the rows inside the matrix's axes
    ((0, 1, 8), (1, 3, 8), (0, 3, 8)),
])
def test_other_shapes_have_no_plan(a, b, y):
    assert row_plan(a, b, y) is None


@st.composite
def row_cases(draw):
    lead = draw(st.lists(st.integers(1, 4), min_size=0, max_size=2))
    mid = draw(st.lists(st.integers(1, 5), min_size=0, max_size=2))
    c = draw(st.integers(1, 40))
    y = tuple(lead) + tuple(mid) + (c,)
    rows = tuple(lead) + (1,) * len(mid) + (c,)
    full = tuple(mid) + (c,)
    swap = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 16))
    return (full, rows, y, seed) if swap else (rows, full, y, seed)


@settings(max_examples=60, deadline=None)
@given(row_cases())
def test_native_rows_equal_numpy_bits(case):
    a_shape, b_shape, y_shape, seed = case
    plan = row_plan(a_shape, b_shape, y_shape)
    if plan is None:        # (one shape: pa_add's)
        assert a_shape == b_shape
        return
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal(a_shape) * 1e3).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    y = np.full(y_shape, np.nan, np.float32)
    assert RowAdd(plan).run(a, b, y)
    np.testing.assert_array_equal(y.view(np.uint32), np.add(a, b).view(np.uint32))


def test_bias_added_in_place_of_the_matrix():
    b = np.arange(15, dtype=np.float32).reshape(3, 5) * np.float32(0.1)
    bias = np.linspace(-1, 1, 5, dtype=np.float32)
    want = b + bias
    assert RowAdd(row_plan((5,), (3, 5), (3, 5))).run(bias, b, b)
    np.testing.assert_array_equal(b, want)


def test_arrays_it_does_not_take_are_left():
    plan = RowAdd(row_plan((4, 1, 8), (1, 3, 8), (4, 3, 8)))
    a, b = np.ones((4, 1, 8), np.float32), np.ones((1, 3, 8), np.float32)
    y = np.zeros((4, 3, 8), np.float32)
    assert not plan.run(a.astype(np.float64), b, y)
    assert not plan.run(a, b, np.zeros((4, 8, 3), np.float32).transpose(0, 2, 1))
    assert not plan.run(y.reshape(-1)[:32].reshape(4, 1, 8), b, y)  # rows in the output
    assert not plan.run(a, y.reshape(-1)[8:32].reshape(1, 3, 8), y)
    assert not y.any()


def _attention_add(tmp_path, p, q, c):
    path = tmp_path / "add.onnx"
    make_model([helper.make_node("Add", ["a", "b"], ["y"])],
               {"a": ([1, p, 1, c], np.float32), "b": ([1, 1, q, c], np.float32)},
               {"y": (None, np.float32)}, path=path)
    return path


@pytest.mark.parametrize("p, q, c", [(64, 64, 512), (3, 7, 5), (1, 9, 33)])
def test_attention_add_equals_onnxruntime(tmp_path, p, q, c):
    path = _attention_add(tmp_path, p, q, c)
    ex = Executor(load_model(str(path)))
    assert ex.kernels[0].rows is not None
    rng = np.random.default_rng(p + q + c)
    feeds = {"a": rng.standard_normal((1, p, 1, c)).astype(np.float32),
             "b": (rng.standard_normal((1, 1, q, c)) * 1e4).astype(np.float32)}
    got, want = ex.run(feeds)["y"], ort_run(path, feeds)["y"]
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))


def test_native_add_against_the_numpy_path_with_nan_and_inf(tmp_path):
    """The model with ``native=False`` adds with NumPy (no row plan); the
    two agree bit for bit, NaN and infinities included."""
    path = _attention_add(tmp_path, 4, 6, 20)
    ex, plain = Executor(load_model(str(path))), Executor(load_model(str(path), native=False))
    assert ex.kernels[0].rows is not None and plain.kernels[0].rows is None
    rng = np.random.default_rng(5)
    feeds = {"a": rng.standard_normal((1, 4, 1, 20)).astype(np.float32),
             "b": rng.standard_normal((1, 1, 6, 20)).astype(np.float32)}
    feeds["a"][0, 1, 0, 3], feeds["b"][0, 0, 2, 7] = np.nan, np.inf
    feeds["a"][0, 2, 0, 7] = -np.inf                   # -inf + inf: NaN
    got, want = ex.run(feeds)["y"], plain.run(feeds)["y"]
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got[0, 1, :, 3]).all() and np.isnan(got[0, 2, 2, 7])
    ok = ~np.isnan(want)
    np.testing.assert_array_equal(got[ok].view(np.uint32), want[ok].view(np.uint32))
