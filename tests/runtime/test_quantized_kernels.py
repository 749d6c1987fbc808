"""Quantized kernels, one node at a time, against onnxruntime on the same
file: integer outputs within one quantum, int32 accumulators exact."""
import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402

rng = np.random.default_rng(11)


def run_node(tmp_path, node, feeds, inits, outputs, opset=13, contrib=False,
             scratch_budget=None, native=True):
    """Run one node with pyarena (planned arena; ``native`` False: the
    NumPy paths) and onnxruntime; returns (ours, ref) dicts of the outputs."""
    tp = lambda dt: helper.np_dtype_to_tensor_dtype(np.dtype(dt))  # noqa: E731
    ins = [helper.make_tensor_value_info(k, tp(v.dtype), list(v.shape)) for k, v in feeds.items()]
    outs = [helper.make_tensor_value_info(k, tp(dt), None) for k, dt in outputs.items()]
    g = helper.make_graph([node], "q", ins, outs,
                          [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    ops = [helper.make_opsetid("", opset)]
    if contrib:
        ops.append(helper.make_opsetid("com.microsoft", 1))
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = min(m.ir_version, 10)
    path = tmp_path / "q.onnx"
    import onnx
    onnx.save(m, str(path))
    graph = load_model(str(path), scratch_budget=scratch_budget, native=native)
    ours = {k: np.array(v) for k, v in Executor(graph).run(feeds).items()}
    return ours, ort_run(path, feeds)


def assert_within_quantum(ours, ref, names):
    for k in names:
        assert ours[k].dtype == ref[k].dtype, k
        assert ours[k].shape == ref[k].shape, k
        diff = np.abs(ours[k].astype(np.int64) - ref[k].astype(np.int64))
        assert diff.max() <= 1, (k, diff.max())


def i8(*shape):
    return rng.integers(-128, 128, shape).astype(np.int8)


def u8(*shape):
    return rng.integers(0, 256, shape).astype(np.uint8)


def w8(a_dtype, *shape):
    """int8 weights for activations of ``a_dtype``: 7 bits under uint8
    activations.  onnxruntime's u8s8 kernels on CPUs without VNNI add
    pairs of products in saturating 16-bit lanes (seen with onnxruntime 1.32
    on AVX2), so full-range weights are compared with exact integer
    arithmetic instead (test_matmul_integer_full_range_exact)."""
    if np.dtype(a_dtype) == np.uint8:
        return rng.integers(-64, 64, shape).astype(np.int8)
    return i8(*shape)


@pytest.mark.parametrize("zp_dtype, axis, per_axis", [
    (np.uint8, 1, False), (np.int8, 1, True), (np.int8, 0, True), (np.uint8, -1, True)])
def test_quantize_linear(tmp_path, zp_dtype, axis, per_axis):
    x = (rng.standard_normal((3, 4, 5)) * 4).astype(np.float32)
    x.flat[:4] = [0.5, 1.5, 2.5, -2.5]          # ties round to even
    n = 3 if axis == 0 else 4 if axis == 1 else 5
    scale = (rng.uniform(0.01, 0.1, n) if per_axis else np.array(0.03)).astype(np.float32)
    zp = (np.full(n, 3) if per_axis else np.array(3)).astype(zp_dtype)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=axis)
    ours, ref = run_node(tmp_path, node, {"x": x}, {"s": scale, "z": zp}, {"y": zp_dtype})
    np.testing.assert_array_equal(ours["y"], ref["y"])   # same arithmetic: exact


def test_dequantize_linear_per_axis_and_int32(tmp_path):
    x = i8(2, 6, 3)
    scale = rng.uniform(0.01, 0.2, 6).astype(np.float32)
    zp = rng.integers(-5, 5, 6).astype(np.int8)
    node = helper.make_node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=1)
    ours, ref = run_node(tmp_path, node, {"x": x}, {"s": scale, "z": zp}, {"y": np.float32})
    np.testing.assert_allclose(ours["y"], ref["y"], rtol=1e-6)
    b = rng.integers(-10**6, 10**6, 7).astype(np.int32)
    node = helper.make_node("DequantizeLinear", ["b", "s"], ["y"])
    ours, ref = run_node(tmp_path, node, {"b": b}, {"s": np.array(0.001, np.float32)},
                         {"y": np.float32})
    np.testing.assert_allclose(ours["y"], ref["y"], rtol=1e-6)


