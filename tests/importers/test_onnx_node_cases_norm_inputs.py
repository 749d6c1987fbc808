"""The ONNX node cases of BatchNormalization (inference), InstanceNormalization
and GroupNormalization with their scale, bias, mean and variance fed at run
time, through an InferenceSession, against the reference outputs and
onnxruntime; training mode stays refused by name."""
import pytest

from helpers.node_session import cases, check_case, check_refused

MODULES = ("batch_normalization", "instance_normalization", "groupnormalization")
CASES = cases(r"test_(batchnorm\w*|instancenorm\w*|group_normalization\w*)", MODULES)
REFUSED = {"test_batchnorm_example_training_mode": "training-mode outputs",
           "test_batchnorm_epsilon_training_mode": "training-mode outputs"}


def test_the_forms_are_covered():
    assert {"test_batchnorm_epsilon", "test_instancenorm_example",
            "test_group_normalization_epsilon", "test_group_normalization_example_expanded"} \
        <= set(CASES)
    assert set(REFUSED) <= set(CASES)


@pytest.mark.parametrize("name", sorted(set(CASES) - set(REFUSED)))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_case(name, tmp_path):
    check_refused(CASES[name], tmp_path, REFUSED[name])
