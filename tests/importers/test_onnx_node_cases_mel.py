"""MelWeightMatrix: the ONNX node case through an InferenceSession with
every input fed at run time (the integers specialise the session, the
edge frequencies are values the kernel is built for), against the
reference output and onnxruntime; and other filter banks against ONNX's
reference evaluator."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import pyarena
from helpers.node_session import cases, check_case

CASES = cases(r"test_melweightmatrix\w*", ("melweightmatrix",))


def test_the_case_is_there():
    assert "test_melweightmatrix" in CASES


@pytest.mark.parametrize("name", sorted(CASES))
def test_node_case(name, tmp_path):
    check_case(CASES[name], tmp_path)


@pytest.mark.parametrize("mels, dft, rate, low, high", [
    (8, 64, 8000, 0.0, 4000.0), (10, 33, 16000, 300.0, 7000.0), (3, 16, 100, 10.0, 45.0),
    (20, 256, 22050, 20.0, 11025.0)])
def test_filter_banks_match_the_reference(tmp_path, mels, dft, rate, low, high):
    from onnx.reference import ReferenceEvaluator
    info = helper.make_tensor_value_info
    names = ["mels", "dft", "rate", "low", "high"]
    g = helper.make_graph(
        [helper.make_node("MelWeightMatrix", names, ["w"])], "g",
        [info(n, TensorProto.INT64, []) for n in names[:3]] +
        [info(n, TensorProto.FLOAT, []) for n in names[3:]],
        [info("w", TensorProto.FLOAT, [dft // 2 + 1, mels])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    path = tmp_path / "mel.onnx"
    onnx.save(model, str(path))
    feeds = {"mels": np.array(mels), "dft": np.array(dft), "rate": np.array(rate),
             "low": np.array(low, np.float32), "high": np.array(high, np.float32)}
    got, = pyarena.InferenceSession(str(path)).run(None, feeds)
    want = ReferenceEvaluator(model).run(None, feeds)[0]
    assert got.any()
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