@pytest.mark.parametrize("kind", ["mixed", "positive", "zeros"])
def test_dynamic_quantize_linear(tmp_path, kind):
    x = (rng.standard_normal((4, 33)) * 3).astype(np.float32)
    if kind == "positive":
        x = np.abs(x) + 1
    elif kind == "zeros":
        x[...] = 0
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"])
    ours, ref = run_node(tmp_path, node, {"x": x}, {},
                         {"y": np.uint8, "s": np.float32, "z": np.uint8})
    np.testing.assert_array_equal(ours["y"], ref["y"])
    np.testing.assert_array_equal(ours["s"], ref["s"])
    np.testing.assert_array_equal(ours["z"], ref["z"])


@pytest.mark.parametrize("budget", [None, 2048])
def test_matmul_integer_runtime_zero_point_exact(tmp_path, budget):
    a = u8(2, 5, 64)
    b = w8(np.uint8, 64, 40)
    bz = rng.integers(-3, 3, 40).astype(np.int8)        # per column
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    ours, ref = run_node(tmp_path, node, {"a": a, "az": np.array(131, np.uint8)},
                         {"b": b, "bz": bz}, {"y": np.int32}, scratch_budget=budget)
    np.testing.assert_array_equal(ours["y"], ref["y"])


@pytest.mark.parametrize("budget", [None, 2048])
def test_matmul_integer_full_range_exact(tmp_path, budget):
    """Full-range uint8 x int8 (where onnxruntime may saturate): exact
    against int64 arithmetic."""
    a, b = u8(2, 5, 64), i8(64, 40)
    a[0, 0], b[:, 0] = 255, -128                        # the extreme pair sums
    bz = rng.integers(-3, 3, 40).astype(np.int8)
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    ours, _ = run_node(tmp_path, node, {"a": a, "az": np.array(131, np.uint8)},
                       {"b": b, "bz": bz}, {"y": np.int32}, scratch_budget=budget)
    exact = (a.astype(np.int64) - 131) @ (b.astype(np.int64) - bz.astype(np.int64))
    np.testing.assert_array_equal(ours["y"], exact)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_matmul_per_column(tmp_path, dt):
    a = u8(3, 48) if dt == np.uint8 else i8(3, 48)
    b = w8(dt, 48, 20)
    inits = {"as": np.array(0.02, np.float32), "az": np.array(7, dt), "b": b,
             "bs": rng.uniform(0.001, 0.01, 20).astype(np.float32),
             "bz": np.zeros(20, np.int8), "ys": np.array(0.05, np.float32),
             "yz": np.array(-3 if dt == np.int8 else 128, dt)}
    node = helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                            ["y"])
    ours, ref = run_node(tmp_path, node, {"a": a}, inits, {"y": dt})
    assert_within_quantum(ours, ref, ["y"])


CONV_CASES = {
    "3x3 pad stride 2": dict(x=(1, 3, 17, 15), w=(8, 3, 3, 3), pads=[1, 1, 1, 1], strides=[2, 2]),
    "depthwise": dict(x=(2, 6, 9, 9), w=(6, 1, 3, 3), pads=[1, 1, 1, 1], group=6),
    "grouped 1x1": dict(x=(1, 8, 5, 7), w=(12, 4, 1, 1), group=2),
    "dilated": dict(x=(1, 4, 12, 12), w=(5, 4, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2]),
    "1-D": dict(x=(1, 4, 20), w=(6, 4, 5), pads=[2, 2]),
}


@pytest.mark.parametrize("case", sorted(CONV_CASES))
@pytest.mark.parametrize("budget", [None, 1024])
def test_conv_integer_exact(tmp_path, case, budget):
    c = dict(CONV_CASES[case])
    x, w = u8(*c.pop("x")), u8(*c.pop("w"))
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], **c)
    ours, ref = run_node(tmp_path, node, {"x": x},
                         {"w": w, "xz": np.array(119, np.uint8), "wz": np.array(128, np.uint8)},
                         {"y": np.int32}, scratch_budget=budget)
    np.testing.assert_array_equal(ours["y"], ref["y"])


def test_conv_integer_runtime_zero_point(tmp_path):
    x = u8(1, 3, 10, 10)
    w = u8(4, 3, 3, 3)
    node = helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 1, 1, 1])
    ours, ref = run_node(tmp_path, node, {"x": x, "xz": np.array(200, np.uint8)},
                         {"w": w, "wz": np.array(128, np.uint8)}, {"y": np.int32})
    np.testing.assert_array_equal(ours["y"], ref["y"])


