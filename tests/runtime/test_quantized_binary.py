"""QLinearAdd / QLinearMul (runtime/kernels/quantized_binary.py): the bits
of onnxruntime, on the native path and on the NumPy path, for every
broadcast form and both 8-bit types; the two paths agree bit for bit on
random shapes, broadcasts, scales and zero points (hypothesis); the
broadcast's loops; the NumPy path's steps within its budget."""
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from helpers.model_zoo import ort_run  # noqa: E402
from pyarena.importers import load_model  # noqa: E402
from pyarena.runtime import Executor  # noqa: E402
from pyarena.runtime.kernels import graph_kernel  # noqa: E402
from pyarena.runtime.kernels.quantization import STEP_ELEMENTS  # noqa: E402
from pyarena.runtime.kernels.quantized_binary import loops  # noqa: E402

RANGE = {np.uint8: (0, 255), np.int8: (-128, 127)}


def save_model(path, op, a_shape, b_shape, dt, q, b_const=None):
    """One QLinearAdd / Mul node; ``q``: the scales and zero points by
    input name (as, az, bs, bz, cs, cz); ``b_const`` B as an initializer."""
    tp = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    ins = [helper.make_tensor_value_info("a", tp, list(a_shape))]
    inits = [numpy_helper.from_array(np.array(v, np.float32 if k.endswith("s") else dt), k)
             for k, v in q.items()]
    if b_const is None:
        ins.append(helper.make_tensor_value_info("b", tp, list(b_shape)))
    else:
        inits.append(numpy_helper.from_array(b_const, "b"))
    node = helper.make_node(op, ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["y"],
                            domain="com.microsoft")
    g = helper.make_graph([node], "q", ins, [helper.make_tensor_value_info("y", tp, None)],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13),
                                            helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = min(m.ir_version, 10)
    onnx.save(m, str(path))


def ours(path, feeds, native, budget=None):
    graph = load_model(str(path), native=native, scratch_budget=budget)
    kernel = graph_kernel(graph, graph.ops[0])
    return np.array(Executor(graph).run(feeds)["y"]), kernel.path


def random_q(rng, op, dt):
    lo, hi = RANGE[dt]
    sa, sb = (np.float32(rng.uniform(0.002, 0.2)) for _ in range(2))
    sc = rng.uniform(0.002, 0.3) if op == "QLinearAdd" else sa * sb * rng.uniform(10, 300)
    return {"as": sa, "bs": sb, "cs": np.float32(sc), "az": rng.integers(lo, hi + 1),
            "bz": rng.integers(lo, hi + 1), "cz": rng.integers(lo, hi + 1)}


SHAPES = [((2, 3, 9, 11), (2, 3, 9, 11)), ((2, 3, 9, 11), (1,)), ((1,), (2, 3, 9, 11)),
          ((2, 3, 9, 11), (1, 3, 1, 1)), ((1, 3, 1, 1), (2, 3, 9, 11)),
          ((2, 3, 9, 11), (11,)), ((2, 1, 9, 11), (1, 3, 1, 1)), ((2, 3, 9, 1), (1, 1, 1, 11)),
          ((1,), (1,)), ((3, 1, 5), (4, 1)), ((2, 1, 3, 1, 5), (1, 4, 1, 6, 1))]


@pytest.mark.parametrize("a_shape, b_shape", SHAPES)
@pytest.mark.parametrize("dt", [np.uint8, np.int8])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_the_bits_of_onnxruntime(tmp_path, op, dt, a_shape, b_shape):
    rng = np.random.default_rng(abs(hash((op, a_shape, b_shape, dt))) % 2**32)
    lo, hi = RANGE[dt]
    for k in range(6):
        path = tmp_path / f"m{k}.onnx"
        save_model(path, op, a_shape, b_shape, dt, random_q(rng, op, dt))
        feeds = {"a": rng.integers(lo, hi + 1, a_shape).astype(dt),
                 "b": rng.integers(lo, hi + 1, b_shape).astype(dt)}
        ref = ort_run(path, feeds)["y"]
        for native in (True, False):
            y, kind = ours(path, feeds, native, budget=512)
            assert y.dtype == ref.dtype and y.shape == ref.shape
            assert np.array_equal(y, ref), (native, kind, np.abs(y.astype(int) - ref).max())


def test_paths_as_claimed(tmp_path):
    """Native up to three loops, NumPy past them or with Graph.native off."""
    q = {"as": 0.1, "bs": 0.1, "cs": 0.2, "az": 1, "bz": 2, "cz": 3}
    feeds = {"a": np.ones((2, 3, 4), np.uint8), "b": np.ones((3, 4), np.uint8)}
    save_model(tmp_path / "a.onnx", "QLinearAdd", (2, 3, 4), (3, 4), np.uint8, q)
    assert ours(tmp_path / "a.onnx", feeds, True)[1] == "native"
    assert ours(tmp_path / "a.onnx", feeds, False)[1] == "numpy"
    save_model(tmp_path / "b.onnx", "QLinearAdd", (2, 3, 4, 5), (1, 3, 1, 5), np.uint8, q)
    feeds = {"a": np.ones((2, 3, 4, 5), np.uint8), "b": np.ones((1, 3, 1, 5), np.uint8)}
    assert ours(tmp_path / "b.onnx", feeds, True)[1] == "numpy"    # four runs


