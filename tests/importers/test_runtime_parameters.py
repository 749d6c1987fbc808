"""Parameters fed at run time -- weights, scales, slopes as graph inputs,
which onnxruntime accepts: the kernel is built for each value fed (the
importer names the inputs it reads as values, ``notes.value_inputs``),
matches onnxruntime for two different values in one session, and a new
value does not grow the weights arena."""
import numpy as np
import pytest

import pyarena

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto as T, helper  # noqa: E402

C = 80      # more elements than the small run-time values read by size
CASES = {
    "PRelu": (helper.make_node("PRelu", ["x", "s"], ["y"]),
              [("x", [1, C, 3, 3]), ("s", [C, 1, 1])], [1, C, 3, 3]),
    "BatchNormalization": (
        helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["y"]),
        [("x", [1, C, 3, 3]), ("s", [C]), ("b", [C]), ("m", [C]), ("v", [C])], [1, C, 3, 3]),
    "LayerNormalization": (helper.make_node("LayerNormalization", ["x", "s", "b"], ["y"]),
                           [("x", [2, 3, C]), ("s", [C]), ("b", [C])], [2, 3, C]),
    "InstanceNormalization": (
        helper.make_node("InstanceNormalization", ["x", "s", "b"], ["y"]),
        [("x", [1, C, 3, 3]), ("s", [C]), ("b", [C])], [1, C, 3, 3]),
    "Conv": (helper.make_node("Conv", ["x", "w", "b"], ["y"]),
             [("x", [1, 8, 6, 6]), ("w", [16, 8, 3, 3]), ("b", [16])], [1, 16, 4, 4]),
    "ConvTranspose": (helper.make_node("ConvTranspose", ["x", "w"], ["y"]),
                      [("x", [1, 8, 4, 4]), ("w", [8, 16, 3, 3])], [1, 16, 6, 6]),
}


def _model(node, ins, out_shape):
    g = helper.make_graph([node], "m",
                          [helper.make_tensor_value_info(n, T.FLOAT, s) for n, s in ins],
                          [helper.make_tensor_value_info("y", T.FLOAT, out_shape)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


@pytest.mark.parametrize("op", sorted(CASES))
def test_a_parameter_fed_at_run_time_matches_onnxruntime(op):
    node, ins, out_shape = CASES[op]
    data = _model(node, ins, out_shape)
    sess = pyarena.InferenceSession(data)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(len(op))
    outs, weights = [], []
    for k in range(3):
        feeds = {n: rng.standard_normal(s).astype(np.float32) for n, s in ins}
        if "v" in feeds:
            feeds["v"] = np.abs(feeds["v"]) + 0.5
        if k == 2:      # the first value again: the kernel built for it is reused
            feeds = first
        got = sess.run(None, feeds)[0]
        np.testing.assert_allclose(got, ref.run(None, feeds)[0], rtol=1e-4, atol=1e-5)
        outs.append(got)
        weights.append(sess.memory_info()["weights_bytes"])
        first = feeds if k == 0 else first
    assert not np.allclose(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], outs[2])
    assert weights[0] == weights[1] == weights[2]


def test_the_importer_names_the_inputs_read_as_values(tmp_path):
    node, ins, out_shape = CASES["Conv"]
    path = tmp_path / "conv.onnx"
    path.write_bytes(_model(node, ins, out_shape))
    g = pyarena.load_model(str(path))
    op, = g.ops
    assert op.notes.reads_values
    assert op.notes.value_inputs == {"w", "b"}


def test_a_small_parameter_computed_at_run_time():
    """Clip's lower bound computed from an input (Neg): read as a value."""
    g = helper.make_graph(
        [helper.make_node("Neg", ["m"], ["lo"]), helper.make_node("Clip", ["x", "lo"], ["y"])],
        "clip", [helper.make_tensor_value_info("x", T.FLOAT, [5]),
                 helper.make_tensor_value_info("m", T.FLOAT, [])],
        [helper.make_tensor_value_info("y", T.FLOAT, [5])])
    data = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    sess = pyarena.InferenceSession(data)
    x = np.array([-3, -1, 0, 1, 3], np.float32)
    for m in (2.0, 0.5):
        got = sess.run(None, {"x": x, "m": np.array(m, np.float32)})[0]
        np.testing.assert_array_equal(got, np.maximum(x, -m))
