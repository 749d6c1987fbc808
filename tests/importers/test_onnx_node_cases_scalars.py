"""Operators that need the value of an input fed at run time: OneHot's
depth (a float scalar) with its values read at run time, Clip's bounds,
Pad's constant value, the scales of DynamicQuantizeLinear's function body.
The kernel is built for each value seen (a pool op,
``runtime/kernels/pool_op.py``).  The ONNX node cases run through an
InferenceSession with every input fed at run time, against the reference
outputs and onnxruntime."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

MODULES = ("onehot", "clip", "pad", "dynamicquantizelinear")
# test_onehot_with_bfloat16_values: onnxruntime has no bfloat16 OneHot
CASES = cases(r"test_(onehot_(?!with_bfloat16)\w+|clip\w*|constant_pad\w*"
              r"|dynamicquantizelinear\w*_expanded)", MODULES)


def test_the_forms_are_covered():
    assert {"test_onehot_without_axis", "test_onehot_with_negative_axis",
            "test_onehot_out_of_range_indices", "test_clip_example", "test_clip_default_min",
            "test_constant_pad", "test_dynamicquantizelinear_expanded"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _clip_model(tmp_path):
    g = helper.make_graph(
        [helper.make_node("Clip", ["x", "lo", "hi"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 5]),
         helper.make_tensor_value_info("lo", TensorProto.FLOAT, []),
         helper.make_tensor_value_info("hi", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])])
    path = tmp_path / "clip.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    return str(path)


def test_each_value_of_a_scalar_gets_its_own_kernel(tmp_path):
    """The bounds change between runs (and come back): every run clips by
    the bounds it was fed."""
    sess = pyarena.InferenceSession(_clip_model(tmp_path))
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32) * 3
    for lo, hi in [(-1, 1), (-0.5, 2), (0, 0.25), (-1, 1)]:
        lo, hi = np.float32(lo), np.float32(hi)
        y, = sess.run(None, {"x": x, "lo": np.array(lo), "hi": np.array(hi)})
        np.testing.assert_array_equal(y, np.clip(x, lo, hi))


def test_onehot_values_that_are_not_a_pair_are_refused(tmp_path):
    g = helper.make_graph(
        [helper.make_node("OneHot", ["i", "d", "v"], ["y"])], "g",
        [helper.make_tensor_value_info("i", TensorProto.INT64, [3]),
         helper.make_tensor_value_info("v", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 4])],
        initializer=[helper.make_tensor("d", TensorProto.INT64, [], [4])])
    path = tmp_path / "onehot.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    with pytest.raises(pyarena.PyArenaError, match="two elements"):
        pyarena.InferenceSession(str(path)).run(
            None, {"i": np.arange(3), "v": np.zeros(3, np.float32)})
