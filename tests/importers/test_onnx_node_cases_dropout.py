"""The ONNX node cases of Dropout with its mask output: in inference mode
(or training mode with ratio 0) the output is the input and the mask all
true; training mode with a ratio above 0 stays refused (its output is
random)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.node_session import cases, check_case, check_refused

CASES = cases(r"test_(training_)?dropout\w*mask\w*", ("dropout",))
REFUSED = {"test_training_dropout_default_mask": "training mode",
           "test_training_dropout_mask": "training mode"}


def test_the_forms_are_covered():
    assert {"test_dropout_default_mask", "test_dropout_default_mask_ratio",
            "test_training_dropout_zero_ratio_mask"} <= set(CASES)
    assert set(REFUSED) <= set(CASES)


@pytest.mark.parametrize("name", sorted(set(CASES) - set(REFUSED)))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_case(name, tmp_path):
    check_refused(CASES[name], tmp_path, REFUSED[name])


def test_the_mask_is_rewritten_every_run():
    """The mask's memory may be shared with other tensors between runs:
    it is filled each run, not once."""
    import pyarena
    g = helper.make_graph(
        [helper.make_node("Dropout", ["x"], ["y", "m"]),
         helper.make_node("Not", ["m"], ["n"])], "d",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3]),
         helper.make_tensor_value_info("n", TensorProto.BOOL, [2, 3])])
    sess = pyarena.InferenceSession(helper.make_model(
        g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    for _ in range(2):
        y, n = sess.run(None, {"x": x})
        np.testing.assert_array_equal(y, x)
        assert not n.any()
