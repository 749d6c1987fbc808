"""NonMaxSuppression (pyarena/runtime/kernels/detection.py) with its
optional inputs left off the end, against onnxruntime."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena.importers import load_model
from pyarena.runtime import Executor


@pytest.mark.parametrize("n_in", [2, 3, 4])
def test_nms_with_trailing_inputs_left_off_matches_onnxruntime(tmp_path, n_in):
    boxes = np.array([[[0, 0, 1, 1], [0, 0.1, 1, 1.1], [0, 2, 1, 3], [0, 0, 0.5, 0.5]]],
                     np.float32)
    scores = np.array([[[0.9, 0.8, 0.7, 0.6]]], np.float32)
    inits = {"most": np.array([3], np.int64), "iou": np.array([0.5], np.float32)}
    names = ["boxes", "scores", "most", "iou"][:n_in]
    node = helper.make_node("NonMaxSuppression", names, ["sel"])
    path = tmp_path / f"nms{n_in}.onnx"
    make_model([node], {"boxes": ([1, 4, 4], np.float32), "scores": ([1, 1, 4], np.float32)},
               {"sel": (None, np.int64)}, {k: inits[k] for k in names[2:]}, opset=11,
               path=path)
    feeds = {"boxes": boxes, "scores": scores}
    want = ort_run(path, feeds)["sel"]
    np.testing.assert_array_equal(Executor(load_model(str(path))).run(feeds)["sel"], want)
