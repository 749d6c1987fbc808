"""ConvTranspose over 3 spatial axes (pyarena/runtime/kernels/
conv_transpose_nd.py): a group must divide the input channels (ONNX spec;
onnxruntime refuses the model too)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena.errors import GraphError
from pyarena.importers import load_model
from pyarena.runtime import Executor


def test_a_group_that_does_not_divide_the_channels_is_refused(tmp_path):
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], group=2)
    path = tmp_path / "ct.onnx"
    make_model([node], {"x": ([1, 3, 2, 3, 3], np.float32)}, {"y": (None, np.float32)},
               {"w": np.ones((3, 2, 2, 2, 2), np.float32)}, path=path)
    with pytest.raises(Exception):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": np.ones((1, 3, 2, 3, 3), np.float32)})
    with pytest.raises(GraphError, match="group 2"):
        Executor(load_model(str(path)))
