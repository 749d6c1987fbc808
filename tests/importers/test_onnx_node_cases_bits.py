"""The ONNX node cases of the bitwise operators -- BitShift (opset 28's
signed types, negative amounts and amounts of the width or more),
BitwiseAnd / Or / Xor / Not, BitCast -- run through an InferenceSession
with every input fed at run time, against the reference outputs and
onnxruntime; and the forms pyarena refuses, with its own error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

MODULES = ("bitshift", "bitwiseand", "bitwiseor", "bitwisexor", "bitwisenot", "bitcast")
CASES = cases(r"test_bit(shift|wise|cast)_\w+", MODULES)
# onnxruntime has no bool BitCast: checked against the reference only
NOT_IN_ORT = {"test_bitcast_bool_to_uint8"}


def test_every_op_is_covered():
    for prefix in ("bitshift_left", "bitshift_right", "bitwise_and", "bitwise_or",
                   "bitwise_xor", "bitwise_not", "bitcast"):
        assert sum(n.startswith(f"test_{prefix}_") for n in CASES) >= 2, prefix
    assert {"test_bitshift_right_int8_negative_shift", "test_bitshift_left_int32_shift_ge_width",
            "test_bitshift_right_uint64", "test_bitcast_scalar_float32_to_int32"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path, ort=name not in NOT_IN_ORT)


def _model(tmp_path, node, x_type, y_type, out_type, opset=26):
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", x_type, [3]),
                           helper.make_tensor_value_info("s", y_type, [3])][:len(node.input)],
                          [helper.make_tensor_value_info("y", out_type, [3])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


@pytest.mark.parametrize("node, types, match", [
    (helper.make_node("BitShift", ["x", "s"], ["y"], direction="UP"),
     (TensorProto.INT32,) * 3, "direction must be LEFT or RIGHT"),
    (helper.make_node("BitCast", ["x"], ["y"], to=TensorProto.INT64),
     (TensorProto.FLOAT, TensorProto.FLOAT, TensorProto.INT64), "same width"),
])
def test_bad_forms_are_refused_with_a_pyarena_error(tmp_path, node, types, match):
    path = _model(tmp_path, node, *types)
    feeds = {"x": np.zeros(3, helper.tensor_dtype_to_np_dtype(types[0]))}
    if len(node.input) > 1:
        feeds["s"] = np.ones(3, helper.tensor_dtype_to_np_dtype(types[1]))
    with pytest.raises(pyarena.PyArenaError, match=match):
        pyarena.InferenceSession(path).run(None, feeds)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int32, np.uint64])
@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
def test_bitshift_of_any_amount_matches_onnxruntime(tmp_path, dtype, direction):
    """Every amount of the type -- within the width, at it, beyond it and
    (signed) negative -- against onnxruntime."""
    from helpers.model_zoo import ort_run
    info = np.iinfo(dtype)
    bits = info.bits
    rng = np.random.default_rng(bits + len(direction))
    amounts = list(range(bits + 3)) + [info.max] + ([-1, -bits, info.min] if info.min else [])
    n = 2 * len(amounts)
    x = rng.integers(info.min, info.max, n, dtype=dtype, endpoint=True)
    s = np.resize(np.array(amounts, dtype), n)
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    node = helper.make_node("BitShift", ["x", "s"], ["y"], direction=direction)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", t, [n]),
                                        helper.make_tensor_value_info("s", t, [n])],
                          [helper.make_tensor_value_info("y", t, [n])])
    path = tmp_path / "shift.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 28)]), str(path))
    got, = pyarena.InferenceSession(str(path)).run(None, {"x": x, "s": s})
    want = ort_run(path, {"x": x, "s": s})["y"]
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
    assert (want[s.view(f"u{np.dtype(dtype).itemsize}") >= bits] == 0).any()
