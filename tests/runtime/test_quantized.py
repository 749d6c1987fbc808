"""DequantizeLinear of constants, folded at import (pyarena/runtime/kernels/
quantized.py), with and without a zero point, against the ONNX reference."""
import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import pyarena


@pytest.mark.parametrize("with_zp", [False, True])
def test_a_folded_constant_dequantization_matches_the_onnx_reference(with_zp):
    ins = ["q", "sc"] + (["zp"] if with_zp else [])
    inits = [numpy_helper.from_array(np.array([-128, -3, 0, 7, 127], np.int8), "q"),
             numpy_helper.from_array(np.array(0.25, np.float32), "sc"),
             numpy_helper.from_array(np.array(3, np.int8), "zp")][:len(ins)]
    nodes = [h.make_node("DequantizeLinear", ins, ["d"]), h.make_node("Add", ["d", "x"], ["y"])]
    g = h.make_graph(nodes, "dq", [h.make_tensor_value_info("x", T.FLOAT, [5])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 21)])
    feeds = {"x": np.arange(5, dtype=np.float32)}
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    got = pyarena.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(got, want)
