"""Reductions over an empty axis (pyarena/runtime/kernels/normalization.py):
the reduction's identity, as the ONNX reference gives it (opset 18:
ReduceMax of nothing is the lowest value, ReduceMin the highest)."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import pyarena


@pytest.mark.parametrize("op", ["ReduceMax", "ReduceMin", "ReduceSum", "ReduceProd"])
def test_a_reduction_over_an_empty_axis_matches_the_onnx_reference(op):
    node = h.make_node(op, ["x", "axes"], ["y"], keepdims=0)
    g = h.make_graph([node], "r", [h.make_tensor_value_info("x", T.FLOAT, [3, 0])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)],
                     [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    x = np.zeros((3, 0), np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_array_equal(got, want)
