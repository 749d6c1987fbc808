"""The 8-bit kernels that run natively besides Add / Mul
(quantized_contrib.py: QLinearSigmoid, QLinearLeakyRelu and QLinearConcat
as 256-entry tables, QLinearGlobalAveragePool; quantized.py:
QuantizeLinear, DequantizeLinear per tensor) give the bytes of their NumPy
paths, on random shapes, scales, zero points and both 8-bit types
(hypothesis), and say "native" where they run natively."""
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def both_paths(node, feeds, inits, out_dtype, contrib=True):
    """(native output, NumPy output, native kernel's path) of one node."""
    tp = lambda dt: helper.np_dtype_to_tensor_dtype(np.dtype(dt))  # noqa: E731
    ins = [helper.make_tensor_value_info(k, tp(v.dtype), list(v.shape)) for k, v in feeds.items()]
    g = helper.make_graph([node], "q", ins, [helper.make_tensor_value_info("y", tp(out_dtype),
                                                                          None)],
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    ops = [helper.make_opsetid("", 13)] + ([helper.make_opsetid("com.microsoft", 1)]
                                           if contrib else [])
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = min(m.ir_version, 10)
    out = []
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.onnx"
        onnx.save(m, str(path))
        for native in (True, False):
            graph = load_model(str(path), native=native, scratch_budget=256)
            out.append(np.array(Executor(graph).run(feeds)["y"]))
            if native:
                kind = graph_kernel(graph, graph.ops[0]).path
    return out[0], out[1], kind


def qp(prefix, dt, scale, zp):
    return {f"{prefix}s": np.array(scale, np.float32), f"{prefix}z": np.array(zp, dt)}


scales = st.floats(2.0 ** -10, 2.0, width=32)
dtypes = st.sampled_from([np.uint8, np.int8])
shapes = st.lists(st.integers(1, 7), min_size=2, max_size=4)


@settings(max_examples=25, deadline=None)
@given(dtypes, shapes, scales, scales, st.data(), st.sampled_from(
    ["QLinearSigmoid", "QLinearLeakyRelu"]))
def test_tables_of_unary_ops(dt, shape, xs, ys, data, op):
    lo, hi = RANGE[dt]
    x = np.random.default_rng(0).integers(lo, hi + 1, shape).astype(dt)
    inits = {**qp("x", dt, xs, data.draw(st.integers(lo, hi))),
             **qp("y", dt, ys, data.draw(st.integers(lo, hi)))}
    attrs = {"alpha": data.draw(st.floats(-2, 2, width=32))} if op == "QLinearLeakyRelu" else {}
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                            **attrs)
    fast, slow, kind = both_paths(node, {"x": x}, inits, dt)
    assert kind == "native" and np.array_equal(fast, slow)


@settings(max_examples=25, deadline=None)
@given(dtypes, shapes, scales, scales, st.data())
def test_global_average_pool(dt, shape, xs, ys, data):
    lo, hi = RANGE[dt]
    shape = [max(2, d) for d in shape] + [3] * (4 - len(shape))
    x = np.random.default_rng(1).integers(lo, hi + 1, shape).astype(dt)
    inits = {**qp("x", dt, xs, data.draw(st.integers(lo, hi))),
             **qp("y", dt, ys, data.draw(st.integers(lo, hi)))}
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=data.draw(st.integers(0, 1)))
    fast, slow, kind = both_paths(node, {"x": x}, inits, dt)
    assert kind == "native" and np.array_equal(fast, slow)


@settings(max_examples=25, deadline=None)
@given(dtypes, shapes, st.integers(1, 3), st.data())
def test_concat(dt, shape, n_in, data):
    lo, hi = RANGE[dt]
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    rng = np.random.default_rng(2)
    feeds, names, inits = {}, ["ys", "yz"], qp("y", dt, data.draw(scales), data.draw(
        st.integers(lo, hi)))
    for k in range(n_in):
        s = list(shape)
        s[axis] = data.draw(st.integers(1, 4))
        feeds[f"x{k}"] = rng.integers(lo, hi + 1, s).astype(dt)
        inits.update(qp(f"x{k}", dt, data.draw(scales), data.draw(st.integers(lo, hi))))
        names += [f"x{k}", f"x{k}s", f"x{k}z"]
    node = helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=axis)
    fast, slow, kind = both_paths(node, feeds, inits, dt)
    assert kind == "native" and np.array_equal(fast, slow)


@settings(max_examples=25, deadline=None)
@given(dtypes, shapes, scales, st.data())
def test_quantize_and_dequantize(dt, shape, scale, data):
    lo, hi = RANGE[dt]
    rng = np.random.default_rng(3)
    zp = data.draw(st.integers(lo, hi))
    f = (rng.standard_normal(shape) * 300 * scale).astype(np.float32)
    f.reshape(-1)[:3] = [0.5 * scale, 1.5 * scale, -2.5 * scale][:f.size]  # halves: to even
    node = helper.make_node("QuantizeLinear", ["f", "s", "z"], ["y"])
    inits = {"s": np.array(scale, np.float32), "z": np.array(zp, dt)}
    fast, slow, kind = both_paths(node, {"f": f}, inits, dt, contrib=False)
    assert kind == "native" and np.array_equal(fast, slow)
    q = rng.integers(lo, hi + 1, shape).astype(dt)
    node = helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])
    fast, slow, kind = both_paths(node, {"q": q}, inits, np.float32, contrib=False)
    assert kind == "native" and np.array_equal(fast, slow)
