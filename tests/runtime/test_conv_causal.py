"""CausalConvWithState (pyarena/runtime/kernels/conv.py) against the ONNX
reference implementation, down to a kernel of one step (no state kept)."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import pyarena


@pytest.mark.parametrize("k", [1, 3])
def test_causal_conv_matches_the_onnx_reference(k):
    c, length = 4, 6
    node = h.make_node("CausalConvWithState", ["x", "w", "b"], ["y", "state"])
    g = h.make_graph([node], "cc", [h.make_tensor_value_info("x", T.FLOAT, [1, c, length]),
                                    h.make_tensor_value_info("w", T.FLOAT, [c, 1, k]),
                                    h.make_tensor_value_info("b", T.FLOAT, [c])],
                     [h.make_tensor_value_info("y", T.FLOAT, None),
                      h.make_tensor_value_info("state", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 27)])
    rng = np.random.default_rng(k)
    feeds = {"x": rng.standard_normal((1, c, length)).astype(np.float32),
             "w": rng.standard_normal((c, 1, k)).astype(np.float32),
             "b": rng.standard_normal(c).astype(np.float32)}
    want = ReferenceEvaluator(model).run(None, feeds)
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)
    for g_, w in zip(got, want):
        assert g_.shape == w.shape
        np.testing.assert_allclose(g_, w, rtol=1e-5, atol=1e-6)
