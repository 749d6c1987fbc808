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


@pytest.mark.parametrize("outs", [["loss"], ["loss", "logp"]])
def test_softmax_cross_entropy_with_or_without_log_prob_matches_the_onnx_reference(outs):
    node = h.make_node("SoftmaxCrossEntropyLoss", ["s", "t"], outs, reduction="mean")
    g = h.make_graph([node], "l", [h.make_tensor_value_info("s", T.FLOAT, [3, 5]),
                                   h.make_tensor_value_info("t", T.INT64, [3])],
                     [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
    rng = np.random.default_rng(1)
    feeds = {"s": rng.standard_normal((3, 5)).astype(np.float32),
             "t": np.array([0, 4, 2], np.int64)}
    want = ReferenceEvaluator(model).run(None, feeds)
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-6)
