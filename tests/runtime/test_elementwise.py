"""Binary elementwise operators (pyarena/runtime/kernels/elementwise.py) on
unsigned integers, against onnxruntime: Div floors (it truncates, and both
agree on non-negative operands), the others keep their meaning."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor


@pytest.mark.parametrize("dtype", [np.uint8, np.uint32, np.uint64])
@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Max", "Min"])
def test_unsigned_binary_ops_match_onnxruntime(tmp_path, op, dtype):
    a = np.array([[7, 9, 200, 1], [0, 5, 13, 100]], dtype)
    b = np.array([[2, 4, 3, 1], [1, 5, 4, 7]], dtype)
    path = tmp_path / f"{op}.onnx"
    make_model([helper.make_node(op, ["a", "b"], ["y"])],
               {"a": ([2, 4], dtype), "b": ([2, 4], dtype)}, {"y": (None, dtype)}, path=path)
    feeds = {"a": a, "b": b}
    np.testing.assert_array_equal(Executor(load_model(str(path))).run(feeds)["y"],
                                  ort_run(path, feeds)["y"])
