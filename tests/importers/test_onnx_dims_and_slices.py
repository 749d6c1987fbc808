"""ONNX inputs with -1 / '?' dimensions (how Paddle2ONNX and others write
"any size"), and Slice folded natively (no ONNX reference evaluator)."""
import numpy as np
import onnx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

from helpers.model_zoo import ort_run
from pyarena.graph import GraphError
from pyarena.importers import load_model
from pyarena.runtime.kernels import op_fact
from pyarena.runtime.kernels.evaluators import slice_values
from pyarena.runtime.kernels.shape_rules import Node


def _slice(values, attrs, opset):
    """The Slice evaluator on ``values`` (data, starts, ends, axes, steps)."""
    return slice_values(Node.on_values("Slice", attrs, values, opset))[0]
from pyarena.runtime import Executor, random_feeds


def _paddle_style(path):
    """x[-1, 3, ?, ?] -> Conv -> GlobalAveragePool -> Reshape(Shape-computed
    [N, -1]) -> MatMul -> y[-1, 2]; the reshape target goes through Slice."""
    rng = np.random.default_rng(0)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["c"], ["p"]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Slice", ["s", "st", "en", "ax", "sp"], ["n"]),
        helper.make_node("Concat", ["n", "m1"], ["shape"], axis=0),
        helper.make_node("Reshape", ["p", "shape"], ["f"]),
        helper.make_node("MatMul", ["f", "wm"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3, "?", "?"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 2])
    inits = [numpy_helper.from_array(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), "w"),
             numpy_helper.from_array(rng.standard_normal((8, 2)).astype(np.float32), "wm"),
             numpy_helper.from_array(np.array([0], np.int64), "st"),
             numpy_helper.from_array(np.array([1], np.int64), "en"),
             numpy_helper.from_array(np.array([0], np.int64), "ax"),
             numpy_helper.from_array(np.array([1], np.int64), "sp"),
             numpy_helper.from_array(np.array([-1], np.int64), "m1")]
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits),
                          opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, path)


def test_minus_one_and_question_mark_dims_are_bound_independently(tmp_path):
    path = str(tmp_path / "m.onnx")
    _paddle_style(path)
    g = load_model(path, inputs={"x": (2, 3, 12, 20)})     # H and W differ: two unknowns
    assert g.tensors["x"].shape == (2, 3, 12, 20) and g.tensors["y"].shape == (2, 2)
    feeds = random_feeds(g, seed=1)
    np.testing.assert_allclose(Executor(g).run(feeds)["y"], ort_run(path, feeds)["y"],
                               rtol=1e-5, atol=1e-5)


def test_unbound_minus_one_dims_are_named_for_the_user(tmp_path):
    path = str(tmp_path / "m.onnx")
    _paddle_style(path)
    with pytest.raises(GraphError, match=r"x \[\?, 3, \?, \?\]"):
        load_model(path)


def _reference_slice(data, starts, ends, axes, steps):
    from onnx.reference import ReferenceEvaluator
    names = ["data", "starts", "ends", "axes", "steps"]
    node = helper.make_node("Slice", names, ["y"])
    vals = [data] + [np.array(v, np.int64) for v in (starts, ends, axes, steps)]
    g = helper.make_graph([node], "s", [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for n, v in zip(names, vals)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    ref = ReferenceEvaluator(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]))
    return ref.run(None, dict(zip(names, vals)))[0]


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_slice_matches_the_onnx_reference(data):
    shape = data.draw(st.lists(st.integers(1, 6), min_size=1, max_size=3))
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    axes = data.draw(st.lists(st.integers(-len(shape), len(shape) - 1), min_size=1,
                              max_size=len(shape), unique_by=lambda a: a % len(shape)))
    big = st.integers(-9, 9) | st.sampled_from([2**62, -2**62])
    starts = [data.draw(big) for _ in axes]
    ends = [data.draw(big) for _ in axes]
    steps = [data.draw(st.sampled_from([1, 2, 3, -1, -2])) for _ in axes]
    got = _slice([x, np.array(starts), np.array(ends), np.array(axes), np.array(steps)],
                 {}, 13)
    np.testing.assert_array_equal(got, _reference_slice(x, starts, ends, axes, steps))


def test_slice_before_opset_10_takes_attributes():
    x = np.arange(24).reshape(2, 3, 4)
    got = _slice([x], {"starts": [1, -3], "ends": [2**62, -1], "axes": [1, 2]}, 9)
    np.testing.assert_array_equal(got, x[:, 1:, -3:-1])
    with pytest.raises(ValueError):
        _slice([x, np.array([0]), np.array([1]), np.array([0]), np.array([0])], {}, 13)


