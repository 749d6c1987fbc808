"""If resolved at import: a condition folded from an input given as a
value (or from shapes) takes its branch, nested Ifs too.  The session
takes 0-d integer inputs by value.  An If on a run-time condition keeps
both branches (tests/runtime/test_onnx_if.py runs them)."""
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from helpers.model_zoo import ort_run
from helpers.tflite_util import small_cnn
from pyarena import InferenceSession
from pyarena.importers import ModelImportError, load_model
from pyarena.runtime import Executor

F, I = TensorProto.FLOAT, TensorProto.INT64


def _model(path):
    """y = If(sr == 16000) then [If(N == 1) then x*w else x*w + 1] else -x,
    where w is an initializer of the then branch and N is x's first dim."""
    inner_then = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["t1"])], "inner_then", [],
        [helper.make_tensor_value_info("t1", F, None)])
    inner_else = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["e0"]),
         helper.make_node("Add", ["e0", "one_f"], ["e1"])], "inner_else", [],
        [helper.make_tensor_value_info("e1", F, None)],
        [numpy_helper.from_array(np.array(1.0, np.float32), "one_f")])
    then = helper.make_graph(
        [helper.make_node("Shape", ["x"], ["s"]),
         helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
         helper.make_node("Equal", ["n", "one"], ["is1"]),
         helper.make_node("If", ["is1"], ["t"], then_branch=inner_then,
                          else_branch=inner_else)],
        "then", [], [helper.make_tensor_value_info("t", F, None)],
        [numpy_helper.from_array(np.arange(4, dtype=np.float32), "w"),
         numpy_helper.from_array(np.array(0, np.int64), "zero"),
         numpy_helper.from_array(np.array(1, np.int64), "one")])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["o"])], "else", [],
                              [helper.make_tensor_value_info("o", F, None)])
    nodes = [helper.make_node("Equal", ["sr", "k"], ["c"]),
             helper.make_node("If", ["c"], ["y"], then_branch=then, else_branch=other)]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", F, ["N", 4]),
                                       helper.make_tensor_value_info("sr", I, [])],
                          [helper.make_tensor_value_info("y", F, ["N", 4])],
                          [numpy_helper.from_array(np.array(16000, np.int64), "k")])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


def _x(n):
    return np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)


@pytest.mark.parametrize("sr, n", [(16000, 1), (16000, 3), (8000, 2)])
def test_the_branch_taken_matches_onnxruntime(tmp_path, sr, n):
    path = _model(str(tmp_path / "if.onnx"))
    g = load_model(path, inputs={"x": (n, 4)}, values={"sr": sr})
    assert "If" not in {op.op_type for op in g.ops} and "sr" not in g.inputs
    x = _x(n)
    y = Executor(g).run({"x": x})["y"]
    np.testing.assert_allclose(y, ort_run(path, {"x": x, "sr": np.array(sr)})["y"],
                               rtol=1e-6)


def test_an_if_on_data_keeps_both_branches(tmp_path):
    """sr given at run time: the outer If stays, with both branches as
    bodies; the inner If of the then branch still folds on x's shape."""
    path = _model(str(tmp_path / "if.onnx"))
    g = load_model(path, inputs={"x": (2, 4)}, values=None)
    (op,) = [op for op in g.ops if op.op_type == "If"]
    assert "If" not in {o.op_type for o in op.attrs["then"].ops}      # folded inside
    assert {"x"} <= set(op.inputs[1:]) and op.scratch_bytes > 0
    ex = Executor(g)
    for sr in (16000, 8000, 16000):
        x = _x(2)
        y = ex.run({"x": x, "sr": np.array(sr, np.int64)})["y"]
        np.testing.assert_allclose(y, ort_run(path, {"x": x, "sr": np.array(sr)})["y"],
                                   rtol=1e-6)


@pytest.mark.parametrize("values, match", [
    ({"q": 1}, "'q' is not a graph input"),
    ({"sr": [1, 2]}, r"'sr' has shape \[2\]"),
])
def test_bad_values_are_refused(tmp_path, values, match):
    path = _model(str(tmp_path / "if.onnx"))
    with pytest.raises(ModelImportError, match=match):
        load_model(path, inputs={"x": (2, 4)}, values=values)


def test_values_are_for_onnx_models(tmp_path):
    with pytest.raises(ModelImportError, match="ONNX models only"):
        load_model(small_cnn(tmp_path / "m.tflite"), values={"input": 1})


def test_the_session_takes_scalar_inputs_by_value(tmp_path):
    path = _model(str(tmp_path / "if.onnx"))
    s = InferenceSession(path)
    for sr, n in [(16000, 1), (8000, 1), (16000, 3), (16000, 1)]:
        feeds = {"x": _x(n), "sr": np.array(sr, np.int64)}
        (y,) = s.run(None, feeds)
        np.testing.assert_allclose(y, ort_run(path, feeds)["y"], rtol=1e-6)
    assert s.memory_info()["plans"] == 3


@pytest.mark.parametrize("flag", [0, 3])
def test_what_reads_an_if_sized_by_its_branch_gets_the_branch_type(tmp_path, flag):
    """An If on data whose branches give a scalar and a 1-element tensor
    (AffineGrid's function body: a step of 0, or 2 / (D - 1)): its output
    is a pool tensor, and an op reading it -- an Identity here, its output
    typed by nothing else -- takes its element type from the branches, so
    it is a pool tensor too, not a tensor nobody can size."""
    then = helper.make_graph([helper.make_node("Identity", ["zero"], ["a"])], "t", [],
                             [helper.make_tensor_value_info("a", TensorProto.FLOAT, None)])
    other = helper.make_graph([helper.make_node("Div", ["two", "df"], ["b"])], "e", [],
                              [helper.make_tensor_value_info("b", TensorProto.FLOAT, None)])
    g = helper.make_graph(
        [helper.make_node("Cast", ["d"], ["df"], to=TensorProto.FLOAT),
         helper.make_node("Equal", ["d", "one"], ["c"]),
         helper.make_node("If", ["c"], ["s"], then_branch=then, else_branch=other),
         helper.make_node("Identity", ["s"], ["s2"]),
         helper.make_node("Add", ["s2", "two"], ["y"])], "m",
        [helper.make_tensor_value_info("d", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0.0, np.float32), "zero"),
         numpy_helper.from_array(np.array(2.0, np.float32), "two"),
         numpy_helper.from_array(np.array([1], np.int64), "one")])
    path = tmp_path / "if.onnx"
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), str(path))
    d = np.array([1 if flag == 0 else flag], np.int64)
    got = InferenceSession(str(path)).run(None, {"d": d})[0]
    want = list(ort_run(path, {"d": d}).values())[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
