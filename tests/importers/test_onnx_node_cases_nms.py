"""The ONNX node cases of NonMaxSuppression (both box formats, flipped
corners, score and IoU thresholds, identical boxes, two batches and
classes, the output limit), run through an InferenceSession with every
input fed at run time, against the reference outputs and onnxruntime.
The selected indices are a pool tensor: their count is the data's."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.model_zoo import ort_run
from helpers.node_session import cases, check_case

CASES = cases(r"test_nonmaxsuppression\w*", ("nonmaxsuppression",))


def test_the_forms_are_covered():
    assert {"test_nonmaxsuppression_center_point_box_format",
            "test_nonmaxsuppression_flipped_coordinates", "test_nonmaxsuppression_two_batches",
            "test_nonmaxsuppression_iou_threshold_boundary",
            "test_nonmaxsuppression_limit_output_size"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("center", [0, 1])
def test_random_boxes_match_onnxruntime_run_after_run(tmp_path, center):
    """Many overlapping boxes, two classes; new boxes every run (the count
    selected changes), ties in the scores included; corners or centres."""
    info = helper.make_tensor_value_info
    g = helper.make_graph(
        [helper.make_node("NonMaxSuppression", ["b", "s", "m", "iou", "th"], ["y"],
                          center_point_box=center)], "g",
        [info("b", TensorProto.FLOAT, [1, 40, 4]), info("s", TensorProto.FLOAT, [1, 2, 40]),
         info("m", TensorProto.INT64, [1]), info("iou", TensorProto.FLOAT, [1]),
         info("th", TensorProto.FLOAT, [1])],
        [info("y", TensorProto.INT64, [None, 3])])
    path = tmp_path / "nms.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)]), str(path))
    sess = pyarena.InferenceSession(str(path))
    rng = np.random.default_rng(3)
    counts = set()
    for _ in range(4):
        corner = rng.uniform(0, 10, (1, 40, 2))
        boxes = np.concatenate([corner, corner + rng.uniform(1, 4, (1, 40, 2))], axis=2)
        scores = np.round(rng.uniform(0, 1, (1, 2, 40)), 1)
        feeds = {"b": boxes.astype(np.float32), "s": scores.astype(np.float32),
                 "m": np.array([40]), "iou": np.array([0.1], np.float32),
                 "th": np.array([0.2], np.float32)}
        y, = sess.run(None, feeds)
        np.testing.assert_array_equal(y, ort_run(path, feeds)["y"])
        counts.add(len(y))
    assert len(counts) > 1
