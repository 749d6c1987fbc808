"""GridSample (pyarena/runtime/kernels/sampling.py): a grid must match the
input's batch and carry one coordinate per spatial axis (ONNX spec;
onnxruntime refuses the others too)."""
import numpy as np
import onnxruntime as ort
import pytest
from onnx import helper

from helpers.onnx_util import make_model
from pyarena.errors import GraphError
from pyarena.importers import load_model
from pyarena.runtime import Executor


@pytest.mark.parametrize("grid", [(3, 4, 4, 2), (2, 4, 4, 3)], ids=str)
def test_a_grid_that_does_not_fit_the_input_is_refused(tmp_path, grid):
    path = tmp_path / "gs.onnx"
    make_model([helper.make_node("GridSample", ["x", "g"], ["y"])],
               {"x": ([2, 1, 5, 5], np.float32), "g": (list(grid), np.float32)},
               {"y": (None, np.float32)}, opset=16, path=path)
    with pytest.raises(Exception):
        ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(
            None, {"x": np.ones((2, 1, 5, 5), np.float32), "g": np.zeros(grid, np.float32)})
    with pytest.raises(GraphError, match="does not fit input"):
        Executor(load_model(str(path)))
