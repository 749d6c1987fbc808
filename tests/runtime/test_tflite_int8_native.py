"""TFLite's int8 MUL and AVERAGE_POOL_2D (the importer's ``requant="tflite"``
forms of QLinearMul and QLinearAveragePool) on the C core -- ``pa_qbinary``'s
TFLITE_MUL, ``pa_qavgpool``'s integer_average -- give the NumPy path's
bytes (the reference: requant_fixed.py's two roundings, the pool's
``finish_tflite``; both compared with the TFLite interpreter in
tests/importers/test_tflite_int8.py): random shapes and broadcasts, pads,
strides, fused-activation clamps, scales from 2^-20 to 2^6 (shifts below
-31 and above 0); and their call records give them too."""
import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")

from onnx import helper, numpy_helper  # noqa: E402

from pyarena._native.kernels import CallList  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402
from pyarena.runtime.kernels.quantized_binary import loops  # noqa: E402
from pyarena.runtime.kernels.requant_fixed import tflite_multipliers  # noqa: E402

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def const(name, v, dt):
    return numpy_helper.from_array(np.array(v, dt), name)


def save(tmp_path, node, inputs, inits):
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(x.dtype), list(x.shape)) for n, x in inputs],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(
            inputs[0][1].dtype), None)], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10
    path = tmp_path / "t.onnx"
    path.write_bytes(m.SerializeToString())
    return path


def both_ways(path, feeds, native_ok=True):
    """(native output, NumPy output, the output of the native kernel's call
    record); ``native_ok``: whether the native load must run natively (a
    broadcast of more than three loops stays on NumPy; then no record)."""
    out = []
    for native in (True, False):
        graph = load_model(str(path), native=native)
        k = graph_kernel(graph, graph.ops[0])
        assert k.path == ("native" if native and native_ok else "numpy")
        out.append(np.array(Executor(graph).run(feeds)["y"]))
        if native:
            kernel = k
    if not native_ok:
        return out[0], out[1], out[1]
    y = np.empty_like(out[0])
    xs = [feeds[n] if n in feeds else None for n in kernel.op.inputs]
    rec = kernel.native_call(xs, [y])
    CallList([rec]).run(None, "t")
    return out[0], out[1], y


def rand(dt, shape, rng):
    lo, hi = RANGE[dt]
    return rng.integers(lo, hi + 1, shape).astype(dt)


def broadcast_shapes(data):
    out = [data.draw(st.integers(1, 5)) for _ in range(data.draw(st.integers(1, 4)))]
    out[-1] = data.draw(st.sampled_from([1, 3, 16, 40, 1100]))

    def operand():
        s = [d if data.draw(st.booleans()) else 1 for d in out]
        return s[data.draw(st.integers(0, len(s) - 1)):]
    return tuple(out), tuple(operand()), tuple(operand())


@settings(max_examples=40, deadline=None)
@given(st.sampled_from([np.uint8, np.int8]), st.data())
def test_tflite_mul_native_matches_numpy(tmp_path_factory, dt, data):
    lo, hi = RANGE[dt]
    _, sa, sb = broadcast_shapes(data)
    out = np.broadcast_shapes(sa, sb)
    rng = np.random.default_rng(data.draw(st.integers(0, 999)))
    a, b = rand(dt, sa, rng), rand(dt, sb, rng)
    scale = st.floats(2.0 ** -10, 2.0 ** 3, width=32)
    scales = [data.draw(scale), data.draw(scale), data.draw(scale)]
    if data.draw(st.booleans()):        # a ratio far below or above 1
        scales[2] = float(np.float32(scales[0] * scales[1] /
                                     data.draw(st.sampled_from([2.0 ** -40, 1e-9, 40.0]))))
    zps = [data.draw(st.integers(lo, hi)) for _ in range(3)]
    qmin = data.draw(st.integers(lo, hi))
    qmax = data.draw(st.integers(qmin, hi))
    try:
        tflite_multipliers(scales[0], [scales[1]], scales[2])
    except ValueError:                  # too large for a fixed-point multiplier
        return
    inits = [const("as", scales[0], np.float32), const("az", zps[0], dt),
             const("bs", scales[1], np.float32), const("bz", zps[1], dt),
             const("ys", scales[2], np.float32), const("yz", zps[2], dt)]
    node = helper.make_node("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"],
                            domain="com.microsoft", requant="tflite", qmin=qmin, qmax=qmax)
    path = save(tmp_path_factory.mktemp("m"), node, [("a", a), ("b", b)], inits)
    native, numpy_, rec = both_ways(path, {"a": a, "b": b}, len(loops(sa, sb, out)) <= 3)
    assert native.shape == out and native.dtype == dt
    np.testing.assert_array_equal(native, numpy_)
    np.testing.assert_array_equal(rec, numpy_)


def test_tflite_mul_rounds_twice():
    """The product 9750 x 0.0111281 = 108.494 rounds to 109 with TFLite's
    two roundings (pa_qrequant's banner): the native path keeps them."""
    m, sh = tflite_multipliers(1.0, [0.0111281], 1.0)
    from pyarena.runtime.kernels.requant_fixed import requant_fixed
    y = np.zeros(1, np.int32)
    requant_fixed(np.array([9750]), m, sh, 0, -2**31, 2**31 - 1, y)
    assert y[0] == 109 and math.floor(9750 * 0.0111281 + 0.5) == 108


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([np.uint8, np.int8]), st.data())
def test_tflite_average_pool_native_matches_numpy(tmp_path_factory, dt, data):
    lo, hi = RANGE[dt]
    n, c = data.draw(st.integers(1, 2)), data.draw(st.sampled_from([1, 3, 8, 40, 300]))
    h, w = data.draw(st.integers(1, 12)), data.draw(st.integers(1, 12))
    k = [data.draw(st.integers(1, h)), data.draw(st.integers(1, w))]
    pads = [data.draw(st.integers(0, k[i % 2] - 1)) for i in range(4)]
    attrs = dict(kernel_shape=k, pads=pads, channels_last=1,
                 strides=[data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))])
    qmin = data.draw(st.integers(lo, hi))
    x = rand(dt, (n, h, w, c), np.random.default_rng(data.draw(st.integers(0, 999))))
    inits = [const("xs", 0.05, np.float32), const("xz", lo + 3, dt),
             const("ys", 0.07, np.float32), const("yz", hi - 9, dt)]
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", requant="tflite", qmin=qmin,
                            qmax=data.draw(st.integers(qmin, hi)), **attrs)
    path = save(tmp_path_factory.mktemp("p"), node, [("x", x)], inits)
    native, numpy_, rec = both_ways(path, {"x": x})
    np.testing.assert_array_equal(native, numpy_)
    np.testing.assert_array_equal(rec, numpy_)


def test_tflite_average_pool_rounds_half_away_from_zero(tmp_path):
    """Windows of 2 values summing to odd numbers: +-x.5 averages go away
    from zero (C's (acc +- n / 2) / n), on both paths."""
    x = np.array([-3, -2, 1, 2, -128, 127, 5, 6], np.int8).reshape(1, 1, 8, 1)
    inits = [const("xs", 0.05, np.float32), const("xz", 0, np.int8),
             const("ys", 0.05, np.float32), const("yz", 0, np.int8)]
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", requant="tflite", channels_last=1,
                            kernel_shape=[1, 2], strides=[1, 2])
    native, numpy_, rec = both_ways(save(tmp_path, node, [("x", x)], inits), {"x": x})
    assert native.reshape(-1).tolist() == [-3, 2, -1, 6]
    np.testing.assert_array_equal(numpy_, native)
    np.testing.assert_array_equal(rec, native)
