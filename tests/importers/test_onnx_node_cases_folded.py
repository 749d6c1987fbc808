"""Models whose outputs fold whole at import -- Shape (start / end) and
Size of inputs of known shape, the window functions of a size fed as a
0-d input (the session specialises on its value), Constant, a Range and
an If of constants: the ONNX node cases run through an InferenceSession
with every input fed at run time, against the reference outputs and
onnxruntime.  The folded value is copied into the output by an Identity,
so the run returns it like any output."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

MODULES = ("shape", "size", "hannwindow", "hammingwindow", "blackmanwindow", "constant",
           "rangeop", "if_")
CASES = cases(r"test_(shape\w*|size\w*|(hann|hamming|blackman)window\w*|constant"
              r"|range_(float|int32)\w*|if)", MODULES)


def test_the_forms_are_covered():
    assert {"test_shape_start_1_end_negative_1", "test_shape_clip_start", "test_size",
            "test_hannwindow_symmetric", "test_blackmanwindow_expanded", "test_constant",
            "test_if"} <= set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


def test_a_folded_output_beside_a_computed_one(tmp_path):
    """One output folds (x's shape), the other is computed from x."""
    g = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"], start=1),
         helper.make_node("Relu", ["x"], ["r"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 5])],
        [helper.make_tensor_value_info("s", TensorProto.INT64, [2]),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, [2, 3, 5])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    sess = pyarena.InferenceSession(str(path))
    x = np.random.default_rng(0).standard_normal((2, 3, 5)).astype(np.float32)
    s, r = sess.run(None, {"x": x})
    np.testing.assert_array_equal(s, np.array(x.shape[1:], np.int64))
    np.testing.assert_array_equal(r, np.maximum(x, 0))
    s[0] = -1                                       # the caller's copy, not the constant
    assert sess.run(["s"], {"x": x})[0].tolist() == list(x.shape[1:])
