"""The ONNX node cases of LinearAttention (update rules linear, gated,
delta and gated_delta; per-head and per-feature decay; grouped and
multi-query heads; past state; decode steps; float16) and its function
bodies, run through an InferenceSession with every input fed at run time,
against the reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case

CASES = cases(r"test_linear_attention\w*", ("linear_attention",))


def test_the_forms_are_covered():
    assert {"test_linear_attention_linear", "test_linear_attention_gated_per_head_decay",
            "test_linear_attention_delta", "test_linear_attention_gated_delta_gqa",
            "test_linear_attention_gated_delta_mqa", "test_linear_attention_prefill_with_past",
            "test_linear_attention_explicit_scale", "test_linear_attention_fp16"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)
