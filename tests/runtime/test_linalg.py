"""RotaryEmbedding and TFLite's FULLY_CONNECTED (pyarena/runtime/kernels/
linalg.py): against the ONNX reference implementation, and the size rule
the TFLite interpreter applies."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import pyarena
from helpers.tflite_util import TFLiteBuilder
from pyarena.importers import load_model
from pyarena.runtime import Executor


@pytest.mark.parametrize("interleaved", [0, 1])
def test_rotary_embedding_matches_the_onnx_reference(interleaved):
    b, s, heads, d = 1, 3, 2, 8
    node = h.make_node("RotaryEmbedding", ["x", "cos", "sin", "pos"], ["y"],
                       interleaved=interleaved, num_heads=heads)
    g = h.make_graph([node], "rot",
                     [h.make_tensor_value_info("x", T.FLOAT, [b, s, heads * d]),
                      h.make_tensor_value_info("cos", T.FLOAT, [8, d // 2]),
                      h.make_tensor_value_info("sin", T.FLOAT, [8, d // 2]),
                      h.make_tensor_value_info("pos", T.INT64, [b, s])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 23)])
    rng = np.random.default_rng(interleaved)
    ang = rng.uniform(0, 3, (8, d // 2))
    feeds = {"x": rng.standard_normal((b, s, heads * d)).astype(np.float32),
             "cos": np.cos(ang).astype(np.float32), "sin": np.sin(ang).astype(np.float32),
             "pos": np.array([[0, 2, 5]], np.int64)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_fully_connected_input_not_a_multiple_of_the_weights_depth_is_refused(tmp_path):
    # the interpreter's rule: the input's size is a multiple of the weights' last dim
    B = TFLiteBuilder()
    x = B.tensor("x", (1, 10))
    w = B.const("w", np.ones((3, 4)))
    y = B.tensor("y", (2, 3))
    B.op("FULLY_CONNECTED", [x, w], [y])
    path = B.save(tmp_path / "fc.tflite", [x], [y])
    with pytest.raises(pyarena.PyArenaError, match="not a multiple of 4"):
        Executor(load_model(path))
