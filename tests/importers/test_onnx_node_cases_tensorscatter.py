"""The ONNX node cases of TensorScatter (linear and circular writes into a
cache, write indices fed at run time), run through an InferenceSession,
against the reference outputs and onnxruntime; a linear write past the
cache is refused with pyarena's error."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

CASES = cases(r"test_tensorscatter\w*", ("tensorscatter",))


def test_the_forms_are_covered():
    assert {"test_tensorscatter", "test_tensorscatter_3d", "test_tensorscatter_circular"} \
        <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def test_a_write_past_the_cache_is_refused(tmp_path):
    info = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("TensorScatter", ["c", "u", "i"], ["y"], axis=1)], "g",
        [info("c", TensorProto.FLOAT, [2, 4]), info("u", TensorProto.FLOAT, [2, 2]),
         info("i", TensorProto.INT64, [2])], [info("y", TensorProto.FLOAT, [2, 4])])
    path = tmp_path / "ts.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 24)]), str(path))
    sess = pyarena.InferenceSession(str(path))
    feeds = {"c": np.zeros((2, 4), np.float32), "u": np.ones((2, 2), np.float32)}
    y, = sess.run(None, dict(feeds, i=np.array([2, 0])))
    assert y.tolist() == [[0, 0, 1, 1], [1, 1, 0, 0]]
    with pytest.raises(pyarena.PyArenaError, match=r"write indices \[3, 0\]"):
        sess.run(None, dict(feeds, i=np.array([3, 0])))
