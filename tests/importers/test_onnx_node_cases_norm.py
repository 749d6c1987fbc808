"""The ONNX node cases of LayerNormalization (scale and bias fed at run
time), RMSNormalization, MeanVarianceNormalization and Swish, with their
function bodies, run through an InferenceSession with every input fed at
run time, against the reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case

MODULES = ("layernormalization", "rmsnormalization", "meanvariancenormalization", "swish")
CASES = cases(r"test_(layer_normalization\w*|rms_normalization\w*|mvn\w*|swish\w*)", MODULES)


def test_the_forms_are_covered():
    names = set(CASES)
    assert {"test_layer_normalization_4d_axis0", "test_layer_normalization_2d_axis1_expanded",
            "test_rms_normalization_4d_axis_negative_4", "test_mvn", "test_mvn_expanded",
            "test_swish", "test_swish_expanded"} <= names
    assert sum(n.startswith("test_rms_normalization") for n in names) >= 10


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)
