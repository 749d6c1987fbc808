"""The float AveragePool / GlobalAveragePool of a QDQ file's float island
(``mlas_order``: onnxruntime MLAS's summation order) on the C core
(``pa_avgpool2d_ordered``, csrc/kernels/pool_mlas.c) give the NumPy path's
bits (pooling.py: the reference, compared with onnxruntime in
tests/importers/test_onnx_qdq_ort.py): random shapes, strides, pads,
ceil_mode, count_include_pad, values of all magnitudes and -0.0; the NHWC
kernels (called directly: a lone pool stays NCHW) give the same bits; and
the call record (a batched run) gives them too."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")

from onnx import TensorProto, helper  # noqa: E402

from pyarena._native import lib  # noqa: E402
from pyarena._native.kernels import NULL, CallList, fptr, pool2d  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402


def pool_model(op, shape, attrs):
    node = helper.make_node(op, ["x"], ["y"], mlas_order=1, **attrs)
    g = helper.make_graph([node], "p", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, list(shape))], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 8
    return m


def values(shape, seed):
    """Values of many magnitudes, some -0.0 and +0.0."""
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, shape)).astype(np.float32)
    x[rng.random(shape) < 0.1] = -0.0
    x[rng.random(shape) < 0.05] = 0.0
    return x


def both_ways(tmp_path, op, x, attrs):
    """(native output, NumPy output, the native kernel)."""
    path = tmp_path / "p.onnx"
    path.write_bytes(pool_model(op, x.shape, attrs).SerializeToString())
    out = []
    for native in (True, False):
        graph = load_model(str(path), native=native)
        k = graph_kernel(graph, graph.ops[0])
        assert k.mlas and k.path == ("native" if native else "numpy")
        out.append(np.array(Executor(graph).run({"x": x})["y"]))
        if native:
            kernel = k
    return out[0], out[1], kernel


def nhwc_run(x, order, d):
    """``pa_avgpool2d_ordered`` on x (NCHW) laid out in NHWC, with the
    NCHW descriptor ``d``'s geometry; the output back in NCHW."""
    xt = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    dn = pool2d(nhwc=True, n=d.n, c=d.c, h=d.h, w=d.w, h_out=d.h_out, w_out=d.w_out, kh=d.kh,
                kw=d.kw, sh=d.sh, sw=d.sw, pads=(d.pad_top, d.pad_left, d.pad_bottom,
                                                 d.pad_right),
                count_include_pad=d.count_include_pad)
    y = np.full((d.n, d.h_out, d.w_out, d.c), np.nan, np.float32)
    assert lib.pa_avgpool2d_ordered(dn, order, fptr(xt), fptr(y), NULL) == 0
    return y.transpose(0, 3, 1, 2)


def assert_bits(a, b):
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a.view(np.uint32), b.view(np.uint32))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1), st.data())
def test_average_pool_taps_order_matches_numpy(tmp_path_factory, nhwc, data):
    n, c = data.draw(st.integers(1, 2)), 16 * data.draw(st.integers(1, 3))
    h, w = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    k = [data.draw(st.integers(1, h)), data.draw(st.integers(1, w))]
    pads = [data.draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    attrs = dict(kernel_shape=k, pads=pads,
                 strides=[data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))],
                 ceil_mode=data.draw(st.integers(0, 1)),
                 count_include_pad=data.draw(st.integers(0, 1)))
    x = values((n, c, h, w), data.draw(st.integers(0, 999)))
    native, numpy_, k = both_ways(tmp_path_factory.mktemp("p"), "AveragePool", x, attrs)
    assert_bits(native, numpy_)
    if nhwc:
        assert_bits(nhwc_run(x, lib.PA_POOL_ORDER_TAPS, k.native), numpy_)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1), st.data())
def test_global_average_pool_lanes_order_matches_numpy(tmp_path_factory, nhwc, data):
    n, c = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 300))
    h, w = data.draw(st.integers(1, 20)), data.draw(st.integers(1, 20))
    x = values((n, c, h, w), data.draw(st.integers(0, 999)))
    native, numpy_, _ = both_ways(tmp_path_factory.mktemp("g"), "GlobalAveragePool", x, {})
    assert_bits(native, numpy_)
    if nhwc:
        d = pool2d(nhwc=False, n=n, c=c, h=h, w=w, h_out=1, w_out=1, kh=h, kw=w, sh=1, sw=1,
                   pads=(0, 0, 0, 0), count_include_pad=0)
        assert_bits(nhwc_run(x, lib.PA_POOL_ORDER_LANES, d), numpy_)


@pytest.mark.parametrize("op,shape,attrs", [
    ("AveragePool", (1, 32, 9, 12), dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1])),
    ("AveragePool", (2, 16, 8, 8), dict(kernel_shape=[2, 2], strides=[2, 2])),
    ("GlobalAveragePool", (1, 40, 3, 1), {}),        # fewer than four values a plane
    ("GlobalAveragePool", (2, 24, 19, 23), {})])
def test_call_record_gives_the_same_bits(tmp_path, op, shape, attrs):
    """The kernel's call record run by ``pa_calls_run`` (the executor's
    batched runs) writes what its direct run writes."""
    x = values(shape, 3)
    native, numpy_, k = both_ways(tmp_path, op, x, attrs)
    y = np.empty_like(native)
    rec = k.native_call([x], [y.reshape(-1)])
    assert rec[0] == "avgpool_ordered"
    CallList([rec]).run(None, op)
    assert_bits(y, native)
    assert_bits(y, numpy_)


def test_lanes_order_refuses_a_window_that_is_not_global():
    d = pool2d(nhwc=False, n=1, c=1, h=4, w=4, h_out=2, w_out=2, kh=2, kw=2, sh=2, sw=2,
               pads=(0, 0, 0, 0), count_include_pad=0)
    x, y = np.ones(16, np.float32), np.zeros(4, np.float32)
    assert lib.pa_avgpool2d_ordered(d, lib.PA_POOL_ORDER_LANES, fptr(x), fptr(y), NULL) == \
        lib.PA_ERR_INVALID
    assert not y.any()
    assert lib.pa_avgpool2d_ordered(d, lib.PA_POOL_ORDER_TAPS, fptr(x), fptr(y), NULL) == 0
    assert np.all(y == 1.0)
