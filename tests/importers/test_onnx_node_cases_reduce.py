"""The ONNX node cases of the reductions (every Reduce* op, every opset's
form: axes as an attribute or an input, keepdims, noop_with_empty_axes,
empty sets; their function bodies, ``_expanded``, whose ReduceSum reads
axes fed at run time) and of CumSum / CumProd (exclusive, reverse), run
through an InferenceSession with every input fed at run time, against the
reference outputs and onnxruntime."""
import pytest

from helpers.node_session import cases, check_case

MODULES = ("reduce_log_sum", "reduce_log_sum_exp", "reducel1", "reducel2", "reducesumsquare",
           "reduceprod", "reducemax", "reducemin", "reducemean", "reducesum", "cumsum",
           "cumprod")
# test_reduce_max_empty_set_bool: onnxruntime has no bool ReduceMax
CASES = cases(r"test_(reduce_\w+|cumsum\w*|cumprod\w*)(?<!_empty_set_bool)", MODULES)


def test_every_form_is_covered():
    names = set(CASES)
    for op in ("reduce_log_sum", "reduce_log_sum_exp", "reduce_l1", "reduce_l2",
               "reduce_sum_square", "reduce_prod", "reduce_max", "reduce_min", "cumprod"):
        assert any(n.startswith(f"test_{op}_") for n in names), op
    assert {"test_reduce_prod_empty_set", "test_reduce_max_empty_set",
            "test_reduce_min_empty_set", "test_reduce_l2_keep_dims_example_expanded",
            "test_reduce_log_sum_exp_empty_set_expanded", "test_cumprod_1d_reverse_exclusive",
            "test_cumsum_1d_reverse_exclusive", "test_cumprod_1d_int32_exclusive"} <= names


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)
