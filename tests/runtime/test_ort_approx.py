"""onnxruntime's logistic and tanh (kernels/ort_approx.c through
pyarena/_native/ort_approx.py) and the Tanh and Sigmoid ops that run them
(runtime/kernels/ort_exact.py): the same bits as onnxruntime's own Sigmoid and
Tanh over values of every magnitude, NaN and infinities included."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra.numpy import arrays
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena._native import ort_approx
from pyarena.errors import PyArenaError
from pyarena.importers import load_model
from pyarena.planning import plan
from pyarena.runtime import Executor


def _values(n, seed=0):
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(0, 4, n), rng.uniform(-40, 40, n // 4),
                        rng.normal(0, 1e-3, n // 8),
                        [0.0, -0.0, 9.0, -9.0, 18.0, -18.0, 1e30, -1e30, np.inf, -np.inf]])
    return x.astype(np.float32)


def _ort(op, path, x):
    node = helper.make_node(op, ["x"], ["y"])
    make_model([node], {"x": ([x.size], np.float32)}, {"y": ([x.size], np.float32)},
               opset=17, path=path)
    return ort_run(path, {"x": x})["y"]


@pytest.mark.parametrize("op, fn", [("Sigmoid", ort_approx.logistic), ("Tanh", ort_approx.tanh)])
def test_same_bits_as_onnxruntime(tmp_path, op, fn):
    x = _values(200000)
    y = np.empty_like(x)
    fn(x, y)
    ref = _ort(op, tmp_path / "m.onnx", x)
    np.testing.assert_array_equal(y.view(np.int32), ref.view(np.int32))
    z = x.copy()
    fn(z, z)                                    # in place: the same
    np.testing.assert_array_equal(z, y)


@settings(max_examples=30, deadline=None)
@given(arrays(np.float32, st.integers(1, 70),
              elements=st.floats(-30, 30, width=32, allow_nan=False)))
def test_any_length_and_value(x):
    """Against double-precision references: MLAS's own error (< 4e-7)."""
    y, t = np.empty_like(x), np.empty_like(x)
    ort_approx.logistic(x, y)
    ort_approx.tanh(x, t)
    xd = x.astype(np.float64)
    assert np.abs(y - 1 / (1 + np.exp(-xd))).max() < 4e-7
    assert np.abs(t - np.tanh(xd)).max() < 4e-7


def test_nan_passes_and_overlap_is_refused():
    x = np.array([np.nan, 1.0], np.float32)
    y = np.empty_like(x)
    ort_approx.tanh(x, y)
    assert np.isnan(y[0]) and y[1] == pytest.approx(np.tanh(1.0), abs=4e-7)
    buf = np.zeros(8, np.float32)
    with pytest.raises(PyArenaError):
        ort_approx.logistic(buf[:4], buf[1:5])


@pytest.mark.parametrize("op", ["Tanh", "Sigmoid"])
@pytest.mark.parametrize("native", [True, False])
def test_ops(tmp_path, op, native):
    """The Tanh and Sigmoid ops: onnxruntime's bits on the native path;
    NumPy's functions (within MLAS's error of them) without the C core."""
    x = _values(5000, seed=1).reshape(-1, 1)
    path = tmp_path / "t.onnx"
    node = helper.make_node(op, ["x"], ["y"])
    make_model([node], {"x": (list(x.shape), np.float32)},
               {"y": (list(x.shape), np.float32)}, opset=17, path=path)
    g = load_model(str(path), native=native)
    ex = Executor(g, plan(g))
    ours = ex.run({"x": x})["y"]
    ref = ort_run(path, {"x": x})["y"]
    assert ex.kernels[0].path == ("native" if native else "numpy")
    if native:
        np.testing.assert_array_equal(ours, ref)
    else:
        np.testing.assert_allclose(ours, ref, rtol=0, atol=4e-7)
