"""ConvTranspose over 3-D spatial inputs (kernels/conv_transpose_nd.py)
against onnxruntime: strides, dilations, pads, groups, output_padding,
output_shape, auto_pad, a bias, and bands of the first spatial axis under
a small scratch budget; a weight that does not fit the input refused."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from helpers.model_zoo import ort_run


def _model(xs, ws, bias, **attrs):
    inits = [helper.make_tensor("w", TensorProto.FLOAT, ws, np.random.default_rng(1)
                                .standard_normal(ws).astype(np.float32).reshape(-1))]
    ins = ["x", "w"]
    if bias:
        cout = ws[1] * int(attrs.get("group", 1))
        inits.append(helper.make_tensor("b", TensorProto.FLOAT, [cout],
                                        np.arange(cout, dtype=np.float32)))
        ins.append("b")
    g = helper.make_graph(
        [helper.make_node("ConvTranspose", ins, ["y"], **attrs)], "ct",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, xs)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("xs, ws, bias, attrs", [
    ([1, 2, 3, 4, 5], [2, 3, 2, 3, 2], True, {}),
    ([2, 4, 3, 4, 3], [4, 1, 3, 2, 3], False,
     dict(strides=[2, 1, 3], pads=[1, 0, 1, 0, 1, 2], group=2)),
    ([1, 2, 4, 3, 3], [2, 2, 2, 3, 2], True,
     dict(strides=[2, 2, 1], dilations=[2, 1, 2], output_padding=[1, 1, 0])),
    ([1, 1, 3, 3, 4], [1, 2, 3, 3, 3], False,
     dict(strides=[2, 2, 2], output_shape=[6, 5, 8])),
    ([1, 1, 3, 3, 4], [1, 2, 3, 3, 3], True, dict(strides=[2, 2, 2], auto_pad="SAME_UPPER")),
])
@pytest.mark.parametrize("budget", [None, 1])
def test_3d_conv_transpose_matches_onnxruntime(xs, ws, bias, attrs, budget, tmp_path,
                                               monkeypatch):
    import pyarena
    from pyarena.runtime.kernels import registry
    if budget is not None:
        monkeypatch.setattr(registry, "SCRATCH_BUDGET", budget)
        monkeypatch.setattr(registry, "MIN_STEP_ELEMENTS", 1)
    path = tmp_path / "ct.onnx"
    onnx.save(_model(xs, ws, bias, **attrs), str(path))
    x = np.random.default_rng(0).standard_normal(xs).astype(np.float32)
    got = pyarena.InferenceSession(str(path)).run(None, {"x": x})[0]
    want = list(ort_run(path, {"x": x}).values())[0]
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_a_weight_that_does_not_fit_is_refused():
    import pyarena
    m = _model([1, 3, 3, 4, 5], [2, 3, 2, 3, 2], False)
    with pytest.raises(pyarena.PyArenaError):
        pyarena.InferenceSession(m.SerializeToString()).run(
            None, {"x": np.zeros((1, 3, 3, 4, 5), np.float32)})
