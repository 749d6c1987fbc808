"""The ONNX node cases of EyeLike, Det, ReverseSequence (lengths fed at
run time), LpNormalization and Col2Im (image and block shapes fed at run
time), run through an InferenceSession with every
input fed at run time, against the reference outputs and onnxruntime; and
their bad inputs, refused with pyarena's errors."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

MODULES = ("eyelike", "det", "reversesequence", "lpnormalization", "col2im")
# test_reversesequence_bfloat16: onnxruntime has no bfloat16 ReverseSequence
CASES = cases(r"test_(eyelike\w*|det\w*|reversesequence_(time|batch)"
              r"|l[p12]normalization\w*|col2im\w*)", MODULES)


def test_the_forms_are_covered():
    assert {"test_eyelike_populate_off_main_diagonal", "test_eyelike_with_dtype", "test_det_nd",
            "test_reversesequence_time", "test_reversesequence_batch",
            "test_l2normalization_axis_0", "test_l1normalization_axis_last", "test_col2im_pads",
            "test_col2im_dilations", "test_col2im_strides", "test_col2im_5d"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _save(tmp_path, node, ins, outs, opset=21):
    path = tmp_path / "m.onnx"
    g = helper.make_graph([node], "g", ins, outs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)]), str(path))
    return str(path)


def test_sequence_lengths_beyond_the_time_axis_are_refused(tmp_path):
    path = _save(tmp_path, helper.make_node("ReverseSequence", ["x", "L"], ["y"]),
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2]),
                  helper.make_tensor_value_info("L", TensorProto.INT64, [2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    sess = pyarena.InferenceSession(path)
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    y, = sess.run(None, {"x": x, "L": np.array([3, 1])})
    np.testing.assert_array_equal(y[:, 0], x[::-1, 0])
    np.testing.assert_array_equal(y[:, 1], x[:, 1])
    with pytest.raises(pyarena.PyArenaError, match=r"sequence_lens \[4, 1\] must lie in"):
        sess.run(None, {"x": x, "L": np.array([4, 1])})


def test_an_lp_norm_other_than_1_or_2_is_refused(tmp_path):
    path = _save(tmp_path, helper.make_node("LpNormalization", ["x"], ["y"], p=3),
                 [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 2])],
                 [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])])
    with pytest.raises(pyarena.UnsupportedOpError, match="p must be 1 or 2"):
        pyarena.InferenceSession(path).run(None, {"x": np.ones((3, 2), np.float32)})
