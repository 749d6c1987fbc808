"""DynamicQuantizeLinear's native path (``pa_dynamic_quantize``) against
its NumPy path and onnxruntime, bit for bit (hypothesis: sizes, ranges,
all-positive / all-negative / constant data, exact .5 boundaries)."""
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402


def _model(path, shape):
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    g = helper.make_graph(
        [node], "dq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("z", TensorProto.UINT8, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    onnx.save(m, str(path))


def _run(path, x, native):
    ex = Executor(load_model(str(path), native=native))
    assert [k.path for k in ex.kernels] == ["native" if native else "numpy"]
    out = ex.run({"x": x})
    return [np.array(out[k]) for k in ("y", "s", "z")]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=st.lists(st.integers(1, 40), min_size=1, max_size=3),
       kind=st.sampled_from(["wide", "positive", "negative", "constant", "grid"]),
       seed=st.integers(0, 2**31))
def test_dynamic_quantize_native_is_numpy_and_onnxruntime(tmp_path, shape, kind, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0, rng.uniform(0.01, 100), shape).astype(np.float32)
    if kind == "positive":
        x = np.abs(x)
    elif kind == "negative":
        x = -np.abs(x)
    elif kind == "constant":
        x = np.full(shape, x.reshape(-1)[0], np.float32)
    elif kind == "grid":          # values on the half-quantum boundaries
        x = (rng.integers(-255, 256, shape) * np.float32(0.5)).astype(np.float32)
    path = tmp_path / "dq.onnx"
    _model(path, shape)
    native, numpy_ = _run(path, x, True), _run(path, x, False)
    ref = ort_run(path, {"x": x})
    for a, b, r in zip(native, numpy_, (ref["y"], ref["s"], ref["z"])):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(a, r)


def test_dynamic_quantize_nan_gives_the_unit_range(tmp_path):
    x = np.array([1.0, np.nan, -3.0, 2.5], np.float32)
    path = tmp_path / "dq.onnx"
    _model(path, x.shape)
    y, s, z = _run(path, x, True)
    assert float(s) == 1.0 and int(z) == 0
    np.testing.assert_array_equal(y, [1, 0, 0, 2])


def test_dynamic_quantize_empty_tensor(tmp_path):
    """No data: both paths and onnxruntime give the unit scale and zero
    point 0, and an empty y."""
    x = np.zeros((0, 4), np.float32)
    path = tmp_path / "dq.onnx"
    _model(path, x.shape)
    ref = ort_run(path, {"x": x})
    for native in (True, False):
        y, s, z = _run(path, x, native)
        assert y.shape == (0, 4) and y.dtype == np.uint8
        np.testing.assert_array_equal(s, ref["s"])
        np.testing.assert_array_equal(z, ref["z"])
