"""BatchNormalization in training mode (pyarena/runtime/kernels/
batch_norm_training.py): the output and the running mean and variance,
each against the ONNX reference implementation."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx.reference import ReferenceEvaluator

import pyarena


@pytest.mark.parametrize("outs", [["y", "rm", "rv"], ["y", "", "rv"], ["y", "rm"]])
def test_training_mode_outputs_match_the_onnx_reference(outs):
    c = 3
    node = h.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], outs,
                       training_mode=1, momentum=0.8, epsilon=1e-4)
    outputs = [h.make_tensor_value_info(o, T.FLOAT, None) for o in outs if o]
    g = h.make_graph([node], "bn", [h.make_tensor_value_info("x", T.FLOAT, [2, c, 4, 5])]
                     + [h.make_tensor_value_info(k, T.FLOAT, [c]) for k in "sbmv"], outputs)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 15)])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((2, c, 4, 5)).astype(np.float32),
             "s": rng.uniform(0.5, 2, c).astype(np.float32),
             "b": rng.standard_normal(c).astype(np.float32),
             "m": rng.standard_normal(c).astype(np.float32),
             "v": rng.uniform(0.5, 2, c).astype(np.float32)}
    want = ReferenceEvaluator(model).run(None, feeds)
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        np.testing.assert_allclose(g_, w, rtol=1e-4, atol=1e-5)
