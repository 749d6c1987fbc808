"""The ONNX node cases of BatchNormalization (inference), InstanceNormalization
and GroupNormalization with their scale, bias, mean and variance fed at run
time, through an InferenceSession, against the reference outputs and
onnxruntime; training mode too (Y from the batch's statistics, the running
mean and variance outputs)."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.node_session import cases, check_case

MODULES = ("batch_normalization", "instance_normalization", "groupnormalization")
CASES = cases(r"test_(batchnorm\w*|instancenorm\w*|group_normalization\w*)", MODULES)


def test_the_forms_are_covered():
    assert {"test_batchnorm_epsilon", "test_instancenorm_example",
            "test_group_normalization_epsilon", "test_group_normalization_example_expanded",
            "test_batchnorm_example_training_mode", "test_batchnorm_epsilon_training_mode"} \
        <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _bn_model(outputs, **attrs):
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]),
         helper.make_node("BatchNormalization", ["c", "s", "b", "m", "v"], outputs, **attrs)],
        "bn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 8, 8])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outputs if o],
        [helper.make_tensor(n, TensorProto.FLOAT, v.shape, v.reshape(-1)) for n, v in (
            ("w", np.eye(3, dtype=np.float32).reshape(3, 3, 1, 1) * 2),
            ("s", np.array([1, 2, 3], np.float32)), ("b", np.array([0, 1, -1], np.float32)),
            ("m", np.array([5, 5, 5], np.float32)), ("v", np.array([4, 4, 4], np.float32)))])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString()


@pytest.mark.parametrize("outputs", [["y"], ["y", "rm", "rv"], ["y", "", "rv"]])
def test_training_mode_uses_the_batch_statistics_after_a_conv(outputs):
    """A Conv before it is not folded with its constant statistics, and Y
    uses the batch's mean and variance whichever outputs are asked for."""
    import pyarena
    x = np.random.default_rng(0).standard_normal((2, 3, 8, 8)).astype(np.float32)
    got = pyarena.InferenceSession(_bn_model(outputs, training_mode=1, momentum=0.8)).run(
        None, {"x": x})
    c = 2 * x
    mean, var = c.mean(axis=(0, 2, 3)), c.var(axis=(0, 2, 3))
    b = (-1, 1, 1)
    want = {"y": (c - mean.reshape(b)) / np.sqrt(var.reshape(b) + 1e-5) *
            np.array([1, 2, 3]).reshape(b) + np.array([0, 1, -1]).reshape(b),
            "rm": 5 * 0.8 + mean * 0.2, "rv": 4 * 0.8 + var * 0.2}
    for g, name in zip(got, [o for o in outputs if o]):
        np.testing.assert_allclose(g, want[name], rtol=1e-4, atol=1e-5)


def test_running_outputs_without_training_mode_are_refused():
    import pyarena
    with pytest.raises(pyarena.PyArenaError, match="training_mode=1"):
        pyarena.InferenceSession(_bn_model(["y", "rm", "rv"])).run(
            None, {"x": np.zeros((2, 3, 8, 8), np.float32)})
