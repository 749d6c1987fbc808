"""TreeEnsemble (pyarena/runtime/kernels/ml.py, ai.onnx.ml opset 5): each
aggregate function against the ONNX reference implementation."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import pyarena


@pytest.mark.parametrize("agg", [0, 1, 2, 3])   # AVERAGE, SUM, MIN, MAX
def test_tree_ensemble_aggregates_like_the_onnx_reference(agg):
    # two trees of one split each: x0 <= 0.5 -> leaf, else leaf
    node = h.make_node(
        "TreeEnsemble", ["x"], ["y"], domain="ai.onnx.ml", aggregate_function=agg,
        n_targets=1, tree_roots=[0, 1], nodes_featureids=[0, 1],
        nodes_modes=numpy_helper.from_array(np.array([0, 0], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([0.5, -1.0], np.float32)),
        nodes_truenodeids=[0, 2], nodes_trueleafs=[1, 1],
        nodes_falsenodeids=[1, 3], nodes_falseleafs=[1, 1],
        leaf_targetids=[0, 0, 0, 0],
        leaf_weights=numpy_helper.from_array(np.array([1.0, 4.0, -2.0, 10.0], np.float32)))
    g = h.make_graph([node], "te", [h.make_tensor_value_info("x", T.FLOAT, [4, 2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21),
                                           h.make_opsetid("ai.onnx.ml", 5)])
    x = np.array([[0.0, -3.0], [1.0, 0.0], [0.4, 2.0], [0.9, -1.5]], np.float32)
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, {"x": x})[0]
    np.testing.assert_allclose(got, want, rtol=1e-6)