@pytest.mark.parametrize("case", sorted(CONV_CASES))
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_qlinear_conv_per_channel(tmp_path, case, dt):
    c = dict(CONV_CASES[case])
    xs, ws = c.pop("x"), c.pop("w")
    x = u8(*xs) if dt == np.uint8 else i8(*xs)
    w = w8(dt, *ws)
    cout = ws[0]
    inits = {"xs": np.array(0.02, np.float32), "xz": np.array(9, dt), "w": w,
             "ws": rng.uniform(0.001, 0.01, cout).astype(np.float32),
             "wz": np.zeros(cout, np.int8), "ys": np.array(0.04, np.float32),
             "yz": np.array(5, dt), "b": rng.integers(-2000, 2000, cout).astype(np.int32)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"],
                            ["y"], **c)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": dt}, scratch_budget=1024)
    assert_within_quantum(ours, ref, ["y"])


def qparams(prefix, dt, scale, zp):
    return {f"{prefix}s": np.array(scale, np.float32), f"{prefix}z": np.array(zp, dt)}


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize("b_shape, b_const", [((2, 3, 4, 5), False), ((1, 3, 1, 1), True),
                                              ((5,), False)])
def test_qlinear_binary(tmp_path, op, b_shape, b_const):
    a, b = u8(2, 3, 4, 5), u8(*b_shape)
    inits = {**qparams("a", np.uint8, 0.03, 120), **qparams("b", np.uint8, 0.02, 100),
             **qparams("c", np.uint8, 0.05 if op == "QLinearAdd" else 0.01, 110)}
    feeds = {"a": a}
    if b_const:
        inits["b"] = b
    else:
        feeds["b"] = b
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"],
                            domain="com.microsoft")
    ours, ref = run_node(tmp_path, node, feeds, inits, {"y": np.uint8}, contrib=True,
                         scratch_budget=256)
    assert_within_quantum(ours, ref, ["y"])


@pytest.mark.parametrize("op, attrs", [("QLinearSigmoid", {}),
                                       ("QLinearLeakyRelu", {"alpha": 0.1})])
def test_qlinear_unary(tmp_path, op, attrs):
    x = i8(3, 50)
    inits = {**qparams("x", np.int8, 0.05, -10), **qparams("y", np.int8, 1 / 256, -128)}
    if op == "QLinearLeakyRelu":
        inits.update(qparams("y", np.int8, 0.04, 0))
    node = helper.make_node(op, ["x", "xs", "xz", "ys", "yz"], ["y"], domain="com.microsoft",
                            **attrs)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.int8}, contrib=True)
    assert_within_quantum(ours, ref, ["y"])


@pytest.mark.parametrize("native", [True, False])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(tmp_path, channels_last, native):
    x = u8(2, 7, 6, 5)
    inits = {**qparams("x", np.uint8, 0.03, 128), **qparams("y", np.uint8, 0.01, 120)}
    node = helper.make_node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", channels_last=channels_last)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.uint8}, contrib=True,
                         native=native)
    assert_within_quantum(ours, ref, ["y"])


def test_qlinear_concat(tmp_path):
    a, b = u8(1, 3, 4, 4), u8(1, 5, 4, 4)
    inits = {**qparams("y", np.uint8, 0.05, 128), **qparams("a", np.uint8, 0.02, 100),
             **qparams("b", np.uint8, 0.07, 130)}
    node = helper.make_node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"],
                            ["y"], domain="com.microsoft", axis=1)
    ours, ref = run_node(tmp_path, node, {"a": a, "b": b}, inits, {"y": np.uint8}, contrib=True)
    assert_within_quantum(ours, ref, ["y"])


def test_qlinear_softmax(tmp_path):
    x = u8(4, 10)
    inits = {**qparams("x", np.uint8, 0.1, 128), **qparams("y", np.uint8, 1 / 256, 0)}
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", axis=-1, opset=13)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.uint8}, contrib=True)
    assert_within_quantum(ours, ref, ["y"])


