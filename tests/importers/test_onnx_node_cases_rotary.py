"""The ONNX node cases of RotaryEmbedding (3-D and 4-D inputs, position
ids, interleaved pairs, partial rotation) and its function bodies, run
through an InferenceSession with every input fed at run time, against
the reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case

CASES = cases(r"test_rotary_embedding\w*", ("rotaryembedding",))


def test_the_forms_are_covered():
    assert {"test_rotary_embedding", "test_rotary_embedding_3d_input",
            "test_rotary_embedding_interleaved", "test_rotary_embedding_no_position_ids",
            "test_rotary_embedding_with_rotary_dim",
            "test_rotary_embedding_with_interleaved_rotary_dim_expanded"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)
