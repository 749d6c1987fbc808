"""The ONNX node cases of CausalConvWithState (bias, past state, SiLU /
swish, a decode step, kernel size 1, float16), run through an
InferenceSession with every input fed at run time, against the reference
outputs and onnxruntime; and their function bodies, whose Conv takes its
weight fed at run time (a kernel per weight value)."""
import pytest

from helpers.node_session import cases, check_case

CASES = cases(r"test_causal_conv_with_state\w*", ("causal_conv_with_state",))
OWN = sorted(n for n in CASES if not n.endswith("_expanded"))
EXPANDED = sorted(n for n in CASES if n.endswith("_expanded"))


def test_the_forms_are_covered():
    assert {"test_causal_conv_with_state_with_bias_and_past_state",
            "test_causal_conv_with_state_swish_alias", "test_causal_conv_with_state_decode_step",
            "test_causal_conv_with_state_kernel_size_one",
            "test_causal_conv_with_state_silu_fp16"} <= set(OWN)


@pytest.mark.parametrize("name", OWN)
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("name", EXPANDED)
def test_function_body(name, tmp_path):
    check_case(CASES[name], tmp_path)
