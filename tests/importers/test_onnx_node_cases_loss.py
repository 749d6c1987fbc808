"""The ONNX node cases of NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (reductions none / sum / mean, class weights,
ignore_index, extra dims, the log_prob output) and of
SoftmaxCrossEntropyLoss's function bodies, run through an
InferenceSession with every input fed at run time, against the
reference outputs and onnxruntime; a target class out of range is
refused with pyarena's error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

MODULES = ("negativeloglikelihoodloss", "softmax_cross_entropy_loss")
CASES = cases(r"test_(nllloss\w*|sce\w*)", MODULES)


def test_the_forms_are_covered():
    names = set(CASES)
    assert {"test_nllloss_NCd1d2_with_weight_reduction_sum_ii",
            "test_nllloss_NCd1_ii_expanded", "test_sce_mean_no_weight_ii_4d_log_prob",
            "test_sce_NCd1d2d3_none_no_weight_negative_ii", "test_sce_NCd1_mean_weight_negative_ii",
            "test_nllloss_NCd1d2d3_sum_weight_high_ii"} <= names
    assert len(names) >= 80


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def test_a_target_out_of_range_is_refused(tmp_path):
    g = helper.make_graph(
        [helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="sum")],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
              helper.make_tensor_value_info("t", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])])
    path = tmp_path / "nll.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))
    sess = pyarena.InferenceSession(str(path))
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert sess.run(None, {"x": x, "t": np.array([2, 0])})[0] == -(x[0, 2] + x[1, 0])
    with pytest.raises(pyarena.PyArenaError, match=r"target classes must lie in \[0, 3\)"):
        sess.run(None, {"x": x, "t": np.array([3, 0])})
