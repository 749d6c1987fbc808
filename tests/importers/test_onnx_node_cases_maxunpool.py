"""MaxUnpool: the ONNX node case through an InferenceSession, against the
reference output and onnxruntime, and a MaxPool's values and indices
unpooled again (onnxruntime's MaxPool makes them); indices outside the
output are refused with pyarena's error.  test_maxunpool_export_with_output_shape
(an output_shape larger than the unpooled shape: the unpooled block at the
origin, zeros around it) is checked against the reference only:
onnxruntime does not reproduce it.)"""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_maxunpool_export_without_output_shape", ("maxunpool",))
WITH_SHAPE = cases(r"test_maxunpool_export_with_output_shape", ("maxunpool",))


def test_the_case_is_there():
    assert len(CASES) == 1 and len(WITH_SHAPE) == 1


def test_an_output_shape_larger_than_the_unpooled_one(tmp_path):
    check_case(WITH_SHAPE["test_maxunpool_export_with_output_shape"], tmp_path, ort=False)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _unpool_model(tmp_path, n=2, c=3):
    info = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("MaxUnpool", ["x", "i"], ["y"], kernel_shape=[2, 2],
                          strides=[2, 2])], "g",
        [info("x", TensorProto.FLOAT, [n, c, 3, 3]), info("i", TensorProto.INT64, [n, c, 3, 3])],
        [info("y", TensorProto.FLOAT, [n, c, 6, 6])])
    path = tmp_path / "unpool.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    return path


def test_unpooling_onnxruntimes_maxpool(tmp_path):
    info = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("MaxPool", ["x"], ["v", "i"], kernel_shape=[2, 2], strides=[2, 2])],
        "g", [info("x", TensorProto.FLOAT, [2, 3, 6, 6])],
        [info("v", TensorProto.FLOAT, [2, 3, 3, 3]), info("i", TensorProto.INT64, [2, 3, 3, 3])])
    pool = tmp_path / "pool.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), str(pool))
    path = _unpool_model(tmp_path)
    sess = pyarena.InferenceSession(str(path))
    rng = np.random.default_rng(2)
    for _ in range(3):          # other positions each run: the last run's are cleared
        x = rng.standard_normal((2, 3, 6, 6)).astype(np.float32)
        pooled = ort_run(pool, {"x": x})
        feeds = {"x": pooled["v"], "i": pooled["i"]}
        y, = sess.run(None, feeds)
        np.testing.assert_array_equal(y, ort_run(path, feeds)["y"])
        assert np.count_nonzero(y) == pooled["v"].size


def test_indices_outside_the_output_are_refused(tmp_path):
    sess = pyarena.InferenceSession(str(_unpool_model(tmp_path, 1, 1)))
    idx = np.arange(9).reshape(1, 1, 3, 3)
    with pytest.raises(pyarena.PyArenaError, match="indices outside"):
        sess.run(None, {"x": np.ones((1, 1, 3, 3), np.float32), "i": idx + 30})
