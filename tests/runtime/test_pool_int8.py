"""MaxPool of an 8-bit tensor runs natively (pa_qmaxpool, pooling.py) and
gives onnxruntime's bytes and the NumPy taps' (pads, strides, ceil_mode,
both 8-bit types); dilated pools stay on NumPy."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper  # noqa: E402

from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def three_ways(tmp_path, x, attrs):
    tp = helper.np_dtype_to_tensor_dtype(x.dtype)
    node = helper.make_node("MaxPool", ["x"], ["y"], **attrs)
    g = helper.make_graph([node], "p", [helper.make_tensor_value_info("x", tp, list(x.shape))],
                          [helper.make_tensor_value_info("y", tp, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 12)])
    m.ir_version = 10
    path = tmp_path / "p.onnx"
    path.write_bytes(m.SerializeToString())
    out, kinds = [], []
    for native in (True, False):
        graph = load_model(str(path), native=native)
        kinds.append(graph_kernel(graph, graph.ops[0]).path)
        out.append(np.array(Executor(graph).run({"x": x})["y"]))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    ref = ort.InferenceSession(m.SerializeToString(), so,
                               providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
    return out, kinds, ref


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("attrs", [
    dict(kernel_shape=[3, 3], strides=[2, 2]), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 3], strides=[2, 1], pads=[1, 0, 0, 2], ceil_mode=1),
    dict(kernel_shape=[2, 2], strides=[2, 2])])
def test_int8_max_pool_native(tmp_path, dt, attrs):
    lo, hi = RANGE[dt]
    x = np.random.default_rng(0).integers(lo, hi + 1, (2, 5, 11, 13)).astype(dt)
    x[0, 0] = lo                          # a plane of the lowest value: padding must not win
    (fast, slow), kinds, ref = three_ways(tmp_path, x, attrs)
    assert kinds == ["native", "numpy"]
    np.testing.assert_array_equal(fast, ref)
    np.testing.assert_array_equal(slow, ref)


def test_dilated_int8_max_pool_stays_on_numpy(tmp_path):
    x = np.random.default_rng(1).integers(0, 256, (1, 3, 9, 9)).astype(np.uint8)
    (fast, slow), kinds, ref = three_ways(tmp_path, x, dict(kernel_shape=[2, 2],
                                                           dilations=[2, 2]))
    assert kinds == ["numpy", "numpy"]
    np.testing.assert_array_equal(fast, ref)


@settings(max_examples=25, deadline=None)
@given(st.sampled_from([np.uint8, np.int8]), st.data())
def test_int8_max_pool_random(tmp_path_factory, dt, data):
    lo, hi = RANGE[dt]
    h, w = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    k = [data.draw(st.integers(1, h)), data.draw(st.integers(1, w))]
    pads = [data.draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    attrs = dict(kernel_shape=k, pads=pads, ceil_mode=data.draw(st.integers(0, 1)),
                 strides=[data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))])
    for i, n in enumerate((h, w)):  # ceil_mode's last window in the end pad: onnxruntime drops
        span = n + pads[i] + pads[i + 2] - k[i]     # it, the ONNX shape (and pyarena) keep it
        if attrs["ceil_mode"] and -(-span // attrs["strides"][i]) * attrs["strides"][i] >= \
                n + pads[i]:
            attrs["ceil_mode"] = 0
    x = np.random.default_rng(data.draw(st.integers(0, 99))).integers(
        lo, hi + 1, (data.draw(st.integers(1, 2)), data.draw(st.integers(1, 9)), h, w)).astype(dt)
    (fast, slow), kinds, ref = three_ways(tmp_path_factory.mktemp("m"), x, attrs)
    np.testing.assert_array_equal(fast, ref)
    np.testing.assert_array_equal(slow, ref)
