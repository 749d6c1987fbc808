"""QLinearSoftmax and QLinearAveragePool (quantized_pool.py) give
onnxruntime's bytes, 0 quanta apart, on its native path (pa_qsoftmax,
pa_qavgpool) and on its NumPy path: both 8-bit types, softmax over the last
and inner axes with opset 12 (flattened) and 13 semantics, pools with pads,
strides, ceil_mode, count_include_pad, NCHW and channels_last, 1-D and
2-D, and the whole-image window onnxruntime runs as a global pool; random
shapes and parameters with hypothesis."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import helper, numpy_helper  # noqa: E402

from pyarena._native import qelementwise as qnative  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402
from pyarena.runtime.kernels.quantized_pool import softmax_table  # noqa: E402

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def model(op, x, scales, zero_points, attrs):
    dt = x.dtype
    tp = helper.np_dtype_to_tensor_dtype(dt)
    inits = [numpy_helper.from_array(np.array(scales[0], np.float32), "xs"),
             numpy_helper.from_array(np.array(zero_points[0], dt), "xz"),
             numpy_helper.from_array(np.array(scales[1], np.float32), "ys"),
             numpy_helper.from_array(np.array(zero_points[1], dt), "yz")]
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                            **attrs)
    g = helper.make_graph([node], "q", [helper.make_tensor_value_info("x", tp, list(x.shape))],
                          [helper.make_tensor_value_info("y", tp, None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    return m


def three_ways(tmp_path, op, x, scales, zero_points, attrs):
    """(native output, NumPy output, onnxruntime output) of one node; the
    native run must say "native"."""
    m = model(op, x, scales, zero_points, attrs)
    path = tmp_path / "q.onnx"
    path.write_bytes(m.SerializeToString())
    out = []
    for native in (True, False):
        graph = load_model(str(path), native=native, scratch_budget=512)
        kind = graph_kernel(graph, graph.ops[0]).path
        assert kind == ("native" if native else "numpy")
        out.append(np.array(Executor(graph).run({"x": x})["y"]))
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    out.append(sess.run(None, {"x": x})[0])
    return out


def assert_bytes(outs):
    native, numpy_, ref = outs
    assert native.dtype == ref.dtype and native.shape == ref.shape
    np.testing.assert_array_equal(native, ref)
    np.testing.assert_array_equal(numpy_, ref)


def rand(dt, shape, seed):
    lo, hi = RANGE[dt]
    return np.random.default_rng(seed).integers(lo, hi + 1, shape).astype(dt)


# -- QLinearSoftmax ---------------------------------------------------------

@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("shape, axis, opset", [
    ((4, 10), -1, 13), ((2, 16, 4, 9), 1, 13), ((3, 5, 7), 0, 13), ((3, 5, 7), -2, 13),
    ((6, 40), -1, 12), ((2, 3, 4, 5), 1, 12), ((2, 3, 4, 5), -1, 12), ((5, 1), 1, 13),
    ((1, 16, 2, 300), 1, 13), ((3, 257), -1, 13)])
def test_softmax_bytes(tmp_path, dt, shape, axis, opset):
    lo, hi = RANGE[dt]
    x = rand(dt, shape, 1)
    for ys, yz in [(1 / 256, lo), (1 / 255, lo), (0.0113, lo + 7)]:
        assert_bytes(three_ways(tmp_path, "QLinearSoftmax", x, (0.07, ys), (3, yz),
                                {"axis": axis, "opset": opset}))


def test_softmax_cases_where_the_division_order_shows(tmp_path):
    """Rows where (e * Ys) / sum, (e / sum) * Ys and e * (Ys / sum) round
    differently (found by search): onnxruntime gives the second's bytes;
    one-element rows overflow the first (e * Ys = inf)."""
    x = np.array([[235, 196, 179, 230, 200, 255, 249, 202, 218, 186],
                  [181, 247, 243, 214, 217, 176, 212, 159, 217, 200]], np.uint8)
    for xs, ys, yz in [(0.0305, 0.0371, 6), (0.187, 0.00617, 11), (0.4, 0.0019, 0)]:
        assert_bytes(three_ways(tmp_path, "QLinearSoftmax", x, (xs, ys), (0, yz),
                                {"axis": -1, "opset": 13}))
    one = rand(np.uint8, (8, 1), 2)
    assert_bytes(three_ways(tmp_path, "QLinearSoftmax", one, (0.08, 1 / 255), (0, 0),
                            {"axis": -1, "opset": 13}))


def test_softmax_int8_saturates_at_127(tmp_path):
    x = np.array([[0, 10, 20, 30, 40, 50, 60, 127]], np.int8)
    outs = three_ways(tmp_path, "QLinearSoftmax", x, (0.1, 1 / 256), (0, -128),
                      {"axis": -1, "opset": 13})
    assert_bytes(outs)
    assert outs[0][0, -1] == 127


@pytest.mark.parametrize("xs, n", [(0.02, 1), (0.1, 16), (0.5, 1000), (3e-4, 7)])
def test_softmax_table_native_equals_python(xs, n):
    native = qnative.softmax_table(xs, n)
    np.testing.assert_array_equal(native, softmax_table(xs, n))
    assert native[0] >= 1.0 and np.all(np.diff(native) <= 0)


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([np.uint8, np.int8]),
       st.lists(st.integers(1, 9), min_size=1, max_size=4), st.data())
def test_softmax_random(tmp_path_factory, dt, shape, data):
    lo, hi = RANGE[dt]
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    opset = data.draw(st.sampled_from([12, 13]))
    xs = data.draw(st.floats(2.0 ** -10, 0.5, width=32))
    ys = data.draw(st.sampled_from([1 / 256, 1 / 255, 0.01, 0.0371, 0.3]))
    yz = data.draw(st.integers(lo, hi))
    x = rand(dt, shape, data.draw(st.integers(0, 99)))
    assert_bytes(three_ways(tmp_path_factory.mktemp("s"), "QLinearSoftmax", x, (xs, ys),
                            (0, yz), {"axis": axis, "opset": opset}))


# -- QLinearAveragePool -----------------------------------------------------

POOLS = [
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
    dict(kernel_shape=[2, 2], count_include_pad=1, pads=[1, 1, 0, 0]),
    dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1], count_include_pad=1),
    dict(kernel_shape=[3, 2], strides=[2, 3], ceil_mode=1),
    dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 0, 1, 1], ceil_mode=1,
         count_include_pad=1),
    dict(kernel_shape=[2, 2], strides=[2, 2]),
    dict(kernel_shape=[3, 3], auto_pad="SAME_UPPER"),
    dict(kernel_shape=[9, 9]),                      # the whole image: the global pool
]


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("attrs", POOLS)
def test_average_pool_bytes(tmp_path, dt, last, attrs):
    lo, hi = RANGE[dt]
    x = rand(dt, (2, 9, 9, 5) if last else (2, 5, 9, 9), 3)
    for scales, zps in [((0.03, 0.02), (lo + 128, lo + 100)), ((0.002, 0.3), (lo, hi - 3))]:
        assert_bytes(three_ways(tmp_path, "QLinearAveragePool", x, scales, zps,
                                dict(attrs, channels_last=last)))


@pytest.mark.parametrize("last", [0, 1])
@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3], pads=[1, 2], strides=[2]),
                                   dict(kernel_shape=[4], ceil_mode=1, strides=[3],
                                        count_include_pad=1, pads=[2, 0]),
                                   dict(kernel_shape=[11])])
def test_average_pool_1d_bytes(tmp_path, last, attrs):
    x = rand(np.uint8, (2, 11, 6) if last else (2, 6, 11), 4)
    assert_bytes(three_ways(tmp_path, "QLinearAveragePool", x, (0.05, 0.04), (120, 130),
                            dict(attrs, channels_last=last)))


@settings(max_examples=30, deadline=None)
@given(st.sampled_from([np.uint8, np.int8]), st.integers(0, 1), st.data())
def test_average_pool_random(tmp_path_factory, dt, last, data):
    lo, hi = RANGE[dt]
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 40))
    h, w = data.draw(st.integers(1, 10)), data.draw(st.integers(1, 10))
    k = [data.draw(st.integers(1, h)), data.draw(st.integers(1, w))]
    pads = [data.draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    strides = [data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))]
    attrs = dict(kernel_shape=k, pads=pads, strides=strides, channels_last=last,
                 ceil_mode=data.draw(st.integers(0, 1)),
                 count_include_pad=data.draw(st.integers(0, 1)))
    x = rand(dt, (n, h, w, c) if last else (n, c, h, w), data.draw(st.integers(0, 99)))
    scale = st.floats(2.0 ** -10, 0.5, width=32)
    scales = (data.draw(scale), data.draw(scale))
    zps = (data.draw(st.integers(lo, hi)), data.draw(st.integers(lo, hi)))
    assert_bytes(three_ways(tmp_path_factory.mktemp("p"), "QLinearAveragePool", x, scales, zps,
                            attrs))
