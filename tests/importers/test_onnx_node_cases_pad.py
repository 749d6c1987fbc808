"""The ONNX node cases of Pad in mode 'wrap' (each output index reads the
input at (i - begin) mod n), and wrap pads larger than the axis, against
NumPy's ``pad(mode="wrap")``."""
import numpy as np
import pytest
from onnx import TensorProto, helper

from helpers.node_session import cases, check_case

CASES = cases(r"test_wrap_pad", ("pad",))


def test_the_forms_are_covered():
    assert {"test_wrap_pad"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def _pad(x, pads, mode="wrap"):
    import pyarena
    g = helper.make_graph(
        [helper.make_node("Pad", ["x", "p"], ["y"], mode=mode)], "p",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [helper.make_tensor("p", TensorProto.INT64, [len(pads)], pads)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    return pyarena.InferenceSession(m.SerializeToString()).run(None, {"x": x})[0]


@pytest.mark.parametrize("pads", [[0, 5, 1, 0, 7, 2], [2, 0, 0, 3, 1, 0], [0, 0, 0, 0, 0, 0]])
def test_wrap_pads_longer_than_the_axis(pads):
    x = np.arange(2 * 3 * 2, dtype=np.float32).reshape(2, 3, 2)
    want = np.pad(x, list(zip(pads[:3], pads[3:])), mode="wrap")
    np.testing.assert_array_equal(_pad(x, pads), want)


def test_wrap_padding_an_empty_axis_is_refused():
    import pyarena
    with pytest.raises(pyarena.PyArenaError, match="empty axis"):
        _pad(np.zeros((2, 0), np.float32), [0, 1, 0, 1])