def test_loops():
    assert loops((2, 3, 4, 5), (1, 3, 1, 1), (2, 3, 4, 5)) == [
        ((True, False), 2), ((True, True), 3), ((True, False), 20)]
    assert loops((1,), (4, 5), (4, 5)) == [((False, True), 20)]
    assert loops((1, 3, 1), (1, 3, 1), (1, 3, 1)) == [((True, True), 3)]
    assert loops((1,), (1,), (1,)) == []


def test_numpy_steps_within_budget_but_not_below_the_floor(tmp_path):
    q = {"as": 0.1, "bs": 0.1, "cs": 0.2, "az": 1, "bz": 2, "cz": 3}
    shape = (64, 8, 8)
    save_model(tmp_path / "m.onnx", "QLinearMul", shape, shape, np.uint8, q)
    graph = load_model(str(tmp_path / "m.onnx"), native=False, scratch_budget=1)
    k = graph_kernel(graph, graph.ops[0])
    assert k.rows * 64 >= min(math.prod(shape), STEP_ELEMENTS)
    assert k.rows < 64                    # (and in pieces: 64 rows are the whole)


def test_numpy_steps_take_the_quantized_floor(tmp_path):
    """A budget of a quarter of the op's bytes (16 KiB here) fits 10 rows
    of 128; the quantized floor (STEP_ELEMENTS) raises that to 16, not to the
    float kernels' larger floor, whose scratch would set a small int8 model's
    arena."""
    q = {"as": 0.1, "bs": 0.1, "cs": 0.2, "az": 1, "bz": 2, "cz": 3}
    save_model(tmp_path / "m.onnx", "QLinearAdd", (64, 128), (64, 128), np.uint8, q)
    graph = load_model(str(tmp_path / "m.onnx"), native=False)
    k = graph_kernel(graph, graph.ops[0])
    assert k.rows == -(-STEP_ELEMENTS // 128) == 16


@st.composite
def cases(draw):
    nd = draw(st.integers(1, 4))
    out = [draw(st.integers(1, 6)) for _ in range(nd)]
    a = [d if draw(st.booleans()) else 1 for d in out]
    b = [d if draw(st.booleans()) else 1 for d in out]
    a = a[draw(st.integers(0, nd - 1)):] if draw(st.booleans()) else a
    b = b[draw(st.integers(0, nd - 1)):] if draw(st.booleans()) else b
    dt = draw(st.sampled_from([np.uint8, np.int8]))
    lo, hi = RANGE[dt]
    op = draw(st.sampled_from(["QLinearAdd", "QLinearMul"]))
    scale = st.floats(2.0 ** -10, 1.0, width=32)
    zp = st.integers(lo, hi)
    q = {"as": draw(scale), "bs": draw(scale), "cs": draw(scale), "az": draw(zp),
         "bz": draw(zp), "cz": draw(zp)}
    return op, dt, tuple(a), tuple(b), q, draw(st.booleans()), draw(st.integers(0, 2**32 - 1))


@settings(max_examples=60, deadline=None)
@given(cases())
def test_native_and_numpy_paths_agree(case):
    op, dt, a_shape, b_shape, q, b_const, seed = case
    rng = np.random.default_rng(seed)
    lo, hi = RANGE[dt]
    a = rng.integers(lo, hi + 1, a_shape).astype(dt)
    b = rng.integers(lo, hi + 1, b_shape).astype(dt)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "m.onnx"
        save_model(path, op, a_shape, b_shape, dt, q, b if b_const else None)
        feeds = {"a": a} if b_const else {"a": a, "b": b}
        fast, _ = ours(path, feeds, True)
        slow, kind = ours(path, feeds, False, budget=64)
    assert kind == "numpy"
    assert np.array_equal(fast, slow)


@pytest.mark.parametrize("dt", [np.uint8, np.int8])
def test_a_product_past_int32_is_the_lowest_value_as_in_onnxruntime(tmp_path, dt):
    """onnxruntime's float -> int32 conversion gives INT32_MIN for 2^31 and
    above, so a huge product saturates to the type's lowest value, not its
    highest."""
    lo, hi = RANGE[dt]
    q = {"as": 1.0, "bs": 1.0, "cs": 1e-30, "az": 0, "bz": 0, "cz": 0}
    save_model(tmp_path / "m.onnx", "QLinearMul", (4,), (4,), dt, q)
    feeds = {"a": np.array([hi, 1, 0, 1], dt), "b": np.array([hi, 1, 5, 0], dt)}
    ref = ort_run(tmp_path / "m.onnx", feeds)["y"]
    assert ref.tolist() == [lo, lo, 0, 0]
    for native in (True, False):
        assert np.array_equal(ours(tmp_path / "m.onnx", feeds, native)[0], ref)


def test_the_fused_constant_part_of_onnxruntime(tmp_path):
    """onnxruntime's Add computes zy - fma(rA, za, rB * zb) in one rounding:
    with two roundings this element would be 27 (found by search)."""
    q = {"as": 0.0709, "bs": 0.0155, "cs": 0.06, "az": 231, "bz": 69, "cz": 92}
    save_model(tmp_path / "m.onnx", "QLinearAdd", (2,), (2,), np.uint8, q)
    feeds = {"a": np.array([141, 141], np.uint8), "b": np.array([231, 231], np.uint8)}
    ref = ort_run(tmp_path / "m.onnx", feeds)["y"]
    assert ref.tolist() == [28, 28]
    for native in (True, False):
        assert ours(tmp_path / "m.onnx", feeds, native)[0].tolist() == [28, 28]