def _two_round_reshapes(path):
    """x[N, 8, 6] -> Relu -> Reshape to [N, 48] through a shape that goes
    through float Casts (ONNX's data propagation stops there), then Reshape
    of that to [48, N] through Shape of the first Reshape's output: with
    ONNX's shape inference its size is only known once the first is folded
    and shapes inferred again, twice."""
    I = TensorProto.INT64
    nodes = [
        helper.make_node("Relu", ["x"], ["a"]),
        helper.make_node("Shape", ["a"], ["s1"]),
        helper.make_node("Slice", ["s1", "z", "one", "z"], ["n"]),
        helper.make_node("Cast", ["n"], ["nf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["nf"], ["ni"], to=I),
        helper.make_node("Concat", ["ni", "m1"], ["t1"], axis=0),
        helper.make_node("Reshape", ["a", "t1"], ["r1"]),
        helper.make_node("Shape", ["r1"], ["s2"]),
        helper.make_node("Slice", ["s2", "one", "two", "z"], ["k"]),
        helper.make_node("Cast", ["k"], ["kf"], to=TensorProto.FLOAT),
        helper.make_node("Cast", ["kf"], ["ki"], to=I),
        helper.make_node("Concat", ["ki", "m1"], ["t2"], axis=0),
        helper.make_node("Reshape", ["r1", "t2"], ["r2"]),
        helper.make_node("Transpose", ["r2"], ["y"], perm=[1, 0]),
    ]
    c = lambda v, n: numpy_helper.from_array(np.array(v, np.int64), n)  # noqa: E731
    m = helper.make_model(helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [c([0], "z"), c([1], "one"), c([2], "two"), c([-1], "m1")]),
        opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(m, path)


@pytest.mark.parametrize("own", [True, False])
def test_shapes_fixed_by_folding_let_more_fold(tmp_path, monkeypatch, own):
    """pyarena's own shape inference propagates the values through the
    Casts; ONNX's (what a model with an op the own rules do not cover
    gets) needs two more rounds of inference and folding."""
    import pyarena.importers.onnx_inference as inference
    monkeypatch.setattr(inference, "OWN_SHAPE_INFERENCE", own)
    path = str(tmp_path / "m.onnx")
    _two_round_reshapes(path)
    g = load_model(path, inputs={"x": (3, 8, 6)})
    assert g.tensors["y"].shape == (3, 48)
    assert not any(op.op_type in ("Shape", "Slice", "Cast", "Concat") for op in g.ops)
    feeds = random_feeds(g, seed=2)
    np.testing.assert_array_equal(Executor(g).run(feeds)["y"], ort_run(path, feeds)["y"])


def _reference(op, inputs, **attrs):
    from onnx.reference import ReferenceEvaluator
    names = [f"i{k}" for k in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    g = helper.make_graph([node], "t", [helper.make_tensor_value_info(
        n, helper.np_dtype_to_tensor_dtype(v.dtype), list(v.shape)) for n, v in zip(names, inputs)],
        [helper.make_tensor_value_info("y", TensorProto.UNDEFINED, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])
    return ReferenceEvaluator(m).run(None, dict(zip(names, inputs)))[0]


_R = np.random.default_rng(0)
FOLD_CASES = [
    ("Transpose", [_R.standard_normal((2, 3, 4)).astype(np.float32)], {"perm": [2, 0, 1]}),
    ("Transpose", [_R.standard_normal((2, 3)).astype(np.float32)], {}),
    ("Range", [np.array(2, np.int64), np.array(11, np.int64), np.array(3, np.int64)], {}),
    ("Range", [np.array(5.0, np.float32), np.array(1.0, np.float32),
               np.array(-1.5, np.float32)], {}),
    ("Range", [np.array(4, np.int64), np.array(1, np.int64), np.array(1, np.int64)], {}),
    ("Equal", [np.array([1, 2, 3]), np.array([1, 0, 3])], {}),
    ("Less", [np.array([1, 2, 3]), np.array(2)], {}),
    ("Greater", [np.array([1.5, 2.0], np.float32), np.array([1.0, 3.0], np.float32)], {}),
    ("Not", [np.array([True, False])], {}),
    ("Where", [np.array([True, False, True]), np.array([1, 2, 3]), np.array([7, 8, 9])], {}),
    ("Neg", [np.array([1, -2], np.int64)], {}),
    ("Abs", [np.array([1.5, -2.0], np.float32)], {}),
    ("Floor", [np.array([1.5, -2.5], np.float32)], {}),
    ("Ceil", [np.array([1.5, -2.5], np.float32)], {}),
    ("Sqrt", [np.array([4.0, 2.0], np.float32)], {}),
    ("Min", [np.array([3, 1, 4]), np.array([2]), np.array([5, 0, 9])], {}),
    ("Max", [np.array([3, 1, 4]), np.array([2])], {}),
    ("Expand", [np.array([[1], [2]], np.float32), np.array([2, 1, 3], np.int64)], {}),
]


@pytest.mark.parametrize("op, inputs, attrs", FOLD_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(FOLD_CASES)])
def test_numpy_folds_match_the_onnx_reference(op, inputs, attrs):
    evaluate = op_fact(op, "evaluate")
    got = np.asarray(evaluate(Node.on_values(op, attrs, inputs, 13))[0])
    want = _reference(op, inputs, **attrs)
    assert got.shape == want.shape and got.dtype == want.dtype, (got, want)
    np.testing.assert_array_equal(got, want)