@pytest.mark.parametrize("axis", [0, 1, -2])
def test_qlinear_softmax_over_a_middle_axis(tmp_path, axis):
    """Softmax over an axis that is not the last (YOLOv8's DFL head: axis 1
    of (1, 16, 4, N))."""
    x = u8(2, 16, 4, 9)
    inits = {**qparams("x", np.uint8, 0.1, 128), **qparams("y", np.uint8, 1 / 256, 0)}
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", axis=axis, opset=13)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.uint8}, contrib=True,
                         scratch_budget=1024)
    assert_within_quantum(ours, ref, ["y"])


def test_qlinear_softmax_axis_out_of_range_is_malformed(tmp_path):
    from pyarena.errors import GraphError
    inits = {**qparams("x", np.uint8, 0.1, 128), **qparams("y", np.uint8, 1 / 256, 0)}
    node = helper.make_node("QLinearSoftmax", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", axis=3, opset=13)
    with pytest.raises(GraphError, match="axis 3"):
        run_node(tmp_path, node, {"x": u8(2, 3, 4)}, inits, {"y": np.uint8}, contrib=True)


def test_max_pool_on_int8_pads_with_the_lowest_value(tmp_path):
    x = i8(1, 2, 5, 5) // 2 - 64          # every value negative: padding must not win
    node = helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    ours, ref = run_node(tmp_path, node, {"x": x}, {}, {"y": np.int8}, opset=12)
    np.testing.assert_array_equal(ours["y"], ref["y"])


def test_unsupported_quantization_is_refused_by_name(tmp_path):
    from pyarena.errors import UnsupportedOpError
    x = np.ones((2, 4), np.float32)
    node = helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1, block_size=2)
    with pytest.raises(UnsupportedOpError, match="block_size"):
        run_node(tmp_path, node, {"x": x}, {"s": np.full((2, 2), 0.1, np.float32),
                                            "z": np.zeros((2, 2), np.int8)},
                 {"y": np.int8}, opset=21)


@pytest.mark.parametrize("trans_b, quantized_out", [(0, True), (1, True), (1, False)])
def test_qgemm(tmp_path, trans_b, quantized_out):
    a = u8(3, 40)
    b = w8(np.uint8, 24, 40) if trans_b else w8(np.uint8, 40, 24)
    inits = {**qparams("a", np.uint8, 0.02, 128), "b": b,
             "bs": rng.uniform(0.001, 0.01, 24).astype(np.float32),
             "bz": np.zeros(24, np.int8), "c": rng.integers(-500, 500, 24).astype(np.int32)}
    ins = ["a", "as", "az", "b", "bs", "bz", "c"]
    if quantized_out:
        inits.update(qparams("y", np.uint8, 0.05, 120))
        ins += ["ys", "yz"]
    node = helper.make_node("QGemm", ins, ["y"], domain="com.microsoft", transB=trans_b,
                            alpha=0.5)
    out_dt = np.uint8 if quantized_out else np.float32
    ours, ref = run_node(tmp_path, node, {"a": a}, inits, {"y": out_dt}, contrib=True)
    if quantized_out:
        assert_within_quantum(ours, ref, ["y"])
    else:
        np.testing.assert_allclose(ours["y"], ref["y"], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("attrs", [dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
                                   dict(kernel_shape=[2, 2], count_include_pad=1,
                                        pads=[1, 1, 0, 0])])
def test_qlinear_average_pool(tmp_path, attrs):
    x = u8(1, 4, 9, 9)
    inits = {**qparams("x", np.uint8, 0.03, 128), **qparams("y", np.uint8, 0.02, 100)}
    node = helper.make_node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["y"],
                            domain="com.microsoft", **attrs)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.uint8}, contrib=True)
    assert_within_quantum(ours, ref, ["y"])


@pytest.mark.parametrize("case", ["3x3 pad stride 2", "depthwise", "grouped 1x1"])
def test_qlinear_conv_per_channel_weight_zero_point(tmp_path, case):
    c = dict(CONV_CASES[case])
    x, w = u8(*c.pop("x")), u8(*c.pop("w"))
    cout = w.shape[0]
    inits = {"xs": np.array(0.02, np.float32), "xz": np.array(9, np.uint8), "w": w,
             "ws": rng.uniform(0.001, 0.01, cout).astype(np.float32),
             "wz": rng.integers(100, 156, cout).astype(np.uint8),
             "ys": np.array(0.04, np.float32), "yz": np.array(5, np.uint8)}
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"],
                            ["y"], **c)
    ours, ref = run_node(tmp_path, node, {"x": x}, inits, {"y": np.uint8}, scratch_budget=1024)
    assert_within_quantum(ours, ref, ["y"])
