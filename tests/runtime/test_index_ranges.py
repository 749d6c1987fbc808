"""Run-time indices outside their axis are refused, as onnxruntime refuses
them (ONNX leaves them undefined): Gather, GatherElements, GatherND,
ScatterElements, ScatterND.  In range -- negative ones included -- they
give onnxruntime's results; an index of -2**62 is refused at once (it
used to spin in ``numpy.take(mode="wrap")`` with the GIL held); constant
indices out of range refuse the model at import."""
import numpy as np
import pytest
from onnx import helper

from helpers.model_zoo import ort_run
from helpers.onnx_util import make_model
from pyarena import InferenceSession
from pyarena.errors import GraphError, InvalidArgumentError

X = np.arange(5 * 4, dtype=np.float32).reshape(5, 4)
UPD = np.full((2, 4), -1.0, np.float32)


def _model(tmp_path, op, idx_shape, const_idx=None, **attrs):
    ins = ["x", "i"] + (["u"] if op.startswith("Scatter") else [])
    inputs = {"x": (list(X.shape), np.float32)}
    inits = {}
    if const_idx is None:
        inputs["i"] = (list(idx_shape), np.int64)
    else:
        inits["i"] = const_idx
    if op.startswith("Scatter"):
        inits["u"] = UPD if op == "ScatterND" else np.full(idx_shape, -1.0, np.float32)
    path = tmp_path / f"{op}.onnx"
    make_model([helper.make_node(op, ins, ["y"], **attrs)], inputs, {"y": (None, np.float32)},
               inits, opset=16, path=path)
    return path


# (op, indices in range, out of range above, attributes)
CASES = [
    ("Gather", np.array([[0, -5], [4, -1]]), np.array([[0, 5], [1, 2]]), {"axis": 0}),
    ("Gather", np.array([3, -4]), np.array([-5, 0]), {"axis": 1}),
    ("GatherElements", np.array([[0, -5, 4, 1]]), np.array([[0, 5, 0, 0]]), {"axis": 0}),
    ("GatherND", np.array([[4, -4], [-5, 3]]), np.array([[0, 4], [1, 1]]), {}),
    ("ScatterElements", np.array([[0, -1, 2, 3]]), np.array([[0, 9, 2, 3]]), {"axis": 0}),
    ("ScatterND", np.array([[4], [-5]]), np.array([[5], [0]]), {}),
]


@pytest.mark.parametrize("op, good, bad, attrs", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_indices_in_range_match_onnxruntime_and_out_of_range_are_refused(tmp_path, op, good,
                                                                        bad, attrs):
    assert bad.shape == good.shape
    path = _model(tmp_path, op, good.shape, **attrs)
    s = InferenceSession(path)
    got = s.run(None, {"x": X, "i": good})[0]
    np.testing.assert_array_equal(got, ort_run(path, {"x": X, "i": good})["y"])
    for b in (bad, np.full_like(good, -2 ** 62), np.full_like(good, 2 ** 62)):
        with pytest.raises(InvalidArgumentError, match="out of range"):
            s.run(None, {"x": X, "i": b})
        with pytest.raises(Exception):             # onnxruntime refuses them too
            ort_run(path, {"x": X, "i": b})
    # the session still runs after a refused call
    np.testing.assert_array_equal(s.run(None, {"x": X, "i": good})[0], got)


@pytest.mark.parametrize("op, good, bad, attrs", CASES[:4],
                         ids=[c[0] for c in CASES[:4]])
def test_constant_indices_out_of_range_refuse_the_model(tmp_path, op, good, bad, attrs):
    path = _model(tmp_path, op, bad.shape, const_idx=bad, **attrs)
    with pytest.raises(GraphError, match="out of range"):
        InferenceSession(path).run(None, {"x": X})
